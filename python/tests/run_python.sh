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
# Under --config=asan libhvd.so is instrumented, and the ASan runtime must be
# the first library of the (uninstrumented) interpreter, with libstdc++ right
# behind it: loaded later (by torch), ASan's __cxa_throw interceptor finds no
# real __cxa_throw and aborts the first C++ exception. Python's own
# allocations are not hvd's to check for leaks.
if [[ -n "${HVD_TEST_ASAN_PRELOAD:-}" ]]; then
  export LD_PRELOAD="${HVD_TEST_ASAN_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=0"
fi
# Under --config=tsan, likewise the ThreadSanitizer runtime. What torch,
# numpy and Python do is not instrumented and not reported
# (ignore_noninstrumented_modules); races in libhvd.so are.
if [[ -n "${HVD_TEST_TSAN_PRELOAD:-}" ]]; then
  export LD_PRELOAD="${HVD_TEST_TSAN_PRELOAD}"
  export TSAN_OPTIONS="${TSAN_OPTIONS:+${TSAN_OPTIONS}:}ignore_noninstrumented_modules=1:second_deadlock_stack=1"
fi
exec "${HVD_TEST_PYTHON:-/usr/bin/python3}" "$@"
