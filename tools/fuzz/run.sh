#!/usr/bin/env bash
# Builds every fuzzer with clang's libFuzzer, AddressSanitizer and UBSan (in
# an output base of its own, so the default gcc build stays configured) and
# runs each for SECONDS on a scratch copy of its seed corpus. Allocations
# over 512 MiB count as crashes: no length field may reserve memory on its
# say-so. Leaks found after an input are findings too (but see below).
# Prints one line per fuzzer; exits non-zero when one crashed, with the
# input that did it kept under $HVD_FUZZ_ARTIFACTS (default /tmp).
#
#   tools/fuzz/run.sh [SECONDS] [FUZZER...]     (default 20; all fuzzers)
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-20}
shift || true
all=(
  //core/transport/tcp:hello_fuzzer
  //core/transport/tcp:stream_fuzzer
  //core/transport/shm:segment_fuzzer
  //core/rendezvous:rpc_fuzzer
  //core:dlpack_view_fuzzer
  //launcher:agent_rpc_fuzzer
  //launcher:host_list_fuzzer
)
targets=("${@:-${all[@]}}")
base="$HOME/.cache/hvd-bazel-fuzz/$(pwd | md5sum | cut -c1-12)"
artifacts=${HVD_FUZZ_ARTIFACTS:-/tmp}

bazel --output_base="$base" build --config=fuzz --noshow_progress \
  "${targets[@]}" >/tmp/hvd-fuzz-build.log 2>&1 || {
  grep -E "error|ERROR" /tmp/hvd-fuzz-build.log | head -20
  echo "fuzz: build failed (log: /tmp/hvd-fuzz-build.log)"
  exit 1
}
bin=$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)

# agent_rpc_fuzzer serves a job per input, and gRPC's thread pools start
# threads that outlive the input: libFuzzer's leak check right after each
# input reports their state (through uninstrumented gRPC, with truncated
# stacks). Its leaks are checked where they are reliable: when its corpus
# replays in the ASan suite, at process exit.
declare -A flags=([agent_rpc_fuzzer]="-detect_leaks=0")

failed=0
for target in "${targets[@]}"; do
  pkg=${target#//}
  pkg=${pkg%%:*}
  name=${target##*:}
  scratch=$(mktemp -d)
  cp -r "$pkg/fuzz_corpus/${name%_fuzzer}/." "$scratch/"
  log=$(mktemp)
  status=0
  # shellcheck disable=SC2086  # the flags are words
  "$bin/$pkg/$name" ${flags[$name]:-} -max_total_time="$seconds" -timeout=20 \
    -malloc_limit_mb=512 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name-" "$scratch" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1)
  ft=$(grep -ao 'ft: [0-9]*' "$log" | tail -1)
  if ((status)); then
    failed=1
    echo "fuzz: $name: FAILED after ${execs:-?} executions ($cov, $ft):"
    grep -aE "ERROR|SUMMARY|runtime error|Test unit written|set-up failed" \
      "$log" | grep -v "libprotobuf ERROR" | head -8 || true
    cp "$log" "$artifacts/$name.log"
    echo "  (whole log: $artifacts/$name.log)"
  else
    echo "fuzz: $name: ${execs:-0} executions in ${seconds}s, $cov, $ft, no crash"
  fi
  rm -rf "$scratch" "$log"
done
bazel --output_base="$base" shutdown >/dev/null 2>&1 || true
exit $failed
