#!/usr/bin/env bash
# Runs every test (bazel test //...) and prints the total over all test
# cases: "N passed, N failed" (tools/count_tests.py). Exit status is bazel's.
set -uo pipefail
cd "$(dirname "$0")/.."

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
bazel test //... --keep_going --noshow_progress "$@" 2>&1 | tee "$summary"
status=${PIPESTATUS[0]}
/usr/bin/python3 tools/count_tests.py "$summary"
exit "$status"
