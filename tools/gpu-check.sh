#!/bin/bash
# tools/gpu-check.sh — everything that needs a GPU, on a GPU host, in parts:
# suite, sanitizers, bench, compare, or all four (and stamp, for a host that
# gets the tree without .git). usage() below says what each part runs,
# where its logs go and the settings it reads.
#
#   tools/gpu-check.sh [suite [RUNS] | sanitizers | bench | compare | stamp]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$(pwd)
logs=${GPURUN_CHECK_LOGS:-gpu-check}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
build=build-gpu
bin=$build/gpurun

usage() {
  cat <<'USAGE'
# tools/gpu-check.sh — everything that needs a GPU, on a GPU host, in parts.
# One run of the suite takes 7.5 to 9 minutes on one H100 (16 cores), so
# where a command may run 10 minutes, run `suite 1` in each:
#
#   suite [RUNS]   build, then the full spec suite (#gpu specs included) RUNS
#                  times in a row (default 5), each run's closing line, then
#                  "suite: N of N runs passed"; then the bindings' specs
#                  through lua5.4 and gpurun.so, and the PTX signatures
#                  against the driver
#   sanitizers     compute-sanitizer's
#                  memcheck (--leak-check full), racecheck, synccheck and
#                  initcheck over every scripts/*.lua, every gpurun bench
#                  (bench/*.lua) and C bench (bench/*.c) and
#                  tests/sanitizer/while_graph, each with the small arguments
#                  of tools/compute-sanitizer-programs.txt, several at once.
#                  Lists each error (tool, program, its first lines) and ends
#                  with the count of errors not listed, with a reason, in
#                  tools/compute-sanitizer-expected.txt (expected: 0);
#                  then tools/sanitize.sh gpu (ASan + UBSan with the driver
#                  loaded), alone on the GPU, since specs that check
#                  freeing read the device's free memory
#   bench          the main job at two sizes, the fused comparison against
#                  CuPy and torch.compile, the sweep and the breakdown,
#                  gpurun against pure C, start-up, copy bandwidth
#   compare        the issues' comparisons, every side in one run each:
#                  allocation (bench/alloc_compare.sh: C, cuda.core, CuPy,
#                  torch), reductions and scans (bench/reduce_compare.sh:
#                  CUB, CuPy, torch), the library calls
#                  (bench/libraries_compare.sh: cuBLAS, cuFFT, cuSPARSE
#                  from C, CuPy, torch), declared pipelines against hand-built
#                  graphs (bench/pipeline_compare.lua), changing a graph's
#                  scalar (bench/graph_update.lua), the cost of a method
#                  call (bench/method_call.lua) and device code brought in
#                  (bench/device_code_compare.sh: gpurun's LTO link vs nvcc
#                  -dlto, saved cubins and cache hits vs cuda.core), and the
#                  jacobiCudaGraphs port against NVIDIA's C++ sample
#                  (bench/jacobi_compare.sh, REPS 3; the sample's sources in
#                  samples/originals/cpp, else its row says so)
#   (none)         all four, in that order
#   stamp          run in the checkout, not on the GPU host: records HEAD
#                  and a checksum of every tracked file in .tree-stamp/
#                  (git ignores it), for a host that gets the tree without
#                  .git: carry .tree-stamp there
#
#   tools/gpu-check.sh [suite [RUNS] | sanitizers | bench | compare | stamp]
#
# Every part first prints `git rev-parse HEAD`, or, without .git, the
# stamped commit and how many tracked files differ from the stamp. Logs (and the sweep's files)
# go to $GPURUN_CHECK_LOGS (default gpu-check/); builds to build-gpu/ (and
# build-asan/ for the sanitizers). $GPURUN_CHECK_JOBS: compute-sanitizer
# runs at once (default 6), $GPURUN_CHECK_RUN_SECONDS the limit of each
# (default 300, then exit 124); GPURUN_CHECK_ASAN=0 leaves the ASan part out;
# GPURUN_CHECK_BINDINGS=0 leaves the bindings' specs and the PTX check out of
# the suite part; $GPURUN_CHECK_PROGRAMS (an extended regular expression)
# runs compute-sanitizer on the programs it matches only, and the count
# says how many ran.
USAGE
}

step() { echo; echo "== $*"; }

# The commit every figure below is of: git's, in a checkout; on a GPU host
# that gets a copy of the tree without .git, the one `stamp` recorded in
# .tree-stamp/ where the checkout is, and how many tracked files differ
# from what it recorded.
stamp=.tree-stamp
commit_line() {
  if git rev-parse HEAD >/dev/null 2>&1; then
    echo "$(git rev-parse HEAD)$(
      [ -n "$(git status --porcelain --untracked-files=no)" ] && echo ' (with uncommitted changes)')"
  elif [ -s "$stamp/HEAD" ] && [ -s "$stamp/files" ]; then
    local differ
    differ=$(sha256sum --quiet -c "$stamp/files" 2>/dev/null | grep -c .)
    echo "$(cat "$stamp/HEAD") (stamped; $differ of $(wc -l <"$stamp/files") tracked files differ)"
  else
    echo "not a git checkout, and no $stamp/ (run tools/gpu-check.sh stamp in the checkout)"
  fi
}

part_stamp() {
  git rev-parse HEAD >/dev/null || exit 1
  rm -rf "$stamp" && mkdir "$stamp" || exit 1
  commit_line >"$stamp/HEAD"
  git ls-files -z | xargs -0 sha256sum >"$stamp/files"
  echo "$stamp: $(cat "$stamp/HEAD"), $(wc -l <"$stamp/files") files"
}

[[ "${BASH_SOURCE[0]}" == "$0" && "${1:-}" != stamp ]] && echo "gpu-check: $(commit_line)"

build_gpu() {
  step "build ($build)"
  if ! GPURUN_BUILD_DIR=$build tools/dev.sh build >"$logs/build.log" 2>&1; then
    tail -n 30 "$logs/build.log"
    exit 1
  fi
  # The C bench built only when asked for, so that the sanitizers find it
  # (its libraries missing: its runs say so).
  cmake --build "$build" --target libraries_c >>"$logs/build.log" 2>&1 \
    || echo "gpu-check: bench/libraries_c did not build (see $logs/build.log)"
  "$bin" -v
}

# ---- suite -----------------------------------------------------------------

summary_of() {
  grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1
}

part_suite() {
  local runs=${1:-5} passed_runs=0 run
  for ((run = 1; run <= runs; run++)); do
    step "spec suite, run $run of $runs"
    local log="$logs/specs-$run.log" started=$SECONDS
    GPURUN_BUILD_DIR=$build tools/dev.sh test >"$log" 2>&1
    local status=$?
    local line
    line=$(summary_of "$log")
    echo "run $run: ${line:-no closing line} (exit $status, $((SECONDS - started)) s)"
    if [ "$status" -eq 0 ] && [[ "$line" == *" 0 failed,"* ]]; then
      passed_runs=$((passed_runs + 1))
    elif [ -n "$line" ]; then
      grep -E -A12 '^(Failure|Error) ->' "$log" | head -n 60
    else # cut short: the failures as they were written
      grep -E -A12 '^(Failure|Error) now ->' "$log" | head -n 60
    fi
  done
  echo "suite: $passed_runs of $runs runs passed"

  [ "${GPURUN_CHECK_BINDINGS:-1}" = 1 ] || return 0
  step "the specs of the bindings through lua5.4 and $build/gpurun.so (stock busted)"
  GPURUN_BUILD_DIR=$build tools/dev.sh test-module >"$logs/specs-module.log" 2>&1
  echo "$(summary_of "$logs/specs-module.log") (exit $?)"
  step "ptx_params_test --driver (signatures against cuKernelGetParamInfo)"
  "$build/tests/ptx_params_test" --driver tests/fixtures/ptx 2>&1 | tee "$logs/ptx-params.log" | tail -n 3
}

# ---- sanitizers ----------------------------------------------------------------

# The programs: every scripts/*.lua, bench/*.lua and bench/*.c (as its
# build's binary), then the extra ones the table lists (while_graph).
# Prints "PROGRAM<TAB>COMMAND" lines; the table gives the arguments.
program_lines() {
  local table=tools/compute-sanitizer-programs.txt
  declare -A args=()
  local program rest
  while read -r program rest; do
    [[ -z "$program" || "$program" == \#* ]] && continue
    args[$program]=${rest//BUILD/$build}
  done <"$table"
  local file name listed=()
  for file in scripts/*.lua bench/*.lua bench/*.c; do
    [ -e "$file" ] || continue
    case "$file" in
      *.c) name=bench/$(basename "$file" .c) ;;
      *) name=$file ;;
    esac
    listed+=("$name")
  done
  for program in "${!args[@]}"; do
    [[ " ${listed[*]} " == *" $program "* ]] || listed+=("$program")
  done
  for program in "${listed[@]}"; do
    [[ -z "${GPURUN_CHECK_PROGRAMS:-}" || "$program" =~ $GPURUN_CHECK_PROGRAMS ]] || continue
    local command
    case "$program" in
      *.lua) command="$bin $program" ;;
      bench/*) command="$build/$program" ;;
      *) command="$build/$program" ;;
    esac
    if [ -n "${args[$program]+set}" ]; then
      printf '%s\t%s %s\n' "$program" "$command" "${args[$program]}"
    else
      echo "gpu-check: no small arguments for $program in $table: run with --iters 2 (add its line)" >&2
      printf '%s\t%s --iters 2\n' "$program" "$command"
    fi
  done | sort
}

# One compute-sanitizer run: TOOL PROGRAM COMMAND... -> its log.
sanitizer_run() {
  local tool=$1 program=$2
  shift 2
  local log="$logs/compute-sanitizer/$tool-${program//\//_}.log"
  local extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  {
    echo "# $tool $program: $*"
    timeout "${GPURUN_CHECK_RUN_SECONDS:-300}" "$sanitizer" --tool "$tool" "${extra[@]}" --print-limit 50 \
      --target-processes all "$@" </dev/null 2>&1
    echo "# exit $?"
  } >"$log"
}

# Prints "TOOL<TAB>PROGRAM<TAB>HEADLINE<TAB>CONTEXT" per error in a log: a
# headline is a "========= X" line that is no summary; its context the
# indented lines after it (where it happened).
errors_of() {
  local tool=$1 program=$2 log=$3
  awk -v tool="$tool" -v program="$program" '
    function flush() { if (head != "") print tool "\t" program "\t" head "\t" context; head = ""; context = "" }
    /^========= [^ ]/ {
      flush()
      line = substr($0, 11)
      if (line ~ /^(ERROR SUMMARY|LEAK SUMMARY|COMPUTE-SANITIZER|Target application returned|Error: process didn.t terminate|No CUDA-MEMCHECK results|RACECHECK SUMMARY|This can occur)/) next
      head = line; lines = 0; next
    }
    /^=========  +/ && head != "" {
      if (lines < 6) { sub(/^=========  +/, ""); context = context (lines ? " | " : "") $0; lines++ }
      next
    }
    /^=========$/ { flush() }
    END { flush() }
  ' "$log"
}

# Whether an error (the record's fields) is listed in the expected file:
# lines "TOOL PROGRAM-GLOB ERE -- reason", TOOL or glob * for any.
is_expected() {
  local tool=$1 program=$2 record=$3
  local etool eglob rest pattern
  while read -r etool eglob rest; do
    [[ -z "$etool" || "$etool" == \#* ]] && continue
    pattern=${rest%% -- *}
    [[ "$etool" == "*" || "$etool" == "$tool" ]] || continue
    # shellcheck disable=SC2053
    [[ "$program" == $eglob ]] || continue
    grep -Eq -- "$pattern" <<<"$record" && return 0
  done <tools/compute-sanitizer-expected.txt
  return 1
}

# The count a log's summary reports: memcheck, synccheck and initcheck end
# with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: N hazards
# displayed (E errors, W warnings)" (E + W); nothing when there is none.
reported_count() {
  local log=$1 line
  line=$(grep -oE 'ERROR SUMMARY: [0-9]+ errors?$' "$log" | tail -n 1)
  if [ -n "$line" ]; then
    grep -oE '[0-9]+' <<<"$line"
    return
  fi
  line=$(grep -oE 'RACECHECK SUMMARY: .*\(([0-9]+) errors?, ([0-9]+) warnings?\)' "$log" | tail -n 1)
  [ -n "$line" ] || return 0
  line=${line##*(}
  local errors warnings
  errors=$(grep -oE '^[0-9]+' <<<"$line")
  warnings=$(grep -oE '[0-9]+ warning' <<<"$line" | grep -oE '[0-9]+')
  echo $((errors + warnings))
}

# The program's exit status under the tool (the log's last line, "# exit N").
exit_of() {
  tail -n 1 "$1" | grep -oE '^# exit [0-9]+$' | grep -oE '[0-9]+'
}

# Lists each error of the logs in DIR that the expected file does not allow,
# and ends with the counts. A tool prints 50 errors of a run (--print-limit)
# and counts the rest in its summary: those past the limit count as listed
# only when every error the run printed is listed, and are counted apart.
count_errors() {
  local dir=$1
  local total=0 listed=0 unlisted=0 unprinted=0 log first tool
  for log in "$dir"/*.log; do
    [ -e "$log" ] || continue
    first=$(head -n 1 "$log") # "# TOOL PROGRAM: command"
    first=${first#\# }
    tool=${first%% *}
    program=${first#* }
    program=${program%%:*}
    local counted reported
    counted=$(errors_of "$tool" "$program" "$log")
    reported=$(reported_count "$log")
    # A program that fails under the tool is an error too, unless the
    # expected file allows it ("exit status N" as its headline).
    local status
    status=$(exit_of "$log")
    if [ "${status:-none}" != 0 ]; then
      counted+=$'\n'"$tool"$'\t'"$program"$'\t'"exit status ${status:-none}"$'\t'"$(grep -vE '^(=========|# )' "$log" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
    fi
    local found=0 found_unlisted=0 record
    while IFS= read -r record; do
      [ -n "$record" ] || continue
      found=$((found + 1))
      total=$((total + 1))
      if is_expected "$tool" "$program" "$record"; then
        listed=$((listed + 1))
      else
        unlisted=$((unlisted + 1))
        found_unlisted=$((found_unlisted + 1))
        IFS=$'\t' read -r _ _ headline context <<<"$record"
        echo "ERROR: $tool $program: $headline"
        [ -n "$context" ] && echo "    ${context:0:400}"
      fi
    done <<<"$counted"
    # A summary count beyond what was parsed, or a run that ended badly
    # without one, counts too.
    # (The exit record is not one of the summary's.)
    [ "${status:-none}" != 0 ] && found=$((found - 1))
    if [ -n "$reported" ] && [ "$reported" -gt "$found" ] && [ "$found" -gt 0 ] \
      && [ "$found_unlisted" -eq 0 ]; then
      listed=$((listed + reported - found))
      unprinted=$((unprinted + reported - found))
      total=$((total + reported - found))
    elif [ -n "$reported" ] && [ "$reported" -gt "$found" ]; then
      unlisted=$((unlisted + reported - found))
      total=$((total + reported - found))
      echo "ERROR: $tool $program: $((reported - found)) error(s) in the summary not parsed (see $log)"
    elif [ -z "$reported" ] && ! { [ "${status:-none}" != 0 ] \
      && is_expected "$tool" "$program" "$tool"$'\t'"$program"$'\t'"exit status $status"$'\t'; }; then
      # A listed exit status (a run that cannot end) explains a missing summary.
      unlisted=$((unlisted + 1))
      total=$((total + 1))
      echo "ERROR: $tool $program: no ERROR SUMMARY ($(tail -n 1 "$log")): see $log"
    fi
  done
  echo "compute-sanitizer: $total error(s), $listed listed in tools/compute-sanitizer-expected.txt ($unprinted of them past the print limit of runs whose printed errors are all listed), $unlisted unlisted"
}

part_sanitizers() {
  sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  local jobs=${GPURUN_CHECK_JOBS:-6}
  rm -rf "$logs/compute-sanitizer"
  mkdir -p "$logs/compute-sanitizer"
  local runs=0
  if [ ! -x "$sanitizer" ]; then
    echo "gpu-check: compute-sanitizer not found (PATH, \$CUDA_HOME/bin): its runs are left out"
  else
    step "compute-sanitizer: memcheck --leak-check full, racecheck, synccheck, initcheck, $jobs at a time"
    local lines program command tool running=0 started=$SECONDS cs_pids=()
    lines=$(program_lines)
    while IFS=$'\t' read -r program command; do
      for tool in memcheck racecheck synccheck initcheck; do
        # shellcheck disable=SC2086
        sanitizer_run "$tool" "$program" $command &
        cs_pids+=($!)
        runs=$((runs + 1))
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
          wait -n
          running=$((running - 1))
        fi
      done
    done <<<"$lines"
    # Every compute-sanitizer run (those wait -n took already return at once).
    wait "${cs_pids[@]}" 2>/dev/null
    echo "compute-sanitizer: $runs runs in $((SECONDS - started)) s"
  fi

  count_errors "$logs/compute-sanitizer"

  [ "${GPURUN_CHECK_ASAN:-1}" = 1 ] || return 0
  step "GPU ASan + UBSan (tools/sanitize.sh gpu): $logs/sanitize-gpu.log"
  local asan_status started=$SECONDS
  tools/sanitize.sh gpu >"$logs/sanitize-gpu.log" 2>&1
  asan_status=$?
  echo "exit $asan_status, $((SECONDS - started)) s"
  grep -E '^(sanitize: |== sanitize: .*report)|^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
    "$logs/sanitize-gpu.log" | tail -n 12
  [ "$asan_status" = 0 ] || grep -E -A12 '^(Failure|Error) ->' "$logs/sanitize-gpu.log" | head -n 40
}

# ---- bench -----------------------------------------------------------------

part_bench() {
  step "gpurun scripts/cudagraphs.lua --elements 4096"
  "$bin" scripts/cudagraphs.lua --elements 4096 2>&1 | tee "$logs/cudagraphs-4096.log"
  echo "exit ${PIPESTATUS[0]}"
  step "gpurun scripts/fused.lua --elements 16777216"
  "$bin" scripts/fused.lua --elements 16777216 2>&1 | tee "$logs/fused-16M.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: fused elementwise vs CuPy ElementwiseKernel and torch.compile"
  GPURUN_BIN=$bin bench/fused_compare.sh 2>&1 | tee "$logs/fused-compare.log"
  step "gpurun scripts/cudagraphs.lua --elements 16777216"
  "$bin" scripts/cudagraphs.lua --elements 16777216 2>&1 | tee "$logs/cudagraphs-16M.log"
  echo "exit ${PIPESTATUS[0]}"
  step "sweep 2^10..2^26 with its picture, and the breakdown"
  "$bin" scripts/sweep.lua --json "$logs/sweep.json" --csv "$logs/sweep.csv" \
    --plot "$logs/sweep.png" 2>&1 | tee "$logs/sweep.log"
  echo "exit ${PIPESTATUS[0]}"
  "$bin" scripts/cudagraphs.lua --breakdown 2>&1 | tee "$logs/breakdown.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: gpurun vs pure C"
  "$bin" bench/compare.lua --c-bench "$build/bench/cudagraphs_c" 2>&1 | tee "$logs/bench.log"
  step "start-up split"
  "$bin" bench/compare.lua --startup 2>&1 | tee "$logs/startup.log"
  step "host <-> device bandwidth: tables, strings, pinned memory, C"
  "$bin" bench/bandwidth.lua --c-bench "$build/bench/bandwidth_c" 2>&1 | tee "$logs/bandwidth.log"
}

part_compare() {
  step "benchmark: allocation and free, C, cuda.core, CuPy, torch and gpurun"
  GPURUN_BIN=$bin ALLOC_C=$build/bench/alloc_compare_c bench/alloc_compare.sh 2>&1 \
    | tee "$logs/alloc-compare.log"
  step "benchmark: reductions and scans against CUB, CuPy and torch"
  BUILD=$build bench/reduce_compare.sh 2>&1 | tee "$logs/reduce-compare.log"
  step "benchmark: cuBLAS, cuFFT and cuSPARSE calls against C, CuPy and torch"
  BUILD=$build bench/libraries_compare.sh 2>&1 | tee "$logs/libraries-compare.log"
  step "benchmark: declared pipelines against hand-built graphs"
  "$bin" bench/pipeline_compare.lua 2>&1 | tee "$logs/pipeline-compare.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: one scalar of a graph changed three ways"
  "$bin" bench/graph_update.lua 2>&1 | tee "$logs/graph-update.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: a declared pipeline with PDL against the hand-built graph"
  "$bin" bench/pdl_pipeline.lua 2>&1 | tee "$logs/pdl-pipeline.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: dag.lua's node times (graph:profile) against its replay"
  "$bin" bench/graph_profile.lua 2>&1 | tee "$logs/graph-profile.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: a method call and a field read from Lua"
  "$bin" bench/method_call.lua 2>&1 | tee "$logs/method-call.log"
  echo "exit ${PIPESTATUS[0]}"
  step "benchmark: device code brought in: LTO link vs nvcc -dlto, cubin loads vs cuda.core"
  BUILD=$build bench/device_code_compare.sh 2>&1 | tee "$logs/device-code-compare.log"
  step "benchmark: jacobiCudaGraphs, the port against NVIDIA's C++ sample built with nvcc"
  REPS=${REPS:-3} BUILD=$build bench/jacobi_compare.sh 2>&1 | tee "$logs/jacobi-compare.log"
}

# Sourced (by a spec that tries the error parsing), define only.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0
part=${1:-all}
[ $# -gt 0 ] && shift
case "$part" in
  stamp) part_stamp ;;
  suite) build_gpu; part_suite "$@" ;;
  sanitizers) build_gpu; part_sanitizers ;;
  bench) build_gpu; part_bench ;;
  compare) build_gpu; part_compare ;;
  all) build_gpu; part_suite; part_sanitizers; part_bench; part_compare ;;
  *) usage; exit 2 ;;
esac
