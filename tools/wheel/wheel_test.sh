#!/bin/bash
# The hvd wheel as a user installs it: built offline from the Bazel-built
# libhvd.so, installed with pip into a fresh venv made with
# --system-site-packages (so Debian's torch stays visible), used by a 2-rank
# hvdrun job through horovod.torch, and removed by `pip uninstall` with
# nothing left behind.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-__main__}"
root=$PWD
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "wheel_test: FAIL: $*" >&2; exit 1; }
# Nothing may reach the source tree's package or library.
clean=(env -u PYTHONPATH -u HVD_LIBRARY -u PYTHONHOME)
# Under --config=asan the wheel's libhvd.so is instrumented: the interpreter
# needs the ASan runtime preloaded, for the reasons run_python.sh gives.
if [[ -n "${HVD_TEST_ASAN_PRELOAD:-}" ]]; then
  clean+=("LD_PRELOAD=$HVD_TEST_ASAN_PRELOAD"
          "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi

wheel=$(bash tools/wheel/build_wheel.sh "$tmp/dist" "$root/core/libhvd.so" \
  "$root/python/_speedups.abi3.so")
name=$(basename "$wheel")
[[ $name == hvd-0.1.0-cp3*-linux_x86_64.whl ]] || fail "wheel named $name"
/usr/bin/python3 -m zipfile -l "$wheel" | grep "^hvd/libhvd.so " >/dev/null ||
  fail "$name carries no hvd/libhvd.so"
/usr/bin/python3 -m zipfile -l "$wheel" | grep "^hvd/_speedups.abi3.so " \
  >/dev/null || fail "$name carries no hvd/_speedups.abi3.so"
echo "built $name"

/usr/bin/python3 -m venv --system-site-packages "$tmp/env"
pip=("$tmp/env/bin/python" -m pip --disable-pip-version-check)
# --ignore-installed: setup.sh has put hvd 0.1.0 into Debian's python3, which
# the venv sees; without it pip calls the requirement satisfied there.
"${clean[@]}" "${pip[@]}" install -q --no-index --no-deps --ignore-installed \
  "$wheel"
site=$("$tmp/env/bin/python" -c \
  'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"${clean[@]}" "${pip[@]}" show hvd | grep -x "Version: 0.1.0" >/dev/null ||
  fail "pip show hvd: no version 0.1.0"

# The venv's package, library and C module, with Debian's torch.
where=$(cd "$tmp" && "${clean[@]}" "$tmp/env/bin/python" -c '
import hvd, hvd._lib as lib, hvd._fastpath as fast, horovod.torch, torch
print(hvd.__file__, lib.lib()._name, fast.speedups.__file__)')
[[ $where == "$site/hvd/__init__.py $site/hvd/libhvd.so $site/hvd/_speedups.abi3.so" ]] ||
  fail "imported from $where, not $site"

out=$(cd "$tmp" && "${clean[@]}" "$root/launcher/hvdrun" -np 2 \
  --agent-path "$root/agent/hvd-agent" "$tmp/env/bin/python" -c '
import horovod.torch as hvd, torch
hvd.init()
t = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)
assert t.tolist() == [3.0] * 3, t
print("sum ok on rank", hvd.rank(), "of", hvd.size())')
for r in 0 1; do
  grep -qx "\[$r\]<stdout>:sum ok on rank $r of 2" <<<"$out" ||
    fail "rank $r: $out"
done
echo "2-rank job ok"

"${clean[@]}" "${pip[@]}" uninstall -q -y hvd
left=$(ls "$site" | grep -E '^(hvd|horovod)' || true)
[[ -z $left ]] || fail "left in $site after pip uninstall: $left"
echo "uninstalled, nothing left"
