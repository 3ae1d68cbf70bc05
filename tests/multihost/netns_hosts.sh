#!/bin/bash
# Several "hosts" on one machine for hvd's multi-host tests and benchmarks:
# each host is a network namespace with its own sshd, all joined by a bridge
# (which lives in a namespace of its own: nothing is added to the machine's
# own network). Needs root.
#
#   netns_hosts.sh run [options] -- COMMAND [ARGS...]
#       bring hosts up, run COMMAND with the HVD_MH_* variables below
#       exported, tear everything down when it ends, fails, or is
#       interrupted; exits with COMMAND's code.
#   netns_hosts.sh up [options]      bring hosts up, print the run directory
#                                    (source DIR/env for the variables)
#   netns_hosts.sh down DIR          tear down what `up` made
#   netns_hosts.sh exec DIR HOST COMMAND...   run COMMAND inside HOST (h0..hN)
#   netns_hosts.sh gc                remove leftovers of runs whose owner died
#                                    (`up` and `run` do this first)
#
# Options:
#   --hosts N        number of ssh hosts h1..hN (default 2); h0 is always
#                    added: a client host without sshd, where hvdrun runs
#   --rate R         shape every link with `tc qdisc ... tbf rate R`
#                    (e.g. 1gbit), both directions
#   --burst B        tbf burst (default 512kb)
#   --dead-iface M   each host also gets dead0, an interface that goes
#                    nowhere (a veth whose far end is on no bridge; it comes
#                    first in the interface list):
#                    separate (default: its own subnet per host, so peers
#                    have no route to it), shared (one subnet for all: peers
#                    route to it and time out), none
#
# Exported (and written to DIR/env):
#   HVD_MH_DIR         the run directory (keys, configs, logs)
#   HVD_MH_HOSTS       "h1 h2 ..."   names usable with ssh -F $HVD_MH_SSH_CONFIG
#   HVD_MH_NETNS_<h>   namespace of host <h> (h0..hN)
#   HVD_MH_ADDR_<h>    its address on the bridge (<subnet>.10+i)
#   HVD_MH_DEAD_<h>    its dead0 address (unless --dead-iface none)
#   HVD_MH_CLIENT_NETNS  namespace of h0
#   HVD_MH_SSH_CONFIG  ssh client config (host aliases, known_hosts); no key
#   HVD_MH_SSH_KEY     the client key every sshd accepts (pass with -i)
#   HVD_MH_BAD_KEY     a key no sshd accepts
#   HVD_MH_UNREACHABLE an address on the bridge's subnet where nobody is
#   HVD_MH_SSHD_PIDS   pids of the sshd listeners
#
# Names are unique per run (hvdmh-<owner pid>-<random>-<host>), so parallel
# runs cannot collide.
set -euo pipefail
# tc, sshd and friends live in sbin, which a test's PATH lacks.
export PATH="$PATH:/usr/sbin:/sbin"

# Addresses differ per run too (a random /24 in 10.64.0.0/10 for the bridge,
# a /16 in 172.16.0.0/12 for the dead interfaces), although each run's hosts
# only ever see their own namespaces.
SUBNET=10.$((64 + RANDOM % 64)).$((RANDOM % 256))
DEAD_NET=172.$((16 + RANDOM % 16))

die() { echo "netns_hosts.sh: $*" >&2; exit 2; }

# ---- tear-down -------------------------------------------------------------

kill_netns_processes() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n "$pids" ]] && kill -9 $pids 2>/dev/null || true
}

down() {
  local dir=$1
  [[ -f "$dir/namespaces" ]] || { rm -rf "$dir"; return 0; }
  local ns
  # Two rounds: a process killed in the first may have been forking.
  for round in 1 2; do
    while read -r ns; do kill_netns_processes "$ns"; done < "$dir/namespaces"
    sleep 0.05
  done
  while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done \
    < "$dir/namespaces"
  rm -rf "$dir"
}

gc() {
  local ns owner
  for ns in $(ip netns list | awk '{print $1}' | grep '^hvdmh-' || true); do
    owner=$(echo "$ns" | cut -d- -f2)
    if ! kill -0 "$owner" 2>/dev/null; then
      kill_netns_processes "$ns"
      ip netns del "$ns" 2>/dev/null || true
      echo "removed $ns"
    fi
  done
}

# ---- bring-up --------------------------------------------------------------

wait_for_sshd() {
  local client=$1 addr=$2 i
  for i in $(seq 1 200); do
    if ip netns exec "$client" timeout 1 bash -c "exec 3<>/dev/tcp/$addr/22" \
        2>/dev/null; then
      return 0
    fi
    sleep 0.02
  done
  die "sshd at $addr did not come up"
}

up() {
  local hosts=2 rate="" burst=512kb dead=separate owner=$1 dir=""
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      --hosts) hosts=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --dead-iface) dead=$2; shift 2 ;;
      --dir) dir=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ "$hosts" =~ ^[0-9]+$ && $hosts -ge 1 && $hosts -le 200 ]] ||
    die "--hosts wants 1..200"
  [[ "$dead" =~ ^(none|separate|shared)$ ]] || die "--dead-iface: $dead"
  [[ $EUID -eq 0 ]] || die "needs root (network namespaces)"
  gc > /dev/null  # leftovers of runs that were SIGKILLed
  [[ -n "$dir" ]] || dir=$(mktemp -d /tmp/hvd-mh.XXXXXX)
  mkdir -p "$dir"
  chmod 700 "$dir"
  local prefix="hvdmh-$owner-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
  local sw="$prefix-sw"
  : > "$dir/namespaces"

  ip netns add "$sw"
  echo "$sw" >> "$dir/namespaces"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up

  ssh-keygen -q -t ed25519 -N '' -C hvd-mh-client -f "$dir/id_ed25519"
  ssh-keygen -q -t ed25519 -N '' -C hvd-mh-bad -f "$dir/bad_key"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  mkdir -p /run/sshd  # sshd's privilege-separation directory
  : > "$dir/known_hosts"
  {
    echo "Host *"
    echo "  User root"
    echo "  IdentitiesOnly yes"
    echo "  UserKnownHostsFile $dir/known_hosts"
    echo "  GlobalKnownHostsFile /dev/null"
    echo "  StrictHostKeyChecking yes"
    echo "  LogLevel ERROR"
  } > "$dir/ssh_config.tail"
  : > "$dir/ssh_config"
  local env="$dir/env" names="" sshd_pids="" i
  {
    echo "export HVD_MH_DIR=$dir"
    echo "export HVD_MH_SSH_CONFIG=$dir/ssh_config"
    echo "export HVD_MH_SSH_KEY=$dir/id_ed25519"
    echo "export HVD_MH_BAD_KEY=$dir/bad_key"
    echo "export HVD_MH_UNREACHABLE=$SUBNET.250"
  } > "$env"

  for i in $(seq 0 "$hosts"); do
    local h="h$i" ns="$prefix-h$i" addr="$SUBNET.$((10 + i))"
    ip netns add "$ns"
    echo "$ns" >> "$dir/namespaces"
    ip -n "$ns" link set lo up
    if [[ $dead != none ]]; then
      # Created before eth0: it comes first in the interface list, where a
      # launcher that takes "the first interface" would wrongly pick it.
      local dead_addr
      if [[ $dead == shared ]]; then
        dead_addr="$DEAD_NET.0.$((10 + i))/16"
      else
        dead_addr="$DEAD_NET.$i.1/24"
      fi
      # A cable to nowhere: a veth whose other end is up in the switch
      # namespace but on no bridge, so the link looks alive and drops all.
      ip link add dead0 netns "$ns" type veth peer name "d$i" netns "$sw"
      ip -n "$sw" link set "d$i" up
      ip -n "$ns" addr add "$dead_addr" dev dead0
      ip -n "$ns" link set dead0 up
      echo "export HVD_MH_DEAD_$h=${dead_addr%/*}" >> "$env"
    fi
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ -n "$rate" ]]; then
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" \
        burst "$burst" latency 50ms
      ip netns exec "$sw" tc qdisc add dev "p$i" root tbf rate "$rate" \
        burst "$burst" latency 50ms
    fi
    echo "export HVD_MH_NETNS_$h=$ns" >> "$env"
    echo "export HVD_MH_ADDR_$h=$addr" >> "$env"
    [[ $i -eq 0 ]] && echo "export HVD_MH_CLIENT_NETNS=$ns" >> "$env"
    [[ $i -eq 0 ]] && continue

    names="$names $h"
    local hd="$dir/$h"
    mkdir -p "$hd"
    ssh-keygen -q -t ed25519 -N '' -C "$h" -f "$hd/host_key"
    echo "$h,$addr $(cut -d' ' -f1,2 "$hd/host_key.pub")" >> "$dir/known_hosts"
    printf 'Host %s\n  HostName %s\n' "$h" "$addr" >> "$dir/ssh_config"
    cat > "$hd/sshd_config" <<EOF
ListenAddress $addr
Port 22
HostKey $hd/host_key
PidFile $hd/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowAgentForwarding no
MaxStartups 200
MaxSessions 200
LogLevel ERROR
EOF
    ip netns exec "$ns" /usr/sbin/sshd -f "$hd/sshd_config" -E "$hd/sshd.log"
  done
  cat "$dir/ssh_config.tail" >> "$dir/ssh_config"
  rm "$dir/ssh_config.tail"
  local client="$prefix-h0"
  for i in $(seq 1 "$hosts"); do
    wait_for_sshd "$client" "$SUBNET.$((10 + i))"
    sshd_pids="$sshd_pids $(cat "$dir/h$i/sshd.pid")"
  done
  echo "export HVD_MH_HOSTS=\"${names# }\"" >> "$env"
  echo "export HVD_MH_SSHD_PIDS=\"${sshd_pids# }\"" >> "$env"
  echo "$dir"
}

# ---- entry points ----------------------------------------------------------

cmd=${1:-}
[[ -n "$cmd" ]] || die "usage: run|up|down|exec|gc (see the header)"
shift
case $cmd in
  up)
    up "$PPID" "$@"
    ;;
  down)
    [[ $# -eq 1 && -d "$1" ]] || die "down DIR"
    down "$1"
    ;;
  exec)
    [[ $# -ge 3 ]] || die "exec DIR HOST COMMAND..."
    dir=$1 host=$2
    shift 2
    ns=$(bash -c "source '$dir/env'; echo \${HVD_MH_NETNS_$host:-}")
    [[ -n "$ns" ]] || die "no host $host in $dir"
    exec ip netns exec "$ns" "$@"
    ;;
  gc)
    gc
    ;;
  run)
    opts=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do opts+=("$1"); shift; done
    [[ $# -ge 2 ]] || die "run [options] -- COMMAND..."
    shift
    child=""
    dir=""
    cleanup() {
      local rc=$?
      trap - EXIT INT TERM
      if [[ -n "$child" ]]; then kill -9 "$child" 2>/dev/null || true; fi
      [[ -n "$dir" ]] && down "$dir"
      exit $rc
    }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    dir=$(mktemp -d /tmp/hvd-mh.XXXXXX)
    up "$$" --dir "$dir" "${opts[@]}" > /dev/null
    set -a
    # shellcheck disable=SC1091
    source "$dir/env"
    set +a
    # In the background, so a signal to this script runs the trap at once.
    "$@" &
    child=$!
    set +e
    wait "$child"
    rc=$?
    child=""
    exit $rc
    ;;
  *)
    die "unknown command $cmd"
    ;;
esac
