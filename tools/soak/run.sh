#!/usr/bin/env bash
# Soaks hvd on this host: tools/soak/soak.py on 4 ranks over shared memory,
# then over TCP (HVD_SHM=0), each for SECONDS with a sample every INTERVAL
# (see soak.py for what is sampled and what counts as flat). Exits non-zero
# if either run had a wrong result or a resource that grew.
#
#   tools/soak/run.sh [SECONDS] [INTERVAL] [soak.py flags, e.g. --trim]
#   (default 1800 60: 30 minutes each)
#
# Runs the hvdrun, hvd-agent and libhvd.so of bazel-bin (or of the runfiles
# tree under bazel test): bazel build //launcher:hvdrun //agent:hvd-agent
# //core:libhvd.so first.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-__main__}"
else
  cd "$(dirname "$0")/../.."
fi
seconds=${1:-1800}
interval=${2:-60}
shift 2 || shift $#
warmup=$((2 * interval))
status=0
for transport in shm tcp; do
  echo "soak: over $transport, ${seconds}s"
  shm=1
  [[ $transport == tcp ]] && shm=0
  HVD_SHM=$shm /usr/bin/python3 python/tests/hvdrun_driver.py --np 4 \
    --timeout $((seconds + 180)) ../../tools/soak/soak.py \
    --seconds "$seconds" --interval "$interval" --warmup "$warmup" "$@" ||
    status=1
done
exit $status
