#!/bin/bash
# Runs a Python file of this package with Debian's python3 (where torch and
# numpy live), from the Bazel runfiles tree: the entry point of the tests.
#
# Why not py_test: Bazel 4's py_test launcher starts with `#!/usr/bin/env
# python`, and this machine has no `python` on the test PATH (see
# docs/python.md, "Tests").
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-__main__}"
fi
export PYTHONPATH="${PWD}/python${PYTHONPATH:+:${PYTHONPATH}}"
export PYTHONDONTWRITEBYTECODE=1
exec "${HVD_TEST_PYTHON:-/usr/bin/python3}" "$@"
