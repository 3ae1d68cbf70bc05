#!/usr/bin/env bash
# Runs every test (bazel test //...); the thread-safety analysis (the C++
# built with clang -Werror=thread-safety, one more case); the whole suite
# again under AddressSanitizer and UBSan (--config=asan) and the C++ suite
# with some Python jobs under ThreadSanitizer (--config=tsan), each case
# counted again; and every fuzzer for HVD_FUZZ_SECONDS (default 15) from its
# seed corpus (one case each). Prints the total over all of them: "N passed, N failed"
# (tools/count_tests.py). Exit status: non-zero if any failed.
# HVD_TEST_QUICK=1 skips the sanitizer runs and the fuzzers.
set -uo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# failure_reports SUMMARY TESTLOGS: for each test SUMMARY lists as failed,
# the first sanitizer report in its log (the report's stack, not only its
# headline), or else its failed assertions, or else the log's last lines: a
# flaky failure must be readable from CI's output alone.
failure_reports() {
  local target log logs first
  for target in $(sed -n 's|^//\([^ ]*\) .*FAILED.*|\1|p' "$1" | tr : /); do
    # Of several runs or shards, the one that failed.
    logs=() first=
    for log in "$2/$target/test.log" "$2/$target"/run_*/test.log \
               "$2/$target"/shard_*/test.log; do
      [[ -f $log ]] && logs+=("$log")
    done
    for log in "${logs[@]}"; do
      if grep -aq "ERROR: .*Sanitizer\|runtime error" "$log"; then
        echo "--- $target: $(basename "$(dirname "$log")")"
        grep -a -m1 -A40 "ERROR: .*Sanitizer\|runtime error" "$log"
        continue 2
      fi
      if [[ -z $first ]] && grep -aq ": Failure$" "$log"; then first=$log; fi
    done
    if [[ -n $first ]]; then
      echo "--- $target: $(basename "$(dirname "$first")")"
      grep -a -A12 ": Failure$" "$first" | head -60
    elif ((${#logs[@]})); then
      echo "--- $target: $(basename "$(dirname "${logs[0]}")")"
      tail -20 "${logs[0]}"
    fi
  done
}

# What a user reads: the test summary and the failures, without Bazel's
# INFO events or the trace Debian's linux-sandbox adds to a failing test's
# log.
bazel test //... --keep_going --noshow_progress --ui_event_filters=-info \
  "$@" 2>&1 | grep -av "src/main/tools/linux-sandbox" | tee "$tmp/suite"
status=${PIPESTATUS[0]}
if grep -aq "^//.* FAILED" "$tmp/suite"; then
  failure_reports "$tmp/suite" "$(bazel info bazel-testlogs 2>/dev/null)"
fi

# Each other build has an output base of its own (one per checkout):
# switching the compiler or its flags in the main one would reconfigure its
# toolchain for every later build.
output_base() { echo "$HOME/.cache/hvd-bazel-$1/$(pwd | md5sum | cut -c1-12)"; }

# Each phase's wall time, so that the whole run can be kept within CI's.
took() { echo "test: ...took $((SECONDS - $1)) s"; }
took 0
start=$SECONDS
echo "test: thread-safety analysis (clang -Werror=thread-safety)"
clang_base=$(output_base clang)
bazel --output_base="$clang_base" build \
  --config=thread-safety --noshow_progress \
  //core/... //launcher/... //agent/... //host/... //rdma/... >"$tmp/tsa" 2>&1
tsa_status=$?
if ((tsa_status)); then
  grep -E 'error|warning: .*thread-safety' "$tmp/tsa" | head -40
fi
bazel --output_base="$clang_base" shutdown >/dev/null 2>&1
took "$start"

extra=()
# sanitized CONFIG PATTERN...: the tests of PATTERN under --config=CONFIG,
# but for those tagged no_sanitizer: they measure memory or bandwidth, which
# a sanitizer distorts, or drive whole systems (Slurm daemons, simulated
# pods, Python jobs across ssh hosts) whose C++ the sanitized unit and job
# tests cover in a fraction of the time. Their cases count as a run of
# their own.
sanitized() {
  local config=$1 base summary logs run_status start=$SECONDS
  shift
  base=$(output_base "$config")
  summary="$tmp/$config"
  bazel --output_base="$base" test --config="$config" --keep_going \
    --noshow_progress --test_tag_filters=-no_sanitizer "$@" >"$summary" 2>&1
  run_status=$?
  grep -aE "^//.* (FAILED|TIMEOUT|NO STATUS)|runtime error|ERROR: .*Sanitizer|WARNING: ThreadSanitizer" \
    "$summary" | head -40
  grep -aE "^Executed" "$summary"
  logs=$(bazel --output_base="$base" info --config="$config" \
    bazel-testlogs 2>/dev/null)
  failure_reports "$summary" "$logs"
  bazel --output_base="$base" shutdown >/dev/null 2>&1
  extra+=("$config=$summary@$logs")
  ((run_status)) && status=$run_status
  took "$start"
}

if [[ "${HVD_TEST_QUICK:-0}" != 1 ]]; then
  # The patterns name the packages: //... from another output base would
  # wander into the default one's bazel-* links.
  packages=()
  for d in */; do
    d=${d%/}
    [[ $d == bazel-* ]] && continue
    find "$d" -name BUILD -print -quit | grep -q . && packages+=("//$d/...")
  done
  echo "test: the suite under AddressSanitizer and UBSan (--config=asan)"
  sanitized asan "${packages[@]}"
  # Under TSan the whole Python suite passes too (bazel test --config=tsan
  # //python/..., about 25 minutes here); CI's time takes one job of each
  # kind: numpy and torch collectives, a Horovod script, elastic resets and
  # a lost peer.
  echo "test: the C++ suite and Python jobs under ThreadSanitizer (--config=tsan)"
  sanitized tsan //core/... //launcher/... //agent/... //host/... //rdma/... \
    //tests/... //python/tests:single_process_test \
    //python/tests:numpy_collectives_np2_test \
    //python/tests:torch_collectives_np3_test \
    //python/tests:horovod_script_np2_test //python/tests:elastic_np3_test \
    //python/tests:peer_lost_np2_test

  echo "test: fuzzers, ${HVD_FUZZ_SECONDS:-15} s each (tools/fuzz/run.sh)"
  start=$SECONDS
  tools/fuzz/run.sh "${HVD_FUZZ_SECONDS:-15}" | tee "$tmp/fuzz"
  took "$start"
  while read -r name verdict; do
    extra+=("fuzz-$name=$verdict")
  done < <(sed -n 's/^fuzz: \([a-z_]*\): .*no crash$/\1 0/p;
                   s/^fuzz: \([a-z_]*\): FAILED.*/\1 1/p' "$tmp/fuzz")
  grep -q "^fuzz: build failed" "$tmp/fuzz" && extra+=("fuzz-build=1")
fi

/usr/bin/python3 tools/count_tests.py "$tmp/suite" \
  "thread-safety-analysis=$tsa_status" "${extra[@]}"
((status == 0 && tsa_status == 0)) || exit $((status ? status : 1))
for e in "${extra[@]}"; do [[ $e == *=1 ]] && exit 1; done
exit 0
