#!/bin/bash
# Renders the chart deploy/hvd without Helm or a cluster, as
# `helm template NAME deploy/hvd -n NAMESPACE -f VALUES...` would:
#
#   deploy/render/render.sh [--name NAME] [--namespace NS] [-f VALUES.yaml]...
#
# Needs Go (Debian: golang-go) and python3-yaml (YAML to JSON: render.go
# uses Go's standard library only). Builds render.go (offline) into a
# temporary directory each time, or once into $HVD_RENDER_DIR if set.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
chart=$(cd "$here/../hvd" && pwd)
name=hvd
namespace=default
values=()
while (($#)); do
  case $1 in
    --name) name=$2; shift 2 ;;
    --namespace|-n) namespace=$2; shift 2 ;;
    -f|--values) values+=("$2"); shift 2 ;;
    *) echo "render.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build=${HVD_RENDER_DIR:-$work}
mkdir -p "$build"
if [[ ! -x $build/render || $here/render.go -nt $build/render ]]; then
  # Go wants a writable cache and home; a test sandbox has neither.
  (cd "$here" && GOCACHE=$build/gocache HOME=$build GOFLAGS='' GO111MODULE=on \
     GOTOOLCHAIN=local go build -o "$build/render.new" . &&
   mv "$build/render.new" "$build/render")
fi
# YAML to JSON, every file in one go: Chart.yaml, values.yaml, the -f files.
inputs=("$chart/Chart.yaml" "$chart/values.yaml" "${values[@]}")
/usr/bin/python3 -c 'import json, sys, yaml
for i, path in enumerate(sys.argv[2:]):
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    with open("%s/%d.json" % (sys.argv[1], i), "w") as f:
        json.dump(data, f)' "$work" "${inputs[@]}"
args=(-chart "$chart" -chart-json "$work/0.json" -name "$name"
      -namespace "$namespace")
for ((i = 1; i < ${#inputs[@]}; i++)); do
  args+=(-values "$work/$i.json")
done
"$build/render" "${args[@]}"
