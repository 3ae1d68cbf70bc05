#!/usr/bin/env bash
# Runs Horovod's own PyTorch test suite (test/parallel/test_torch.py of a
# Horovod source checkout) unchanged against this tree's hvd, under
# `hvdrun -np 2` and then `hvdrun -np 3`, and prints how many tests passed,
# failed and were skipped on each rank.
#
#   tools/horovod_torch_suite.sh HOROVOD_CHECKOUT [pytest args...]
#
# e.g. tools/horovod_torch_suite.sh /tmp/horovod-0.28.1 -k allreduce
#
# Needs: bazel build //core:libhvd.so //launcher:hvdrun //agent:hvd-agent
# (this tree's bazel-bin is used; nothing is installed), and Debian's
# python3-pytest, python3-mock and python3-cloudpickle (tools/setup.sh).
#
# Environment:
#   HVD_SUITE_NPS      job sizes to run, default "2 3"
#   HVD_SUITE_TIMEOUT  seconds allowed per job, default 900
#   HVD_SUITE_KEEP     a directory to keep each job's log and per-rank
#                      JUnit reports in (default: a temporary one, removed)
#   HVD_STALL_CHECK_TIME_SECONDS, HVD_STALL_SHUTDOWN_TIME_SECONDS
#                      default 20 and 60 here: a test that fails on some
#                      ranks only leaves the ranks waiting on different
#                      operations; the stall shutdown then ends that job
#                      (every rank's pending op fails naming the tensors),
#                      and the next test's hvd.init() joins a new one, so
#                      the run goes on instead of waiting for its timeout
#
# Horovod's test/utils/common.py imports one helper, in_thread, from
# horovod.runner.util.threads. When the horovod package under test has no
# horovod.runner, a pytest plugin written by this script into a temporary
# directory provides just that module; the test files are run as they are.
# Exit status: 0 when every job ran and no test failed on any rank.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${HVD_TEST_PYTHON:-/usr/bin/python3}

if (($# < 1)) || [[ ! -f "$1/test/parallel/test_torch.py" ]]; then
  echo "usage: $0 HOROVOD_CHECKOUT [pytest args...]" >&2
  echo "  (HOROVOD_CHECKOUT/test/parallel/test_torch.py must exist)" >&2
  exit 2
fi
HOROVOD=$(cd "$1" && pwd)
shift

for f in core/libhvd.so launcher/hvdrun agent/hvd-agent; do
  if [[ ! -f "$ROOT/bazel-bin/$f" ]]; then
    echo "$0: $ROOT/bazel-bin/$f missing: bazel build //core:libhvd.so" \
         "//launcher:hvdrun //agent:hvd-agent" >&2
    exit 2
  fi
done
missing=$("$PYTHON" -c '
import importlib.util as u
print(" ".join(m for m in ("pytest", "mock", "cloudpickle", "packaging")
               if u.find_spec(m) is None))')
if [[ -n "$missing" ]]; then
  echo "$0: $PYTHON lacks: $missing (Debian: python3-<name>; see" \
       "tools/setup.sh)" >&2
  exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hvd-torch-suite.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
KEEP=${HVD_SUITE_KEEP:-}

# The stand-in for horovod.runner.util.threads, loaded as a pytest plugin
# (-p) before the test files are collected. It only answers when the real
# horovod.runner cannot be found, so a horovod package that has one wins.
mkdir -p "$WORK/shim"
cat > "$WORK/shim/hvd_suite_runner_shim.py" <<'PY'
import importlib.abc
import importlib.machinery
import sys
import threading
import types

_NAMES = ("horovod.runner", "horovod.runner.util",
          "horovod.runner.util.threads")


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) in a new thread and returns the thread."""
    def run():
        try:
            target(*args)
        except BaseException:
            if not silent:
                raise
    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module):
        if module.__name__ != "horovod.runner.util.threads":
            module.__path__ = []
        else:
            module.in_thread = in_thread


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _NAMES:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _Loader(),
            is_package=fullname != "horovod.runner.util.threads")


# Last on the meta path: consulted only when no real module was found.
sys.meta_path.append(_Finder())
PY

export HVD_STALL_CHECK_TIME_SECONDS=${HVD_STALL_CHECK_TIME_SECONDS:-20}
export HVD_STALL_SHUTDOWN_TIME_SECONDS=${HVD_STALL_SHUTDOWN_TIME_SECONDS:-60}
export HVD_LIBRARY="$ROOT/bazel-bin/core/libhvd.so"
export HVD_AGENT_PATH="$ROOT/bazel-bin/agent/hvd-agent"
export PYTHONPATH="$ROOT/python:$WORK/shim${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

status=0
summary=()
for np in ${HVD_SUITE_NPS:-2 3}; do
  out="$WORK/np$np"
  mkdir -p "$out"
  echo "=== test_torch.py under hvdrun -np $np"
  set +e
  # Each rank writes its own JUnit report; the job is bounded as a whole.
  (cd "$HOROVOD/test/parallel" &&
   timeout -k 20 "${HVD_SUITE_TIMEOUT:-900}" \
     "$ROOT/bazel-bin/launcher/hvdrun" -np "$np" --start-timeout 30 \
     /bin/sh -c 'exec "$@" --junitxml="'"$out"'/rank${HVD_RANK:-0}.xml"' sh \
     "$PYTHON" -m pytest -q -p no:cacheprovider -p hvd_suite_runner_shim \
     -rfEs test_torch.py "$@") > "$out/log" 2>&1
  code=$?
  set -e
  tail -n 40 "$out/log"
  line=$("$PYTHON" - "$out" "$np" "$code" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
out, np, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
parts, bad = [], code != 0
for rank in range(np):
    path = os.path.join(out, "rank%d.xml" % rank)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        parts.append("rank %d: no report" % rank)
        bad = True
        continue
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            counts["failed"] += 1
        elif "skipped" in tags:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    bad = bad or counts["failed"] > 0
    parts.append("rank %d: %d passed, %d failed, %d skipped"
                 % (rank, counts["passed"], counts["failed"],
                    counts["skipped"]))
print("np %d (exit %d): %s" % (np, code, "; ".join(parts)))
sys.exit(1 if bad else 0)
PY
  ) || status=1
  summary+=("$line")
  if [[ -n "$KEEP" ]]; then
    mkdir -p "$KEEP" && rm -rf "$KEEP/np$np" && cp -r "$out" "$KEEP/np$np"
  fi
done

echo "=== Horovod test_torch.py ($HOROVOD)"
printf '%s\n' "${summary[@]}"
exit $status
