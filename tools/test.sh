#!/usr/bin/env bash
# Runs every test (bazel test //...); the thread-safety analysis (the C++
# built with clang -Werror=thread-safety, one more case); the whole suite
# again under AddressSanitizer and UBSan (--config=asan, each case counted
# again); and every fuzzer for HVD_FUZZ_SECONDS (default 15) from its seed
# corpus (one case each). Prints the total over all of them: "N passed,
# N failed" (tools/count_tests.py). Exit status: non-zero if any failed.
# HVD_TEST_QUICK=1 skips the ASan run and the fuzzers.
set -uo pipefail
cd "$(dirname "$0")/.."

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
bazel test //... --keep_going --noshow_progress "$@" 2>&1 | tee "$summary"
status=${PIPESTATUS[0]}

# In an output base of its own (one per checkout): switching the compiler in
# the main one would reconfigure its toolchain for every later build.
echo "test: thread-safety analysis (clang -Werror=thread-safety)"
clang_base="$HOME/.cache/hvd-bazel-clang/$(pwd | md5sum | cut -c1-12)"
tsa_log=$(mktemp)
trap 'rm -f "$summary" "$tsa_log"' EXIT
bazel --output_base="$clang_base" build \
  --config=thread-safety --noshow_progress \
  //core/... //launcher/... //agent/... //host/... //rdma/... >"$tsa_log" 2>&1
tsa_status=$?
if ((tsa_status)); then
  grep -E 'error|warning: .*thread-safety' "$tsa_log" | head -40
fi
bazel --output_base="$clang_base" shutdown >/dev/null 2>&1

extra=()
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
  asan_base="$HOME/.cache/hvd-bazel-asan/$(pwd | md5sum | cut -c1-12)"
  asan_summary=$(mktemp)
  trap 'rm -f "$summary" "$tsa_log" "$asan_summary"' EXIT
  bazel --output_base="$asan_base" test --config=asan --keep_going \
    --noshow_progress "${packages[@]}" >"$asan_summary" 2>&1
  asan_status=$?
  grep -aE "^//.* (FAILED|TIMEOUT|NO STATUS)|runtime error|ERROR: .*Sanitizer" \
    "$asan_summary" | head -40
  grep -aE "^Executed" "$asan_summary"
  asan_logs=$(bazel --output_base="$asan_base" info --config=asan \
    bazel-testlogs 2>/dev/null)
  bazel --output_base="$asan_base" shutdown >/dev/null 2>&1
  extra+=("asan=$asan_summary@$asan_logs")
  ((asan_status)) && status=$asan_status

  echo "test: fuzzers, ${HVD_FUZZ_SECONDS:-15} s each (tools/fuzz/run.sh)"
  fuzz_log=$(mktemp)
  trap 'rm -f "$summary" "$tsa_log" "$asan_summary" "$fuzz_log"' EXIT
  tools/fuzz/run.sh "${HVD_FUZZ_SECONDS:-15}" | tee "$fuzz_log"
  while read -r name verdict; do
    extra+=("fuzz-$name=$verdict")
  done < <(sed -n 's/^fuzz: \([a-z_]*\): .*no crash$/\1 0/p;
                   s/^fuzz: \([a-z_]*\): FAILED.*/\1 1/p' "$fuzz_log")
  grep -q "^fuzz: build failed" "$fuzz_log" && extra+=("fuzz-build=1")
fi

/usr/bin/python3 tools/count_tests.py "$summary" \
  "thread-safety-analysis=$tsa_status" "${extra[@]}"
((status == 0 && tsa_status == 0)) || exit $((status ? status : 1))
for e in "${extra[@]}"; do [[ $e == *=1 ]] && exit 1; done
exit 0
