#!/bin/sh
# bench/libraries_compare.sh — gpurun's library calls (cuBLAS, cuFFT,
# cuSPARSE) against the same calls from C, CuPy and PyTorch on this GPU,
# every side captured in CUDA graphs and launched, in one table of medians
# and ratios: bench/libraries.lua, build/bench/libraries_c and
# bench/libraries_compare.py, as usage() below says.
set -eu

usage() {
  cat <<'USAGE'
bench/libraries_compare.sh — gpurun.matmul, gpurun.fft and gpurun.spmv
against the same cuBLAS, cuFFT and cuSPARSE calls from C, against CuPy
(cupy.matmul, cuFFT plans, cupyx.cusparse.spmv) and against PyTorch
(torch.matmul, a CUDA graph of torch.mm, torch.fft, torch.mv of a CSR
tensor), every path captured in a CUDA graph and launched, in one table of
medians with the ratios gpurun/C, gpurun/cupy and gpurun/torch:
bench/libraries.lua (gpurun), then build/bench/libraries_c (built here
from bench/libraries_c.c), then bench/libraries_compare.py (Python), which
prints every side.

  bench/libraries_compare.sh

The cases: GEMM of GEMM^3 in float32, bfloat16 and float16 and of
SMALL_GEMM^3 in float32; FFT c2c and r2c of each of FFT_SIZES; SpMV on the
5-point Laplacian of SPMV_ROWS rows (a square). Read from the environment:
GEMM (4096), SMALL_GEMM (64), FFT_SIZES (1048576,16777216), SPMV_ROWS
(4194304), CASES (gemm,small_gemm,fft,spmv), REPS (15) and REP_SECONDS
(0.1: about how long one repetition runs); QUICK=1 makes the defaults
small (GEMM 512, FFT_SIZES 4096,65536, SPMV_ROWS 65536, REPS 3,
REP_SECONDS 0.02). PYTHON (python3) and BUILD
(build); gpurun is $BUILD/gpurun, or $GPURUN_BIN. A side that cannot run
says why and its cells show '-'.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
cd "$(dirname "$0")/.."
if [ "${QUICK:-0}" = 1 ]; then
  gemm=${GEMM:-512} fft_sizes=${FFT_SIZES:-4096,65536} spmv_rows=${SPMV_ROWS:-65536}
  reps=${REPS:-3} seconds=${REP_SECONDS:-0.02}
else
  gemm=${GEMM:-4096} fft_sizes=${FFT_SIZES:-1048576,16777216} spmv_rows=${SPMV_ROWS:-4194304}
  reps=${REPS:-15} seconds=${REP_SECONDS:-0.1}
fi
set -- --gemm "$gemm" --small-gemm "${SMALL_GEMM:-64}" --fft-sizes "$fft_sizes" --spmv-rows "$spmv_rows" \
  --cases "${CASES:-gemm,small_gemm,fft,spmv}" --reps "$reps" --seconds "$seconds"
build=${BUILD:-build}
gpurun=${GPURUN_BIN:-$build/gpurun}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpurun_json=""
if "$gpurun" bench/libraries.lua "$@" --json >"$work/gpurun.json"; then
  gpurun_json="$work/gpurun.json"
else
  echo "libraries_compare.sh: no gpurun figures (bench/libraries.lua stopped; see above)" >&2
fi
c_json=""
if cmake --build "$build" --target libraries_c >"$work/c_build.log" 2>&1; then
  if "$build/bench/libraries_c" "$@" >"$work/c.json"; then
    c_json="$work/c.json"
  else
    echo "libraries_compare.sh: no C figures (libraries_c stopped; see above)" >&2
  fi
else
  echo "libraries_compare.sh: no C figures (libraries_c did not build; see below)" >&2
  tail -n 5 "$work/c_build.log" >&2
fi
"${PYTHON:-python3}" bench/libraries_compare.py "$@" ${gpurun_json:+--gpurun "$gpurun_json"} ${c_json:+--c "$c_json"}
