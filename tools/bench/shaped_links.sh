#!/bin/bash
# Runs an hvd job, or the hvd-vs-gloo comparison, across network-namespace
# "hosts" on this machine whose every link is shaped with tc tbf. Needs root.
# The hosts come from the launcher's multi-host harness,
# tests/multihost/netns_hosts.sh (one copy): N hosts h1..hN, each its own
# network namespace with sshd, joined by a bridge; hvdrun runs on the client
# host h0 and reaches them over ssh. Everything is torn down when the command
# ends, fails, or is interrupted (Ctrl-C).
#
#   tools/bench/shaped_links.sh [--hosts 4] [--rate 1gbit|none] [--burst 512kb]
#       [--np-per-host 1] -- COMMAND [ARGS...]
#     runs `hvdrun -np N*K -H h1:K,...,hN:K COMMAND ARGS` (absolute paths:
#     every host sees this machine's files), e.g.
#     -- "$PWD/bazel-bin/tools/bench/hvd_bench" -b 64K -e 64M -f 4
#
#   tools/bench/shaped_links.sh [--hosts 4] [--rate 1gbit] --compare \
#       --out DIR [compare.py flags...]
#     runs tools/bench/compare.py --netns (hvd and gloo, one rank per host)
#
# Binaries: $BAZEL_BIN (default: the workspace's bazel-bin) must hold
# launcher/hvdrun, agent/hvd-agent and the benchmark;
# `bazel build //launcher:hvdrun //agent:hvd-agent //tools/bench:hvd_bench`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
harness="$repo/tests/multihost/netns_hosts.sh"
bin=${BAZEL_BIN:-$repo/bazel-bin}

die() { echo "shaped_links.sh: $*" >&2; exit 2; }

# Inside the harness (HVD_MH_* exported): run the job.
if [[ ${1:-} == --inside ]]; then
  shift
  mode=$1 per_host=$2
  shift 2
  if [[ $mode == compare ]]; then
    exec /usr/bin/python3 "$here/compare.py" --netns --bazel-bin "$bin" "$@"
  fi
  hosts=""
  for h in $HVD_MH_HOSTS; do hosts="$hosts${hosts:+,}$h:$per_host"; done
  n=$(( $(wc -w <<< "$HVD_MH_HOSTS") * per_host ))
  exec ip netns exec "$HVD_MH_CLIENT_NETNS" "$bin/launcher/hvdrun" \
    --agent-path "$bin/agent/hvd-agent" \
    --ssh-config-file "$HVD_MH_SSH_CONFIG" -i "$HVD_MH_SSH_KEY" \
    -np "$n" -H "$hosts" "$@"
fi

hosts=4 rate=1gbit burst=512kb per_host=1 mode=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --np-per-host) per_host=$2; shift 2 ;;
    --compare) mode=compare; shift; break ;;
    --) mode=run; shift; break ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
done
[[ -n $mode ]] || die "want -- COMMAND or --compare (see the header of $0)"
[[ $EUID -eq 0 ]] || die "needs root (network namespaces, tc)"
[[ -x $bin/launcher/hvdrun && -x $bin/agent/hvd-agent ]] ||
  die "no $bin/launcher/hvdrun or $bin/agent/hvd-agent: build them first"
[[ $mode == compare || $# -gt 0 ]] || die "no command"
shape=(--rate "$rate" --burst "$burst")
[[ $rate == none ]] && shape=()
exec "$harness" run --hosts "$hosts" "${shape[@]}" --dead-iface none -- \
  "$here/shaped_links.sh" --inside "$mode" "$per_host" "$@"
