#!/bin/sh
# bench/fused_compare.sh — gpurun's fused elementwise kernel against CuPy's
# ElementwiseKernel and torch.compile on this GPU, in one table:
# bench/fused.lua, then bench/fused_compare.py, as usage() below says;
# docs/elementwise.md has the figures.
set -eu

usage() {
  cat <<'USAGE'
bench/fused_compare.sh — gpurun's fused elementwise kernel against CuPy's
ElementwiseKernel and torch.compile on this GPU, in one table:
bench/fused.lua (gpurun) first, then bench/fused_compare.py (Python with
torch and cupy), which prints both sides and the copy limit.

  bench/fused_compare.sh [bench/fused.lua options, e.g. --unroll 2]

SIZES (default 4096,65536,1048576,16777216,67108864), REPS (15) and
PYTHON (python3) are read from the environment; gpurun is build/gpurun,
or $GPURUN_BIN.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
cd "$(dirname "$0")/.."
sizes=${SIZES:-4096,65536,1048576,16777216,67108864}
reps=${REPS:-15}
gpurun=${GPURUN_BIN:-build/gpurun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gpurun" bench/fused.lua --sizes "$sizes" --reps "$reps" --json "$@" >"$work/gpurun.json"
"${PYTHON:-python3}" bench/fused_compare.py --sizes "$sizes" --reps "$reps" --gpurun "$work/gpurun.json"
