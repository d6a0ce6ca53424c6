#!/bin/sh
# bench/reduce_compare.sh — gpurun's generated reductions and scans against
# CUB, CuPy and PyTorch on this GPU, every path captured in a CUDA graph and
# launched, in one table of medians: bench/reduce.lua, build/bench/reduce_cub
# and bench/reduce_compare.py, as usage() below says; docs/reductions.md has
# the figures.
set -eu

usage() {
  cat <<'USAGE'
bench/reduce_compare.sh — gpurun's generated reductions and scans against
CUB (DeviceReduce, DeviceScan), CuPy (cupy.sum, ReductionKernel,
cupy.argmax, cupy.cumsum) and PyTorch (torch.sum, torch.argmax,
torch.cumsum, torch.compile of the fused map-reduce) on this GPU, every
path captured in a CUDA graph and launched, in one table of medians:
bench/reduce.lua (gpurun, with the copy and read bandwidth), then
build/bench/reduce_cub (built here from bench/reduce_cub.cu when nvcc is
there), then bench/reduce_compare.py (Python), which prints every side.

  bench/reduce_compare.sh

SIZES (default 4096,65536,1048576,16777216,67108864), REPS (15), PYTHON
(python3) and BUILD (build) are read from the environment; gpurun is
$BUILD/gpurun, or $GPURUN_BIN. A side that cannot run is reported and its
rows show '-'.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
cd "$(dirname "$0")/.."
sizes=${SIZES:-4096,65536,1048576,16777216,67108864}
reps=${REPS:-15}
build=${BUILD:-build}
gpurun=${GPURUN_BIN:-$build/gpurun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gpurun" bench/reduce.lua --sizes "$sizes" --reps "$reps" --json >"$work/gpurun.json"
cub_args=""
if cmake --build "$build" --target reduce_cub >"$work/cub_build.log" 2>&1 \
   && "$build/bench/reduce_cub" --sizes "$sizes" --reps "$reps" >"$work/cub.json"; then
  cub_args="--cub $work/cub.json"
else
  echo "reduce_compare.sh: no CUB figures (reduce_cub did not build or run; see below)" >&2
  tail -n 5 "$work/cub_build.log" >&2
fi
# shellcheck disable=SC2086 # cub_args is one option and a path without spaces, or nothing
"${PYTHON:-python3}" bench/reduce_compare.py --sizes "$sizes" --reps "$reps" --gpurun "$work/gpurun.json" $cub_args
