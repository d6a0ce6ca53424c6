#!/bin/sh
# bench/device_code_compare.sh — device code brought in, every side in one
# run: gpurun's LTO link against nvcc -dlto (bench/lto_link.lua), then a
# launchable kernel from a compile, a cache hit or a saved cubin in gpurun
# (bench/cubin_load.lua) and cuda.core (bench/cubin_load_compare.py), as
# usage() below says; docs/benchmark.md has the figures.
set -eu

usage() {
  cat <<'USAGE'
bench/device_code_compare.sh — device code brought in, every side in one
run: bench/lto_link.lua (a kernel and its device function linked by
gpurun.Linker from LTO-IR against nvcc -dlto's cubin of the same two
sources: SASS instructions and us per launch), then bench/cubin_load.lua
(gpurun: compile again, a kernel-cache hit, a saved cubin loaded, each to
a kernel, with a kernel cache of its own) and bench/cubin_load_compare.py
(cuda.core on the same source and cubin: Program.compile,
FileStreamProgramCache, ObjectCode.from_cubin), which prints both sides.

  bench/device_code_compare.sh [bench/lto_link.lua options, e.g. --sizes 1048576]

REPS (default 9), PYTHON (python3) and BUILD (build) are read from the
environment; gpurun is $BUILD/gpurun, or $GPURUN_BIN. nvcc and cuobjdump
come from $CUDA_HOME/bin (default /usr/local/cuda/bin), else PATH; a side
that cannot run is reported in its row.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
cd "$(dirname "$0")/.."
reps=${REPS:-9}
build=${BUILD:-build}
gpurun=${GPURUN_BIN:-$build/gpurun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gpurun" bench/lto_link.lua --reps "$reps" "$@" || echo "device_code_compare.sh: bench/lto_link.lua failed (see above)" >&2
echo
GPURUN_CACHE_DIR="$work/kernel-cache" "$gpurun" bench/cubin_load.lua --reps "$reps" --save "$work" --json \
  >"$work/gpurun.json"
"${PYTHON:-python3}" bench/cubin_load_compare.py --reps "$reps" --gpurun "$work/gpurun.json" || {
  echo "device_code_compare.sh: no cuda.core side (bench/cubin_load_compare.py failed); gpurun's figures:" >&2
  cat "$work/gpurun.json"
}
