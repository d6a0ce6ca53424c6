#!/bin/bash
# tools/gpu-check.sh — everything that needs a GPU, in one go, on a GPU host:
# build, the full spec suite (#gpu specs included), the specs of the
# bindings again through lua5.4 and gpurun.so, the main job at two sizes,
# the size sweep and the breakdown, the benchmark against pure C and the
# copy bandwidth. Logs (and the sweep's files) go to $1 (default gpu-check/).
#
#   tools/gpu-check.sh [LOG_DIR] [--quick]
#
# --quick skips the benchmark, the sweep and the 16M-element run.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-gpu-check}
quick=${2:-}
mkdir -p "$logs"

step() { echo; echo "== $*"; }

step "build"
GPURUN_BUILD_DIR=build-gpu tools/dev.sh build >"$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }
bin=build-gpu/gpurun
"$bin" -v

step "spec suite"
GPURUN_BUILD_DIR=build-gpu tools/dev.sh test 2>&1 | tee "$logs/specs.log" | tail -n 60

step "the specs of the bindings through lua5.4 and build-gpu/gpurun.so (stock busted)"
GPURUN_BUILD_DIR=build-gpu tools/dev.sh test-module 2>&1 | tee "$logs/specs-module.log" | tail -n 30

step "gpurun scripts/cudagraphs.lua --elements 4096"
"$bin" scripts/cudagraphs.lua --elements 4096 2>&1 | tee "$logs/cudagraphs-4096.log"
echo "exit $?"
step "ptx_params_test --driver (signatures against cuKernelGetParamInfo)"
build-gpu/tests/ptx_params_test --driver tests/fixtures/ptx 2>&1 | tee "$logs/ptx-params.log" | tail -n 3

step "gpurun scripts/fused.lua --elements 16777216"
"$bin" scripts/fused.lua --elements 16777216 2>&1 | tee "$logs/fused-16M.log"
echo "exit ${PIPESTATUS[0]}"
if [ "$quick" != "--quick" ]; then
  step "benchmark: fused elementwise vs CuPy ElementwiseKernel and torch.compile"
  GPURUN_BIN=$bin bench/fused_compare.sh 2>&1 | tee "$logs/fused-compare.log"
  step "gpurun scripts/cudagraphs.lua --elements 16777216"
  "$bin" scripts/cudagraphs.lua --elements 16777216 2>&1 | tee "$logs/cudagraphs-16M.log"
  echo "exit $?"
  step "sweep 2^10..2^26 with its picture, and the breakdown"
  "$bin" scripts/sweep.lua --json "$logs/sweep.json" --csv "$logs/sweep.csv" \
    --plot "$logs/sweep.png" 2>&1 | tee "$logs/sweep.log"
  echo "exit $?"
  "$bin" scripts/cudagraphs.lua --breakdown 2>&1 | tee "$logs/breakdown.log"
  echo "exit $?"
  step "benchmark: gpurun vs pure C"
  "$bin" bench/compare.lua --c-bench build-gpu/bench/cudagraphs_c 2>&1 | tee "$logs/bench.log"
  step "start-up split"
  "$bin" bench/compare.lua --startup 2>&1 | tee "$logs/startup.log"
  step "host <-> device bandwidth: tables, strings, pinned memory, C"
  "$bin" bench/bandwidth.lua --c-bench build-gpu/bench/bandwidth_c 2>&1 | tee "$logs/bandwidth.log"
fi
