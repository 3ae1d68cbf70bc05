#!/bin/bash
# A real Slurm cluster on one machine, for hvd's tests: Debian's slurm-wlm
# (22.05), slurmctld and one slurmd per host, each host a network namespace
# of tests/multihost/netns_hosts.sh, authenticated by a munged with a key of
# its own. All state is in one temporary directory and in the hosts'
# namespaces: nothing of the machine's own Slurm or munge setup is used or
# changed. Needs root.
#
#   slurm_cluster.sh run [options] -- COMMAND [ARGS...]
#       bring the cluster up, run COMMAND on the client host h0 (inside its
#       network namespace, where sbatch, salloc, srun, squeue and sinfo reach
#       slurmctld) with the variables below exported, and remove every
#       daemon, namespace and file it made when COMMAND ends, fails or is
#       interrupted; exits with COMMAND's code.
#   slurm_cluster.sh up [options]   bring it up, print the run directory
#                                   (source DIR/env for the variables)
#   slurm_cluster.sh down DIR       remove what `up` made
#   slurm_cluster.sh exec DIR HOST COMMAND...
#                                   run COMMAND in HOST's namespace (h0..hN)
#   slurm_cluster.sh gc             remove leftovers of runs whose owner died
#                                   (`up` and `run` do this first)
#
# Options:
#   --nodes N     compute nodes h1..hN, one slurmd each (default 2)
#   --cpus C      CPUs each node declares (default 4; more than this machine
#                 has is fine: SlurmdParameters=config_overrides)
#   --timeout S   how long to wait for every node to be idle (default 60)
#
# Exported (and written to DIR/env), besides netns_hosts.sh's HVD_MH_*
# (HVD_MH_NETNS_<h>, HVD_MH_ADDR_<h>, ...):
#   HVD_SLURM_DIR           the run directory
#   SLURM_CONF, HVD_SLURM_CONF  its slurm.conf (every Slurm command needs it)
#   HVD_SLURM_NODES         "h1 h2 ..." the node names: each one's NodeName
#                           and the hostname inside its namespaces
#   HVD_SLURM_CLIENT_NETNS  namespace of h0 (slurmctld and munged run there)
#   HVD_SLURM_LOGS          slurmctld.log, slurmd-<node>.log, munged.log
#   HVD_SLURM_MUNGE_SOCKET  munged's socket (slurm.conf names it: AuthInfo)
#
# How it is put together (and why):
# - munged: one for all hosts, in h0's namespace, with a random key and its
#   socket in the run directory (a Unix socket path is reachable from every
#   network namespace); slurm.conf points at it with AuthInfo=socket=.
# - slurmctld: in h0, in a UTS namespace of its own named h0, since it must
#   run on the host SlurmctldHost names.
# - slurmd: `slurmd -N hI` in hI's namespace, in a UTS namespace named hI (so
#   jobs see their node's name), with %n in its spool, pid and log paths.
#   Debian's slurmd insists on a cgroup plugin, and `ip netns exec` mounts a
#   fresh /sys without cgroups: each slurmd gets a private tmpfs on
#   /sys/fs/cgroup holding one empty named v1 hierarchy (not systemd's) where
#   the plugin looks. Processes are tracked by proctrack/linuxproc, tasks not
#   bound (task/none).
# - Slurm's node-to-node traffic uses NodeAddr= the namespace addresses. The
#   jobs resolve the nodes' names (h0..hN) as a cluster's DNS would let
#   them: each slurmd's mount namespace has the run directory's hosts file
#   bound on /etc/hosts, and its steps inherit it.
# - Teardown kills every process in the namespaces (netns_hosts.sh down): the
#   daemons, slurmstepd and whatever a job left, then removes the directory.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETNS_SH=${HVD_NETNS_HOSTS_SH:-$HERE/../multihost/netns_hosts.sh}

die() { echo "slurm_cluster.sh: $*" >&2; exit 2; }

# ---- tear-down -------------------------------------------------------------

down() {
  local dir=$1
  [[ -f "$dir/owner" ]] || die "$dir is not a run directory of this script"
  # Kills every process in the hosts' namespaces (daemons, slurmstepd, jobs)
  # and deletes the namespaces.
  if [[ -d "$dir/net" ]]; then "$NETNS_SH" down "$dir/net" || true; fi
  if [[ -f "$dir/keeper.pid" ]]; then
    kill -9 "$(cat "$dir/keeper.pid")" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

# Run directories whose owner is gone: their namespaces (and every process
# in them) are removed by netns_hosts.sh gc; the files here.
gc() {
  "$NETNS_SH" gc
  local d owner
  for d in /tmp/hvd-slurm.*; do
    [[ -f "$d/owner" ]] || continue
    owner=$(cat "$d/owner")
    if ! kill -0 "$owner" 2>/dev/null; then
      rm -rf "$d"
      echo "removed $d"
    fi
  done
}

# ---- bring-up --------------------------------------------------------------

# Brings up the hosts h0..hN. run: owned by this script (its death lets gc
# remove them). up: owned by a keeper process that outlives this script.
hosts_up() {
  local dir=$1 mode=$2 nodes=$3
  if [[ $mode == run ]]; then
    echo $$ > "$dir/owner"
    # A direct child, so that netns_hosts.sh sees this script as its owner.
    "$NETNS_SH" up --hosts "$nodes" --dead-iface none --dir "$dir/net" \
      > /dev/null
    return
  fi
  # The keeper runs netns_hosts.sh (its parent, hence the owner), then
  # becomes `sleep infinity` under the same pid.
  setsid bash -c '"$1" up --hosts "$2" --dead-iface none --dir "$3" \
      > "$4.log" 2>&1; echo $? > "$4"; exec sleep infinity' keeper \
    "$NETNS_SH" "$nodes" "$dir/net" "$dir/netns.rc" \
    < /dev/null > /dev/null 2>&1 &
  echo $! > "$dir/keeper.pid"
  echo $! > "$dir/owner"
  local i
  for i in $(seq 1 600); do
    [[ -s "$dir/netns.rc" ]] && break
    sleep 0.1
  done
  [[ "$(cat "$dir/netns.rc" 2>/dev/null)" == 0 ]] ||
    { cat "$dir/netns.rc.log" >&2 2>/dev/null; return 1; }
}

write_conf() {
  local dir=$1 cpus=$2 nodes=$3 i addr
  cat > "$dir/etc/slurm.conf" <<EOF
ClusterName=hvdtest
SlurmctldHost=h0($HVD_MH_ADDR_h0)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge-socket/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=10
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
EOF
  for i in $(seq 1 "$nodes"); do
    addr=HVD_MH_ADDR_h$i
    echo "NodeName=h$i NodeAddr=${!addr} CPUs=$cpus State=UNKNOWN" \
      >> "$dir/etc/slurm.conf"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" \
    >> "$dir/etc/slurm.conf"
  # The cluster's names, as its DNS would give them (bound on each node's
  # /etc/hosts).
  printf '127.0.0.1 localhost\n' > "$dir/etc/hosts"
  for i in $(seq 0 "$nodes"); do
    addr=HVD_MH_ADDR_h$i
    echo "${!addr} h$i" >> "$dir/etc/hosts"
  done
}

start_munged() {
  local dir=$1
  # munged checks: the key and its directory private, the socket's directory
  # (and every one above it) searchable by all.
  mkdir -m 700 "$dir/munge"
  mkdir -m 755 "$dir/munge-socket"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge/munge.key"
  ip netns exec "$HVD_MH_NETNS_h0" munged \
    --socket="$dir/munge-socket/munge.sock" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
    < /dev/null > /dev/null 2>&1
}

start_slurmctld() {
  local dir=$1
  ip netns exec "$HVD_MH_NETNS_h0" unshare --uts -- bash -c \
    'hostname h0 && exec slurmctld -f "$1"' slurmctld "$dir/etc/slurm.conf" \
    < /dev/null >> "$dir/log/slurmctld.out" 2>&1
}

start_slurmd() {
  local dir=$1 node=$2 ns
  ns=HVD_MH_NETNS_$node
  mkdir -p "$dir/spool/$node"
  # The mounts happen in the mount namespace `ip netns exec` makes for this
  # command only; they end with the last process in it.
  ip netns exec "${!ns}" unshare --uts -- bash -c '
      hostname "$1" &&
      mount -t tmpfs -o size=1m,mode=755 hvd-slurm /sys/fs/cgroup &&
      mkdir /sys/fs/cgroup/systemd &&
      mount -t cgroup -o none,name=hvd-slurm cgroup /sys/fs/cgroup/systemd &&
      mount --bind "$3" /etc/hosts &&
      exec slurmd -N "$1" -f "$2"' slurmd "$node" "$dir/etc/slurm.conf" \
    "$dir/etc/hosts" \
    < /dev/null >> "$dir/log/slurmd-$node.out" 2>&1
}

# Waits until sinfo shows every node idle.
wait_idle() {
  local dir=$1 nodes=$2 timeout=$3 deadline idle=0
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    idle=$(ip netns exec "$HVD_MH_NETNS_h0" sinfo -h -N -o '%N %t' 2>/dev/null |
      awk '$2 == "idle" {n++} END {print n + 0}')
    ((idle == nodes)) && return 0
    sleep 0.2
  done
  echo "slurm_cluster.sh: $idle of $nodes nodes idle after ${timeout} s;" \
    "sinfo and the logs' tails:" >&2
  ip netns exec "$HVD_MH_NETNS_h0" sinfo -N >&2 || true
  tail -n 5 "$dir"/log/* >&2 || true
  return 1
}

up() {
  local dir=$1 mode=$2 nodes=2 cpus=4 timeout=60 i
  shift 2
  while [[ $# -gt 0 ]]; do
    case $1 in
      --nodes) nodes=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ "$nodes" =~ ^[0-9]+$ && $nodes -ge 1 && $nodes -le 64 ]] ||
    die "--nodes wants 1..64"
  [[ "$cpus" =~ ^[0-9]+$ && $cpus -ge 1 ]] || die "--cpus wants a number"
  [[ $EUID -eq 0 ]] || die "needs root (network namespaces, mounts)"
  command -v slurmctld > /dev/null && command -v munged > /dev/null ||
    die "needs slurmctld, slurmd, slurm-client and munge (apt-get install" \
      "slurmctld slurmd slurm-client munge)"
  gc > /dev/null
  chmod 711 "$dir"  # munged wants the socket's path searchable by all
  mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
  hosts_up "$dir" "$mode" "$nodes"
  set -a
  # shellcheck disable=SC1091
  source "$dir/net/env"
  set +a
  write_conf "$dir" "$cpus" "$nodes"
  start_munged "$dir"
  start_slurmctld "$dir"
  local names=""
  for i in $(seq 1 "$nodes"); do
    start_slurmd "$dir" "h$i"
    names="$names h$i"
  done
  {
    cat "$dir/net/env"
    echo "export HVD_SLURM_DIR=$dir"
    echo "export SLURM_CONF=$dir/etc/slurm.conf"
    echo "export HVD_SLURM_CONF=$dir/etc/slurm.conf"
    echo "export HVD_SLURM_NODES=\"${names# }\""
    echo "export HVD_SLURM_CLIENT_NETNS=$HVD_MH_NETNS_h0"
    echo "export HVD_SLURM_LOGS=$dir/log"
    echo "export HVD_SLURM_MUNGE_SOCKET=$dir/munge-socket/munge.sock"
  } > "$dir/env"
  export SLURM_CONF=$dir/etc/slurm.conf
  wait_idle "$dir" "$nodes" "$timeout"
}

# ---- entry points ----------------------------------------------------------

cmd=${1:-}
[[ -n "$cmd" ]] || die "usage: run|up|down|exec|gc (see the header)"
shift
case $cmd in
  up)
    dir=$(mktemp -d /tmp/hvd-slurm.XXXXXX)
    # Whatever fails on the way up, nothing is left behind.
    trap 'if [[ -f "$dir/owner" ]]; then down "$dir"; fi; rm -rf "$dir"' EXIT
    up "$dir" up "$@" >&2
    trap - EXIT
    echo "$dir"
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
    set -a
    # shellcheck disable=SC1091
    source "$dir/env"
    set +a
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
      if [[ -n "$child" ]]; then
        kill -9 "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
      fi
      if [[ -n "$dir" && -f "$dir/owner" ]]; then down "$dir"; fi
      [[ -n "$dir" ]] && rm -rf "$dir"
      exit "$rc"
    }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    dir=$(mktemp -d /tmp/hvd-slurm.XXXXXX)
    up "$dir" run "${opts[@]}" >&2
    set -a
    # shellcheck disable=SC1091
    source "$dir/env"
    set +a
    # In the background, so a signal to this script runs the trap at once.
    ip netns exec "$HVD_SLURM_CLIENT_NETNS" "$@" &
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
