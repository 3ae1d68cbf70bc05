#!/usr/bin/env bash
# Sets up hvd on a fresh Debian 12 machine, as root: installs the Debian
# packages hvd needs, builds everything with Bazel (offline), and installs
# hvdrun and hvd-agent on PATH and the Python package (hvd, horovod shim)
# for /usr/bin/python3. Idempotent: safe to rerun.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

PACKAGES=(
  bazel-bootstrap bazel-bootstrap-source      # Bazel 4, offline rule repos
  g++ clang-14 libclang-rt-14-dev             # clang: thread-safety, libFuzzer
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev libboost1.74-dev libdlpack-dev libibverbs-dev rdma-core
  libfabric-dev libfabric-bin                # RDMA transport (rdma/), fi_info
  libgtest-dev libgmock-dev googletest
  libyaml-cpp-dev                            # hvdrun --config-file (YAML)
  libssl-dev                                 # the rendezvous's per-job TLS CA
  python3-torch python3-torchvision python3-numpy python3-matplotlib
  python3-pytest python3-mock python3-cloudpickle  # hvd.run; Horovod's test suite
  python3-pip python3-wheel                  # building and installing the wheel
  libpython3-dev                             # the bindings' C module (hvd._speedups)
  openmpi-bin libopenmpi-dev libpmix-dev      # MPI anchor; mpirun jobs (PMIx)
  openssh-server openssh-client iproute2 procps psmisc  # multi-host tests
  slurmctld slurmd slurm-client munge        # Slurm test cluster (tests/slurm)
  golang-go                                  # Helm chart renderer (deploy/render)
  chromium                                   # the metrics page's test (tests/metrics)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "setup: building (bazel, offline)"
bazel build --noshow_progress --ui_event_filters=-info --show_result=0 \
  //launcher:hvdrun //agent:hvd-agent //core:libhvd.so \
  //python:_speedups.abi3.so

install -m 0755 bazel-bin/launcher/hvdrun /usr/local/bin/hvdrun
install -m 0755 bazel-bin/agent/hvd-agent /usr/local/bin/hvd-agent
install -m 0755 bazel-bin/launcher/hvd-selftest /usr/local/bin/hvd-selftest

# Python: the hvd wheel (python/pyproject.toml, with libhvd.so inside),
# installed by pip into Debian's python3, which reads
# /usr/local/lib/python3.X/dist-packages (PEP 668 makes pip say so with
# --break-system-packages). `pip uninstall hvd` removes it.
SITE=$(/usr/bin/python3 -c 'import sys; print(f"/usr/local/lib/python3.{sys.version_info[1]}/dist-packages")')
PIP=(/usr/bin/python3 -m pip --disable-pip-version-check)
# An older setup copied the packages there without pip's record of them.
if ! "${PIP[@]}" show -q hvd 2>/dev/null; then
  rm -rf "$SITE/hvd" "$SITE/horovod"
fi
wheel=$(bash tools/wheel/build_wheel.sh "$ROOT/out/wheel")
"${PIP[@]}" install -q --no-index --no-deps --force-reinstall \
  --break-system-packages --root-user-action=ignore "$wheel"
echo "setup: done (hvdrun $(command -v hvdrun), $(basename "$wheel") in $SITE)"
