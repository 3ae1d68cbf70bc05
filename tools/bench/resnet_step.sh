#!/bin/bash
# Step time of resnet18 (batch 16, CPU): hvd.DistributedOptimizer against
# torch DDP over gloo, 2 processes on this host, measured in the same job.
#   tools/bench/resnet_step.sh [-np N] [resnet_step.py flags, e.g. --json out.json]
# Uses hvdrun from PATH (tools/setup.sh installs it), else builds it here.
set -euo pipefail
cd "$(dirname "$0")/../.."
NP=2
if [[ "${1:-}" == "-np" ]]; then NP="$2"; shift 2; fi
PY="${HVD_PYTHON:-/usr/bin/python3}"
if command -v hvdrun >/dev/null && command -v hvd-agent >/dev/null \
    && "$PY" -c "import hvd.torch" 2>/dev/null; then
  exec hvdrun -np "$NP" "$PY" tools/bench/resnet_step.py "$@"
fi
bazel build //launcher:hvdrun //agent:hvd-agent //core:libhvd.so
export HVD_AGENT_PATH="$PWD/bazel-bin/agent/hvd-agent"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
exec bazel-bin/launcher/hvdrun -np "$NP" "$PY" tools/bench/resnet_step.py "$@"
