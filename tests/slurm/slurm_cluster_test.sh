#!/bin/bash
# slurm_cluster.sh itself: the cluster it brings up runs jobs on every node
# under each node's own name, and whatever way it ends (the command fails,
# the script is interrupted, up then down) nothing it made is left: no
# daemon, no namespace, no file.
set -euo pipefail
if [[ -n "${TEST_SRCDIR:-}" ]]; then
  cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-__main__}"
fi
CLUSTER=$PWD/tests/slurm/slurm_cluster.sh
TMP=$(mktemp -d "${TEST_TMPDIR:-/tmp}/cluster-test.XXXXXX")
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Nothing of the run whose environment was saved in $1 may be left.
check_gone() {
  local saved=$1 what=$2 dir ns left
  dir=$(sed -n 's/^HVD_SLURM_DIR=//p' "$saved")
  [[ -n "$dir" ]] || { fail "$what: the command never ran"; return; }
  [[ ! -e "$dir" ]] || fail "$what: $dir is left"
  for ns in $(sed -n 's/^HVD_MH_NETNS_h[0-9]*=//p' "$saved"); do
    ip netns list | grep -qw "$ns" && fail "$what: namespace $ns is left"
  done
  # Daemons name the run directory on their command lines (slurm.conf, the
  # munge socket); a process may take a moment to be reaped.
  for _ in $(seq 1 50); do
    left=$(grep -l -s -F "$dir" /proc/[0-9]*/cmdline || true)
    [[ -z "$left" ]] && return 0
    sleep 0.1
  done
  fail "$what: processes left: $(echo "$left" | tr '\n' ' ')"
}

echo "== a job on every node, then the command fails"
set +e
"$CLUSTER" run --nodes 3 --cpus 2 -- bash -c '
  env | grep -E "^(HVD_SLURM|HVD_MH_NETNS|SLURM_CONF)" > '"$TMP"'/run.env
  srun -N3 --ntasks-per-node=2 bash -c "echo \$(hostname) \$SLURMD_NODENAME" \
    | sort > '"$TMP"'/hosts
  sinfo -h -N -o "%N %c %t" > '"$TMP"'/sinfo
  exit 7'
rc=$?
set -e
[[ $rc -eq 7 ]] || fail "run exited $rc, not the command's 7"
printf 'h1 h1\nh1 h1\nh2 h2\nh2 h2\nh3 h3\nh3 h3\n' |
  diff - "$TMP/hosts" || fail "srun's tasks did not run on h1..h3 by name"
printf 'h1 2 idle\nh2 2 idle\nh3 2 idle\n' |
  diff - "$TMP/sinfo" || fail "sinfo before the job"
check_gone "$TMP/run.env" "failed command"

echo "== the script interrupted while its command runs"
"$CLUSTER" run -- bash -c \
  'env > '"$TMP"'/int.env; sbatch -N2 --wrap "sleep 300" > /dev/null;
   exec sleep 300' &
pid=$!
for _ in $(seq 1 300); do
  grep -q '^HVD_SLURM_DIR=' "$TMP/int.env" 2>/dev/null && break
  sleep 0.1
done
sleep 1  # the batch job starts
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc -eq 143 ]] || fail "interrupted run exited $rc, not 143"
check_gone "$TMP/int.env" "interrupted run"

echo "== up, exec, down"
dir=$("$CLUSTER" up --nodes 1)
[[ "$("$CLUSTER" exec "$dir" h0 sinfo -h -o %D)" == 1 ]] ||
  fail "up: sinfo does not show one node"
grep -E "^export (HVD_SLURM_DIR|HVD_MH_NETNS_h[0-9]+)=" "$dir/env" |
  sed 's/^export //' > "$TMP/up.env"
"$CLUSTER" down "$dir"
check_gone "$TMP/up.env" "up then down"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
