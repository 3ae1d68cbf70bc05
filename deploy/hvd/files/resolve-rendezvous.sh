#!/bin/bash
# Runs COMMAND (hvd-agent) with the names in its --rendezvous HOST:PORT[,...]
# resolved to IPv4 addresses, which is what hvd-agent dials. A name that does
# not resolve yet is retried every second: the launcher's headless Service
# lists the launcher pod only once hvdrun listens. After
# HVD_K8S_RESOLVE_TIMEOUT seconds (default 600) it exits 1 naming it.
#
#   resolve-rendezvous.sh hvd-agent --rendezvous NAME:PORT --slots K ...
set -euo pipefail
limit=${HVD_K8S_RESOLVE_TIMEOUT:-600}
deadline=$((SECONDS + limit))

resolve() {  # HOST:PORT -> IPV4:PORT
  local host=${1%:*} port=${1##*:} ip
  if [[ $host =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "$1"
    return 0
  fi
  while true; do
    ip=$(getent ahostsv4 "$host" | head -n 1 | cut -d' ' -f1) || true
    if [[ -n $ip ]]; then
      echo "$ip:$port"
      return 0
    fi
    if ((SECONDS >= deadline)); then
      echo "resolve-rendezvous.sh: the launcher's name $host does not resolve" \
        "after $limit s: is the launcher pod running? (kubectl get pods)" >&2
      return 1
    fi
    sleep 1
  done
}

resolve_list() {  # A:P,B:P -> resolved, in order
  local out="" entry
  IFS=, read -r -a entries <<<"$1"
  for entry in "${entries[@]}"; do
    entry=$(resolve "$entry") || return 1
    out=${out:+$out,}$entry
  done
  echo "$out"
}

[[ $# -ge 1 ]] || { echo "usage: resolve-rendezvous.sh COMMAND [ARGS...]" >&2; exit 2; }
args=()
while (($#)); do
  case $1 in
    --rendezvous)
      [[ $# -ge 2 ]] || { echo "resolve-rendezvous.sh: --rendezvous needs a value" >&2; exit 2; }
      addr=$(resolve_list "$2") || exit 1
      args+=("$1" "$addr")
      shift 2
      ;;
    --rendezvous=*)
      addr=$(resolve_list "${1#--rendezvous=}") || exit 1
      args+=("--rendezvous=$addr")
      shift
      ;;
    --)  # the workers' command: left as it is
      args+=("$@")
      break
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
exec "${args[@]}"
