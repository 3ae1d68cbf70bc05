#!/bin/bash
# Runs a Python file of these tests with Debian's python3 (pytest, PyYAML,
# torch), from the Bazel runfiles tree when there is one.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-hvd}"
fi
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 "$@"
