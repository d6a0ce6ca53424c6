#!/bin/bash
# tools/sanitize.sh — gpurun's C code under memory and UB checkers: asan,
# ubsan and valgrind (the default; no GPU needed), gpu and hammer (on a GPU
# host), each described above the dispatch at the end. Any report fails the
# run; docs/reliability.md says what is checked where, and why. Ends with
# the closing line "N passed, N failed, N skipped" over all parts.
#
#   tools/sanitize.sh [asan|ubsan|valgrind|gpu] [busted args]  (default: the first three)
#   tools/sanitize.sh hammer [RUNS [JOBS]]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

mode=all
case "${1:-}" in
  asan|ubsan|valgrind|gpu|hammer) mode=$1; shift ;;
esac

plain_dir=${GPURUN_BUILD_DIR:-build}
asan_dir=${GPURUN_ASAN_BUILD_DIR:-build-asan}
ubsan_dir=${GPURUN_UBSAN_BUILD_DIR:-build-ubsan}

passed=0 failed=0 skipped=0
failed_parts=""
fail_part() { failed=$((failed + ${2:-1})); failed_parts="$failed_parts $1"; }

# Packages, and the plain build that valgrind runs.
if ! GPURUN_BUILD_DIR=$plain_dir tools/dev.sh build; then
  echo "sanitize: the plain build failed"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

# ---- the spec suite under sanitizers ----------------------------------------

# The options, one reason each:
#  halt_on_error, abort_on_error  the first report ends the process with
#      SIGABRT (exit 134), which no spec takes for gpurun's own codes 1 and 2
#  detect_leaks                   LeakSanitizer at every exit
#  allocator_may_return_null      an absurd malloc returns NULL, as glibc's
#      does, so that what is checked is gpurun's "not enough memory" path
#  detect_stack_use_after_return, strict_string_checks   stricter checks
#  print_stacktrace               UBSan reports say where they came from
#  log_path                       each report to a file of its own
# Neither liblua nor NVRTC leaks in the suite (the CUDA driver, which does
# by design, is kept out: see below); nvJitLink does, on a failed link:
#  suppressions=lsan-cuda.supp    the CUDA libraries' own allocations they
#      never free (each entry says why); gpurun's stay reported
# With the driver loaded (gpu, hammer), one more:
#  protect_shadow_gap=0           the driver maps memory where ASan keeps
#      its shadow gap, and cuInit fails without it
asan_options=(halt_on_error=1 abort_on_error=1 detect_leaks=1 allocator_may_return_null=1
              detect_stack_use_after_return=1 strict_string_checks=1)
ubsan_options=(halt_on_error=1 abort_on_error=1 print_stacktrace=1)
driver_asan_options=(protect_shadow_gap=0)
lsan_options=("suppressions=$root/tools/lsan-cuda.supp" print_suppressions=0)

join() { local IFS=:; echo "$*"; }

# Sets suite_passed/failed/skipped from the last closing line in a log.
read_summary() {
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1)
  [ -n "$line" ] || return 1
  read -r suite_passed _ suite_failed _ suite_skipped _ <<<"${line//,/}"
}

# build_sanitized NAME BUILD_DIR SANITIZERS: configures and builds, or
# counts the part failed and returns 1.
build_sanitized() {
  local name=$1 dir=$2 sanitizers=$3
  echo "== sanitize: build with -fsanitize=$sanitizers ($dir)"
  mkdir -p "$dir"
  local generator=()
  if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  if ! cmake -S "$root" -B "$dir" "${generator[@]}" -DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" \
       -DGPURUN_SANITIZE="$sanitizers" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"
    fail_part "$name-build"
    return 1
  fi
  if ! cmake --build "$dir" --parallel >&2; then
    fail_part "$name-build"
    return 1
  fi
}

# suite NAME BUILD_DIR SANITIZERS DRIVER [busted args]: DRIVER "none" keeps
# the CUDA driver out (every host alike), "loaded" runs the #gpu specs with it.
suite() {
  local name=$1 dir=$2 sanitizers=$3 driver=$4
  shift 4
  build_sanitized "$name" "$dir" "$sanitizers" || return

  local reports="$root/$dir/sanitizer-reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  local log="$dir/suite.log" status
  if [ "$driver" = none ]; then
    # The no-GPU suite on every host, a GPU host included: under ASan the
    # CUDA driver needs protect_shadow_gap=0 and leaks by design
    # (docs/reliability.md); the gpu part runs with it.
    echo "== sanitize: the spec suite under -fsanitize=$sanitizers (CUDA driver not loaded)"
    ASAN_OPTIONS=$(join "${asan_options[@]}" "log_path=$reports/asan") \
    LSAN_OPTIONS=$(join "${lsan_options[@]}") \
    UBSAN_OPTIONS=$(join "${ubsan_options[@]}" "log_path=$reports/ubsan") \
    GPURUN_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
    GPURUN_BUILD_DIR=$dir \
      tools/dev.sh test "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
  else
    echo "== sanitize: the #gpu specs under -fsanitize=$sanitizers, the CUDA driver loaded"
    if ! ASAN_OPTIONS=$(join "${asan_options[@]}" "${driver_asan_options[@]}") \
         LSAN_OPTIONS=$(join "${lsan_options[@]}") \
         "$dir/gpurun" -e 'os.exit(require("gpurun").device_count() > 0 and 0 or 1)'; then
      echo "sanitize: $name: no GPU visible to $dir/gpurun: the gpu part needs one"
      fail_part "$name-no-gpu"
      return
    fi
    ASAN_OPTIONS=$(join "${asan_options[@]}" "${driver_asan_options[@]}" "log_path=$reports/asan") \
    LSAN_OPTIONS=$(join "${lsan_options[@]}") \
    UBSAN_OPTIONS=$(join "${ubsan_options[@]}" "log_path=$reports/ubsan") \
    GPURUN_BUILD_DIR=$dir \
      tools/dev.sh test --tags=gpu "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
  fi

  local suite_passed suite_failed suite_skipped
  if read_summary "$log"; then
    passed=$((passed + suite_passed))
    failed=$((failed + suite_failed))
    skipped=$((skipped + suite_skipped))
  else
    echo "sanitize: the $name suite printed no summary (exit $status)"
    failed=$((failed + 1))
  fi
  [ "$status" -eq 0 ] || failed_parts="$failed_parts $name-suite"

  # The report files, and any report that reached the suite's own output.
  local count=0 file
  for file in "$reports"/*; do
    [ -e "$file" ] || continue
    count=$((count + 1))
    echo "== sanitize: $name report $(basename "$file")"
    head -n 80 "$file"
  done
  if grep -qE '^==[0-9]+==ERROR: (Address|Leak)Sanitizer|: runtime error: ' "$log"; then
    echo "== sanitize: a sanitizer report is in the $name suite's output above"
    count=$((count + 1))
  fi
  echo "sanitize: $name: $count sanitizer report(s)"
  [ "$count" -eq 0 ] || fail_part "$name-reports" "$count"
}

# ---- valgrind on representative commands ------------------------------------

VALGRIND_KERNEL='extern "C" __global__ void scale(float *x, float f, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= f; }'

# valgrind_check NAME EXPECTED_EXIT [NAME=VALUE...] -- GPURUN_ARGS...
valgrind_check() {
  local name=$1 expected=$2
  shift 2
  local env=()
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  if ! command -v valgrind >/dev/null 2>&1; then
    skipped=$((skipped + 1))
    return
  fi
  local log
  log=$(mktemp)
  env "${env[@]}" valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --log-file="$log" \
    "$plain_dir/gpurun" "$@" >"$log.out" 2>&1 </dev/null
  local code=$?
  if [ "$code" -eq "$expected" ]; then
    echo "valgrind ok: $name"
    passed=$((passed + 1))
  else
    echo "valgrind FAILED: $name (exit $code, expected $expected; 99: valgrind found errors)"
    cat "$log"
    tail -n 20 "$log.out"
    fail_part valgrind
  fi
  rm -f "$log" "$log.out"
}

run_valgrind() {
  if command -v valgrind >/dev/null 2>&1; then
    echo "== sanitize: valgrind memcheck on $plain_dir/gpurun"
  else
    echo "sanitize: valgrind is not installed (apt-get install valgrind): its checks are skipped"
  fi
  local cache
  cache=$(mktemp -d)
  local no_driver=GPURUN_CUDA_DRIVER=/nonexistent/libcuda.so.1
  local compile="local g = require('gpurun')
local program = g.Program([[$VALGRIND_KERNEL]], 'c++', { arch = 'sm_90', std = 'c++17' })"
  valgrind_check "NVRTC compiles PTX (no cache)" 0 GPURUN_NO_CACHE=1 "$no_driver" -- \
    -e "$compile
local code = program:compile('ptx')
assert(code.code:find('.entry scale', 1, true))"
  valgrind_check "NVRTC compiles a CUBIN into the kernel cache, then reads it back" 0 \
    "GPURUN_CACHE_DIR=$cache" "$no_driver" -- \
    -e "$compile
assert(not program:compile('cubin').from_cache)
assert(program:compile('cubin').from_cache)"
  valgrind_check "a failing compile raises NVRTC's log, caught and then uncaught" 1 \
    GPURUN_NO_CACHE=1 "$no_driver" -- \
    -e "local g = require('gpurun')
local broken = g.Program('__global__ void k() { undeclared(); }', 'c++', { arch = 'sm_90' })
local ok, message = pcall(broken.compile, broken, 'ptx')
assert(not ok and message:find('undeclared', 1, true))
broken:compile('cubin')"
  valgrind_check "usage error" 2 "$no_driver" -- -z
  valgrind_check "missing script" 1 "$no_driver" -- /nonexistent/script.lua
  valgrind_check "error object with __tostring" 1 "$no_driver" -- \
    -e "error(setmetatable({}, { __tostring = function() return 'custom' end }))"
  valgrind_check "-v without a CUDA driver" 0 "$no_driver" -- -v
  valgrind_check "the interactive mode (readline) at the end of input" 0 "$no_driver" -- -i
  valgrind_check "system Lua C modules and gpurun's Lua library" 0 "$no_driver" -- \
    -e "require('lfs'); require('cjson'); require('gpurun.bench')"
  rm -rf "$cache"
}

# ---- the hammer: the GPU finalizer fuzz child, many times over --------------

# hammer_one KIND BIN SEED RUN_DIR: one fuzz child as spec/fuzz_spec.lua
# starts it (the repository as its folder, stdin /dev/null, the suite's
# GPURUN_BIN and GPURUN_CACHE_DIR), outputs and exit code into RUN_DIR.
hammer_one() {
  local kind=$1 bin=$2 seed=$3 run=$4
  mkdir -p "$run"
  local env=(GPURUN_BIN="$root/$bin" GPURUN_CACHE_DIR="$root/$(dirname "$bin")/test-kernel-cache")
  if [ "$kind" = asan ]; then
    env+=("ASAN_OPTIONS=$(join "${asan_options[@]}" "${driver_asan_options[@]}" "log_path=$run/asan")"
          "LSAN_OPTIONS=$(join "${lsan_options[@]}")"
          "UBSAN_OPTIONS=$(join "${ubsan_options[@]}" "log_path=$run/ubsan")")
  fi
  echo "${env[*]} $root/$bin tools/fuzz.lua --seed $seed --calls $hammer_calls --gpu --finalizers" \
    >"$run/command"
  (cd "$root" && env "${env[@]}" "$root/$bin" tools/fuzz.lua --seed "$seed" --calls "$hammer_calls" \
     --gpu --finalizers </dev/null >"$run/stdout" 2>"$run/stderr")
  echo $? >"$run/code"
}

# Prints what is known of a crashed run: its reports, else a replay's stack.
hammer_stack() {
  local kind=$1 bin=$2 run=$3
  local file found=0
  for file in "$run"/asan.* "$run"/ubsan.*; do
    [ -e "$file" ] || continue
    found=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|    #[0-9]+ )|runtime error' "$file" | head -n 30
  done
  [ "$found" -eq 1 ] && return
  grep -E '==ERROR|runtime error|^    #[0-9]+ ' "$run/stderr" | head -n 30 | grep . && return
  if [ "$kind" = plain ] && command -v gdb >/dev/null 2>&1; then
    echo "  (no report: replaying once under gdb for a stack; the collector's timing may differ)"
    (cd "$root" && eval "timeout 300 env $(sed "s| $root/$bin | gdb -q -batch -ex run -ex bt --args $root/$bin |" \
      "$run/command")" </dev/null 2>&1) | grep -E '^#[0-9]+ |signal SIG' | head -n 30
  else
    tail -n 5 "$run/stderr"
  fi
}

run_hammer() {
  local runs=${1:-160} jobs=${2:-$(nproc)}
  local seconds=${GPURUN_HAMMER_SECONDS:-480}
  local base=${GPURUN_FUZZ_SEED:-20240611}
  hammer_calls=${GPURUN_FUZZ_CALLS:-10000}
  local kinds=(${GPURUN_HAMMER_BUILDS:-plain asan})
  local out="$root/hammer"
  rm -rf "$out"
  mkdir -p "$out"
  local kind bin
  for kind in "${kinds[@]}"; do
    case "$kind" in
      plain) bin=$plain_dir/gpurun ;;
      asan) build_sanitized asan "$asan_dir" address,undefined || return; bin=$asan_dir/gpurun ;;
      *) echo "sanitize: hammer: unknown build '$kind' (plain, asan)"; fail_part hammer; return ;;
    esac
    # The suite's kernel cache, warm, as in the suite (one short child fills it).
    hammer_calls=300 hammer_one "$kind" "$bin" "$base" "$out/warm-$kind"
    if [ "$(cat "$out/warm-$kind/code")" != 0 ]; then
      echo "sanitize: hammer: the $kind warm-up child failed:"
      tail -n 20 "$out/warm-$kind/stderr"
      fail_part "hammer-$kind"
      return
    fi
  done

  local total_runs=0 total_crashes=0 total_failures=0
  local budget=$((seconds / ${#kinds[@]}))
  for kind in "${kinds[@]}"; do
    [ "$kind" = plain ] && bin=$plain_dir/gpurun || bin=$asan_dir/gpurun
    echo "== sanitize: hammer: $runs $kind runs of tools/fuzz.lua --gpu --finalizers (--calls $hammer_calls), $jobs at a time, for at most $budget s"
    local started=$SECONDS running=0 seed
    for ((seed = base; seed < base + runs; seed++)); do
      [ $((SECONDS - started)) -lt "$budget" ] || break
      hammer_one "$kind" "$bin" "$seed" "$out/$kind/$seed" &
      running=$((running + 1))
      if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
      fi
    done
    wait
    local made=0 crashes=0 failures=0 run code
    for run in "$out/$kind"/*; do
      [ -e "$run/code" ] || continue
      made=$((made + 1))
      code=$(cat "$run/code")
      local reported=0
      compgen -G "$run/asan.*" >/dev/null || compgen -G "$run/ubsan.*" >/dev/null && reported=1
      if [ -z "$code" ] || [ "$code" -gt 128 ] || [ "$reported" -eq 1 ]; then
        crashes=$((crashes + 1))
        echo "hammer: CRASH: $kind seed $(basename "$run"): exit ${code:-none}"
        hammer_stack "$kind" "$bin" "$run"
        echo "  replay: $(cat "$run/command")"
      elif [ "$code" -ne 0 ]; then
        failures=$((failures + 1))
        echo "hammer: FAILED: $kind seed $(basename "$run"): exit $code"
        tail -n 8 "$run/stderr" | sed 's/^/  /'
        echo "  replay: $(cat "$run/command") --trace"
      fi
    done
    echo "hammer: $kind: $made runs (seeds $base..$((base + made - 1))), $crashes crashes, $failures other failures, $((SECONDS - started)) s"
    [ "$made" -lt "$runs" ] && echo "hammer: $kind: stopped after $budget s, $made of $runs runs made"
    total_runs=$((total_runs + made))
    total_crashes=$((total_crashes + crashes))
    total_failures=$((total_failures + failures))
  done
  echo "hammer: $total_runs runs, $total_crashes crashes"
  passed=$((passed + total_runs - total_crashes - total_failures))
  [ "$total_crashes" -eq 0 ] || fail_part hammer-crashes "$total_crashes"
  [ "$total_failures" -eq 0 ] || fail_part hammer-failures "$total_failures"
}

# The parts:
#
#   asan      the spec suite, run by a gpurun built with AddressSanitizer
#             (LeakSanitizer included) and UndefinedBehaviorSanitizer,
#             in build-asan/ (or $GPURUN_ASAN_BUILD_DIR), the CUDA driver
#             kept out (no GPU needed)
#   ubsan     the spec suite again, by a gpurun built with UBSan alone, in
#             build-ubsan/ (or $GPURUN_UBSAN_BUILD_DIR): see "UBSan alone"
#   valgrind  memcheck, --leak-check=full, on representative commands of the
#             plain build (build/, or $GPURUN_BUILD_DIR)
#   gpu       (a GPU host) the #gpu specs, the GPU fuzz with finalizers
#             included, by the ASan + UBSan build with the CUDA driver
#             loaded: ASAN_OPTIONS protect_shadow_gap=0, and the driver's
#             own leaks suppressed by tools/lsan-cuda.supp (only those)
#   hammer    (a GPU host) the fuzz child `tools/fuzz.lua --gpu --finalizers`
#             RUNS times per build (default 160) over as many seeds, JOBS at
#             a time (default: the cores), by the plain and the ASan build,
#             in the suite's environment; prints "hammer: N runs, N crashes"
#             and, per crash, its stack (ASan's report; gdb's for a plain
#             run replayed) and the command that replays it. Stops starting
#             runs after $GPURUN_HAMMER_SECONDS (default 480).
#
# Any report fails the run, whether from the suite's own process or from any
# gpurun it starts: every report lands in <build dir>/sanitizer-reports/.
# So does a valgrind error or a definite leak.
#
# UBSan alone: with gcc, a libubsan loaded beside libasan writes its reports
# to the process's stderr whatever log_path says, so under ASan a child's UB
# report shows only as that child's exit code 134. Alone, it honours
# log_path, and every UB report from every process lands in a file.
case "$mode" in
  asan) suite asan "$asan_dir" address,undefined none "$@" ;;
  ubsan) suite ubsan "$ubsan_dir" undefined none "$@" ;;
  valgrind) run_valgrind ;;
  gpu) suite gpu "$asan_dir" address,undefined loaded "$@" ;;
  hammer) run_hammer "$@" ;;
  all)
    suite asan "$asan_dir" address,undefined none "$@"
    suite ubsan "$ubsan_dir" undefined none "$@"
    run_valgrind ;;
esac

if [ -n "$failed_parts" ]; then
  echo "sanitize: failed:$failed_parts"
else
  echo "sanitize: clean"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ -z "$failed_parts" ]
