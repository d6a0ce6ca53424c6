#!/bin/sh
# bench/jacobi_compare.sh — samples/3_CUDA_Features/jacobiCudaGraphs.lua
# against NVIDIA's C++ sample jacobiCudaGraphs, built here with nvcc from
# the git-ignored originals, both run in turns in one run: each method's
# median "GPU Processing time" and the ratio, as usage() below says;
# docs/benchmark.md says how to read it.
set -eu

usage() {
  cat <<'USAGE'
bench/jacobi_compare.sh — the port samples/3_CUDA_Features/jacobiCudaGraphs.lua
against NVIDIA's C++ sample jacobiCudaGraphs (built here with nvcc), in
one run: for each of the three methods (0: the kernel node's arguments set
in the graph, set_args / cudaGraphExecKernelNodeSetParams; 1: a new
capture and a graph update, update / cudaGraphExecUpdate; 2: stream
launches, no graph), REPS runs of each side in turns, then one table of
the medians of the "GPU Processing time" lines (ms), gpurun / C++, and
each side's iteration count.

  bench/jacobi_compare.sh

REPS (default 5) and BUILD (build) are read from the environment; gpurun
is $BUILD/gpurun, or $GPURUN_BIN. The C++ sources are
$GPURUN_SAMPLE_ORIGINALS/cpp/3_CUDA_Features/jacobiCudaGraphs with the
cuda-samples headers in $GPURUN_SAMPLE_ORIGINALS/cpp/Common (default
samples/originals, which git ignores); nvcc is $CUDA_HOME/bin/nvcc
(default /usr/local/cuda/bin), else PATH. A side that cannot run is
reported in its rows; the exit status is the gpurun side's.
USAGE
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) echo "jacobi_compare.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
reps=${REPS:-5}
case "$reps" in
  ''|*[!0-9]*|0) echo "jacobi_compare.sh: REPS: expected a positive integer, got '$reps'" >&2; exit 2 ;;
esac
build=${BUILD:-build}
gpurun=${GPURUN_BIN:-$build/gpurun}
port=samples/3_CUDA_Features/jacobiCudaGraphs.lua
originals=${GPURUN_SAMPLE_ORIGINALS:-samples/originals}
sources=$originals/cpp/3_CUDA_Features/jacobiCudaGraphs
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The device's sm_XY from gpurun; without it the port cannot run either.
if ! arch=$("$gpurun" -e 'local g = require("gpurun")
    if g.device_count() == 0 then
      io.stderr:write("jacobi_compare.sh: no CUDA GPU available: ", g.driver_error() or "no device", "\n")
      os.exit(1)
    end
    print(g.Device(0).arch)'); then
  exit 1
fi

# Why the C++ side does not run, or nothing.
cpp_missing=""
if [ -z "$nvcc" ]; then
  cpp_missing="no nvcc (CUDA_HOME or PATH)"
elif [ ! -f "$sources/main.cpp" ] || [ ! -f "$originals/cpp/Common/helper_cuda.h" ]; then
  cpp_missing="no C++ sources at $sources (and headers at $originals/cpp/Common)"
elif ! "$nvcc" -O2 -arch="sm_$arch" -I"$originals/cpp/Common" -I"$sources" -o "$work/jacobiCudaGraphs" \
       "$sources/main.cpp" "$sources/jacobi.cu" >"$work/nvcc.log" 2>&1; then
  cpp_missing="nvcc failed (its log is above)"
  tail -n 20 "$work/nvcc.log" >&2
fi
[ -z "$cpp_missing" ] || echo "jacobi_compare.sh: no C++ side: $cpp_missing" >&2

# One run of a side for a method: appends "ms iterations" to $work/SIDE.METHOD,
# or says on stderr why it has no figure. The C++ sample loads its kernels
# at once (CUDA_MODULE_LOADING=EAGER), as gpurun does before its timer;
# by default the runtime would load them at the first launch, timed.
run_side() {
  side=$1 method=$2 out=$work/$1.$2.out
  if [ "$side" = gpurun ]; then
    status=0; "$gpurun" "$port" --gpumethod "$method" >"$out" 2>&1 || status=$?
  else
    status=0; CUDA_MODULE_LOADING=EAGER "$work/jacobiCudaGraphs" -gpumethod="$method" >"$out" 2>&1 || status=$?
  fi
  ms=$(sed -n 's/^GPU Processing time: \([0-9.]*\) (ms)$/\1/p' "$out")
  iterations=$(sed -n 's/^GPU iterations : \([0-9]*\)$/\1/p' "$out")
  if [ "$status" -eq 0 ] && [ -n "$ms" ] && [ -n "$iterations" ] \
     && grep -q '^&&&& jacobiCudaGraphs PASSED$' "$out"; then
    echo "$ms $iterations" >>"$work/$side.$method"
  else
    echo "jacobi_compare.sh: $side --gpumethod $method: no figure (exit $status):" >&2
    tail -n 5 "$out" >&2
    : >>"$work/$side.$method.failed"
  fi
}

rep=1
while [ "$rep" -le "$reps" ]; do
  for method in 0 1 2; do
    # Each side first in every other rep, so that neither always runs on
    # the clocks the other left.
    if [ -z "$cpp_missing" ] && [ $((rep % 2)) -eq 1 ]; then run_side cpp "$method"; fi
    run_side gpurun "$method"
    if [ -z "$cpp_missing" ] && [ $((rep % 2)) -eq 0 ]; then run_side cpp "$method"; fi
  done
  rep=$((rep + 1))
done

# median FILE COLUMN FORMAT -> the median of that column, or nothing.
median() {
  [ -s "$1" ] || return 0
  sort -n -k "$2,$2" "$1" | awk -v c="$2" -v f="$3" '{ v[NR] = $c }
    END { printf f "\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "jacobiCudaGraphs, gpurun port vs the C++ sample (nvcc -O2 -arch=sm_$arch), $reps runs each,"
echo "medians of 'GPU Processing time' in ms; iterations: GPU steps to convergence"
printf '%-36s %11s %11s %11s %7s  %s\n' method "gpurun ms" "C++ ms" "gpurun/C++" target "iterations gpurun / C++"
gpurun_failed=0
for method in 0 1 2; do
  case $method in
    0) name="0 node params (set_args)" ;;
    1) name="1 graph update (update)" ;;
    2) name="2 stream launches (no graph)" ;;
  esac
  ours=$(median "$work/gpurun.$method" 1 %.3f)
  theirs=$(median "$work/cpp.$method" 1 %.3f)
  [ -n "$ours" ] || gpurun_failed=1
  ratio=- verdict=-
  if [ -n "$ours" ] && [ -n "$theirs" ]; then
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
    verdict=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.03 ? "ok" : "MISSED") }')
  fi
  our_steps=$(median "$work/gpurun.$method" 2 %g)
  their_steps=$(median "$work/cpp.$method" 2 %g)
  printf '%-36s %11s %11s %11s %7s  %s / %s\n' "$name" "${ours:--}" "${theirs:--}" "$ratio" "$verdict" \
    "${our_steps:--}" "${their_steps:--}"
done
echo "target: gpurun/C++ <= 1.03 for each method"
[ -z "$cpp_missing" ] || echo "C++ side: not run ($cpp_missing)"
for file in "$work"/*.failed; do
  [ -e "$file" ] || continue
  name=${file##*/}
  echo "${name%.failed}: some runs had no figure (see above)"
done
exit "$gpurun_failed"
