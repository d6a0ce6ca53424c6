#!/bin/bash
# tools/samples.sh — every port of NVIDIA's samples (samples/, and
# scripts/cudagraphs.lua for cudaGraphs) run with its defaults on a GPU host,
# each beside its Python original where that can run here: the pair's
# timing lines side by side, PASS or FAIL per port, then ".ci/run"'s
# closing line. usage() below says where the originals come from.
#
#   tools/samples.sh [--list] [--originals DIR]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

usage() {
  cat <<'USAGE'
tools/samples.sh [--list] [--originals DIR]

  --list           print each port's sample and script, and run nothing
  --originals DIR  NVIDIA/cuda-samples' python/ folder, whole (each sample's
                   folder and Utilities/); default $GPURUN_SAMPLE_ORIGINALS,
                   else samples/originals/, which git ignores: NVIDIA's code
                   stays out of the repository

Runs every port with build/gpurun ($GPURUN_BIN), each for at most
$GPURUN_SAMPLE_SECONDS seconds (default 300). It says which of python3,
cuda.core, cuda.compute, CuPy and NumPy are installed, and runs an original
only when its file is there and python3 is: an original that stops for a
missing package is reported so, not as a failure. The C++ graph samples'
originals need the cuda-samples build and are not run here. The
ports over gpurun.dist run under mpirun, one rank per GPU, where the host has
two GPUs or more, and are skipped otherwise. A port passes when it exits 0;
one that exits 2 saying it waives its test, as its original does (simpleP2P
without two GPUs that reach each other), counts as skipped.
USAGE
}

originals=${GPURUN_SAMPLE_ORIGINALS:-samples/originals}
list=0
while [ $# -gt 0 ]; do
  case $1 in
    --list) list=1 ;;
    --originals) originals=${2:?--originals needs a folder}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "samples.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
bin=${GPURUN_BIN:-build/gpurun}
seconds=${GPURUN_SAMPLE_SECONDS:-300}

# "category/name path" for every port, in order.
ports() {
  {
    echo "2_CoreConcepts/cudaGraphs scripts/cudagraphs.lua"
    for path in samples/*/*.lua; do
      name=${path##*/}
      category=${path#samples/}
      echo "${category%%/*}/${name%.lua} $path"
    done
  } | LC_ALL=C sort
}

if [ "$list" = 1 ]; then
  ports
  exit 0
fi
if [ ! -x "$bin" ]; then
  echo "samples.sh: no gpurun at $bin (tools/dev.sh build, or set GPURUN_BIN)" >&2
  exit 2
fi
devices=$("$bin" -e 'local g = require("gpurun")
  if g.device_count() == 0 then
    io.stderr:write("samples.sh: no CUDA GPU available: ", g.driver_error() or "no device", "\n")
    os.exit(1)
  end
  print(g.device_count())') || exit 1

echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
python=$(command -v python3 || true)
if [ -n "$python" ]; then
  echo "python3: $("$python" --version 2>&1)"
  for module in cuda.core cuda.compute cupy numpy; do
    version=$("$python" -c "import $module as x; print(getattr(x, '__version__', '') or 'installed')" 2>/dev/null)
    echo "$module: ${version:-not installed}"
  done
else
  echo "python3: not installed (no original runs)"
fi
if [ -d "$originals" ]; then
  echo "originals: $originals"
else
  echo "originals: $originals is not there (no original runs)"
fi

# The lines of a run's output that carry a figure with a unit of time or rate.
timing_lines() {
  grep -E '[0-9.]+ ?(ms|us|s|GB/s|M elements/ms)\b|[0-9.]+x$|us/iter' "$1" | sed 's/^[[:space:]]*//'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
skipped=0
while read -r sample path; do
  name=${sample##*/}
  # The ports over gpurun.dist run one MPI rank per GPU, and need two at least.
  command=("$bin" "$path")
  if grep -q 'require("gpurun.dist")' "$path"; then
    if [ "$devices" -lt 2 ] || ! command -v mpirun >/dev/null; then
      echo
      echo "== $sample: skipped: one MPI rank per GPU, and this host has $devices GPU$(
        [ "$devices" = 1 ] || echo s)$(command -v mpirun >/dev/null || echo ' and no mpirun')"
      skipped=$((skipped + 1))
      continue
    fi
    command=(mpirun --oversubscribe -np "$devices" "$bin" "$path")
    [ "$(id -u)" = 0 ] && command=(mpirun --allow-run-as-root "${command[@]:1}")
  fi
  timeout "$seconds" "${command[@]}" >"$work/port" 2>&1
  code=$?
  original="$originals/$sample/$name.py"
  : >"$work/original"
  if [ -z "$python" ]; then
    note="original not run: no python3"
  elif [ ! -f "$original" ]; then
    note="original not run: no $original"
  else
    original_args=()
    if [ "$name" = reductionMultiBlockCG ]; then # the one original with a required option
      cuda=${CUDA_HOME:-/usr/local/cuda}
      original_args=(--cuda-include-dir "$cuda/include/cccl:$cuda/include")
    fi
    (cd "$(dirname "$original")" && timeout "$seconds" "$python" "$name.py" "${original_args[@]}") \
      >"$work/original" 2>&1
    original_code=$?
    if grep -q "Required package not found\|pip install" "$work/original" && [ "$original_code" -ne 0 ]; then
      note="original stopped: $(grep -m1 'not found' "$work/original")"
      : >"$work/original"
    else
      note="original exited $original_code"
      [ "$original_code" -ne 0 ] && note="$note: $(grep -v '^[[:space:]]*$' "$work/original" | tail -n 1)"
    fi
  fi
  if [ "$code" -eq 0 ]; then
    verdict=PASS
    passed=$((passed + 1))
  elif [ "$code" -eq 2 ] && grep -q 'waiving' "$work/port"; then
    verdict="skipped: waived ($(grep -m1 'waiving' "$work/port"))"
    skipped=$((skipped + 1))
  else
    verdict="FAIL (exit $code)"
    failed=$((failed + 1))
  fi
  echo
  echo "== $sample: $verdict; $note"
  timing_lines "$work/port" >"$work/port.timing"
  timing_lines "$work/original" >"$work/original.timing"
  if [ -s "$work/port.timing" ] || [ -s "$work/original.timing" ]; then
    printf '   %-56s | %s\n' "gpurun ($path)" "original"
    paste -d '\t' "$work/port.timing" "$work/original.timing" |
      awk -F '\t' '{ printf "   %-56s | %s\n", $1, $2 }'
  fi
  case $verdict in
    FAIL*) tail -n 5 "$work/port" | sed 's/^/   | /' ;;
  esac
done < <(ports)
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
