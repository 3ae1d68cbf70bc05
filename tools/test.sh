#!/usr/bin/env bash
# Runs every test (bazel test //...), then the thread-safety analysis (the
# C++ built with clang -Werror=thread-safety, counted as one more case), and
# prints the total over all test cases: "N passed, N failed"
# (tools/count_tests.py). Exit status: non-zero if either failed.
set -uo pipefail
cd "$(dirname "$0")/.."

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
bazel test //... --keep_going --noshow_progress "$@" 2>&1 | tee "$summary"
status=${PIPESTATUS[0]}

# In an output base of its own (one per checkout): switching the compiler in
# the main one would reconfigure its toolchain for every later build.
echo "test: thread-safety analysis (clang -Werror=thread-safety)"
clang_base="$HOME/.cache/hvd-bazel-clang/$(pwd | md5sum | cut -c1-12)"
tsa_log=$(mktemp)
trap 'rm -f "$summary" "$tsa_log"' EXIT
bazel --output_base="$clang_base" build \
  --config=thread-safety --noshow_progress \
  //core/... //launcher/... //agent/... //host/... >"$tsa_log" 2>&1
tsa_status=$?
if ((tsa_status)); then
  grep -E 'error|warning: .*thread-safety' "$tsa_log" | head -40
fi
bazel --output_base="$clang_base" shutdown >/dev/null 2>&1

/usr/bin/python3 tools/count_tests.py "$summary" \
  "thread-safety-analysis=$tsa_status"
((status == 0 && tsa_status == 0)) || exit $((status ? status : 1))
