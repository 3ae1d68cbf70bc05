#!/bin/bash
# //core/gpu:torch_gpu_test: runs torch_gpu_check.py as a job of size 1 with
# Debian's python3 (or $HVD_TEST_PYTHON) from the Bazel runfiles tree. Where
# torch has no CUDA the script prints "SKIPPED: <why>" and passes.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-__main__}"
fi
export PYTHONPATH="${PWD}/python${PYTHONPATH:+:${PYTHONPATH}}"
export HVD_LIBRARY="${PWD}/core/libhvd.so"
export PYTHONDONTWRITEBYTECODE=1
exec "${HVD_TEST_PYTHON:-/usr/bin/python3}" tools/gpu/torch_gpu_check.py
