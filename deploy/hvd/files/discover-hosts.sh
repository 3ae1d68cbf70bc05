#!/bin/bash
# hvdrun's --host-discovery-script for an elastic job on Kubernetes: prints
# one "name:slots" line per ready worker pod, as cluster DNS lists them
# behind the workers' headless Service (HVD_K8S_WORKER_SERVICE), with
# HVD_K8S_SLOTS slots each. The name is the pod's own DNS name (the
# Service's reverse record: <pod>.<service>.<namespace>.svc.<zone>) when it
# resolves back to the pod; else the pod's address, if the Service still
# lists it (a pod being deleted leaves both records, not always at once).
# No ready pod is no host (hvdrun then waits for them up to
# --elastic-timeout); exit 1 only when DNS itself fails.
set -uo pipefail
service=${HVD_K8S_WORKER_SERVICE:?"not set: the workers' Service"}
slots=${HVD_K8S_SLOTS:-1}

# The Service's addresses, one a line (none: no ready pod). Exit 1 if DNS
# fails.
addresses() {
  local out rc
  out=$(getent ahostsv4 "$service")
  rc=$?
  case $rc in
    0) cut -d' ' -f1 <<<"$out" | sort -u ;;
    2) ;;  # the name has no address
    *) echo "discover-hosts.sh: getent ahostsv4 $service failed (exit $rc)" >&2
       return 1 ;;
  esac
}

hosts() {
  local ips ip name now unnamed=()
  ips=$(addresses) || return 1
  while read -r ip; do
    [[ -n $ip ]] || continue
    name=$(getent hosts "$ip" | { read -r _ n _ || true; echo "${n:-}"; })
    if [[ -n $name ]] &&
        getent ahostsv4 "$name" | cut -d' ' -f1 | grep -qxF "$ip"; then
      echo "$name:$slots"
    else
      unnamed+=("$ip")
    fi
  done <<<"$ips"
  if ((${#unnamed[@]})); then
    now=$(addresses) || return 1
    for ip in "${unnamed[@]}"; do
      if grep -qxF "$ip" <<<"$now"; then echo "$ip:$slots"; fi
    done
  fi
}

out=$(hosts) || exit 1
if [[ -n $out ]]; then sort -V <<<"$out"; fi
