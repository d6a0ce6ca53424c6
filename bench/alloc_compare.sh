#!/bin/sh
# bench/alloc_compare.sh — buffer allocation and free on this GPU, every side
# in one run and one table of medians: plain C, Python's GPU libraries, the
# step in CUDA C++ and gpurun (bench/alloc_compare.lua, which prints the
# table), as usage() below says; docs/memory.md has the figures.
set -eu

usage() {
  cat <<'USAGE'
bench/alloc_compare.sh — buffer allocation and free on this GPU, every side
in one run and one table of medians: plain C (bench/alloc_compare_c:
cuMemAlloc/cuMemFree and the default pool's stream-ordered pair), Python
(bench/alloc_compare.py: cuda.core's DeviceMemoryResource, CuPy's
MemoryPool and MemoryAsyncPool, PyTorch's caching allocator; a missing
module is reported in its row), then gpurun (bench/alloc_compare.lua: its
default constructors, the default pool, a pool of its own, a pipeline step
with two 1 MiB temporaries made up front or inside the replayed graph, and
10,000 buffers made and freed while a busy kernel runs), which prints the
table; and bench/alloc_step, the same step in plain CUDA C++ (built here
with nvcc; STEP_MIB, default 1,4,16,256, its sizes in MiB).

  bench/alloc_compare.sh [bench/alloc_compare.lua options, e.g. --iters 5000]

SIZES (bytes, default 4096,1048576,268435456), PAIRS (1000), REPS (11) and
PYTHON (python3) are read from the environment; gpurun is build/gpurun, or
$GPURUN_BIN, and the C side build/bench/alloc_compare_c, or $ALLOC_C
(built by `cmake --build build --target alloc_compare_c`).
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
cd "$(dirname "$0")/.."
sizes=${SIZES:-4096,1048576,268435456}
pairs=${PAIRS:-1000}
reps=${REPS:-11}
gpurun=${GPURUN_BIN:-build/gpurun}
c_side=${ALLOC_C:-build/bench/alloc_compare_c}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -x "$c_side" ]; then
  "$c_side" --sizes "$sizes" --pairs "$pairs" --reps "$reps" --json >"$work/c.json" ||
    echo '{"missing": "bench/alloc_compare_c failed (see above)"}' >"$work/c.json"
else
  echo "{\"missing\": \"no $c_side: cmake --build build --target alloc_compare_c\"}" >"$work/c.json"
fi
# The step in plain CUDA C++ (nvcc, built here as reduce_compare.sh builds reduce_cub).
build=$(dirname "$(dirname "$c_side")")
if cmake --build "$build" --target alloc_step >"$work/step_build.log" 2>&1; then
  "$build/bench/alloc_step" --mib "${STEP_MIB:-1,4,16,256}" --reps "$reps" >"$work/step.json" ||
    echo '{"missing": "bench/alloc_step failed (see above)"}' >"$work/step.json"
else
  echo "{\"missing\": \"alloc_step did not build: $(tail -n 1 "$work/step_build.log" | tr -d '"\\')\"}" >"$work/step.json"
fi
"${PYTHON:-python3}" bench/alloc_compare.py --sizes "$sizes" --pairs "$pairs" --reps "$reps" --json \
  >"$work/python.json" || echo '{"missing": "bench/alloc_compare.py failed (see above)"}' >"$work/python.json"
"$gpurun" bench/alloc_compare.lua --sizes "$sizes" --pairs "$pairs" --reps "$reps" \
  --c-json "$work/c.json" --python-json "$work/python.json" --step-c-json "$work/step.json" "$@"
