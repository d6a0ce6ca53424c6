#!/bin/sh
# tools/fuzz-ptx.sh [seconds] — fuzz the PTX signature parser with libFuzzer
# under ASan and UBSan for a fixed time (default $GPURUN_FUZZ_SECONDS or 60),
# seeded from tests/fixtures/ptx. Builds tests/fuzz_ptx_params.c with clang
# (Debian's clang and libclang-rt-14-dev; tools/dev.sh installs them where CI
# runs) into $GPURUN_BUILD_DIR/fuzz-ptx (build/ by default).
#
# Ends with ".ci/run"'s closing line: "1 passed, 0 failed, 0 skipped" when
# nothing was found, "0 passed, 1 failed, 0 skipped" with the crashing input
# kept under the build folder, or "0 passed, 0 failed, 1 skipped" where clang
# or its fuzzer runtime is missing (a failure where CI runs: CI=true).
set -u

cd "$(dirname "$0")/.." || exit 1
seconds=${1:-${GPURUN_FUZZ_SECONDS:-60}}
work=${GPURUN_BUILD_DIR:-build}/fuzz-ptx
clang=${CLANG:-clang}

skip() {
  echo "fuzz-ptx: $1"
  if [ "${CI:-}" = true ]; then
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

command -v "$clang" >/dev/null 2>&1 || skip "clang not found (apt-get install clang libclang-rt-14-dev)"
mkdir -p "$work/corpus" "$work/found" || exit 1
if ! "$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -fno-omit-frame-pointer -Wall -Wextra -Isrc tests/fuzz_ptx_params.c src/base/ptx_params.c \
    src/base/ptx_params_text.c -o "$work/fuzz_ptx_params" 2>"$work/build.log"; then
  cat "$work/build.log"
  grep -q "fuzzer" "$work/build.log" && skip "clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi
# The seeds: NVRTC's PTX from the fixtures, and the compact signature text.
cp tests/fixtures/ptx/*.ptx "$work/corpus/"
printf '.target sm_90\n.entry k(\n.param .u64 p0,\n.param .align 8 .b8 p1[16])\n' >"$work/corpus/compact"

echo "fuzz-ptx: $seconds s of libFuzzer on ptx_signatures_parse (ASan + UBSan)"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$work/fuzz_ptx_params" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/found/" "$work/corpus" >"$work/run.log" 2>&1
status=$?
grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|fuzz_ptx_params:)' "$work/run.log"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/run.log")
if [ "$status" -ne 0 ]; then
  tail -n 40 "$work/run.log"
  echo "fuzz-ptx: found a failing input, kept in $work/found/"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi
echo "fuzz-ptx: ${runs:-?} inputs in $seconds s, no failure"
echo "1 passed, 0 failed, 0 skipped"
