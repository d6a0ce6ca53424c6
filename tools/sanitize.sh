#!/bin/bash
# tools/sanitize.sh — gpurun's C code under memory and UB checkers, no GPU needed:
#
#   asan      the spec suite, run by a gpurun built with AddressSanitizer
#             (LeakSanitizer included) and UndefinedBehaviorSanitizer,
#             in build-asan/ (or $GPURUN_ASAN_BUILD_DIR)
#   ubsan     the spec suite again, by a gpurun built with UBSan alone, in
#             build-ubsan/ (or $GPURUN_UBSAN_BUILD_DIR): see "UBSan alone"
#   valgrind  memcheck, --leak-check=full, on representative commands of the
#             plain build (build/, or $GPURUN_BUILD_DIR)
#
#   tools/sanitize.sh [asan|ubsan|valgrind] [busted args]    (default: all three)
#
# Any report fails the run, whether from the suite's own process or from any
# gpurun it starts: every report lands in <build dir>/sanitizer-reports/.
# So does a valgrind error or a definite leak. Ends with the closing line
# "N passed, N failed, N skipped" over all parts. docs/reliability.md says
# what is checked where, and why.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

mode=all
case "${1:-}" in
  asan|ubsan|valgrind) mode=$1; shift ;;
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
# No suppressions: neither liblua nor NVRTC leaks in the suite (the CUDA
# driver, which does by design, is kept out: see below).
asan_options=(halt_on_error=1 abort_on_error=1 detect_leaks=1 allocator_may_return_null=1
              detect_stack_use_after_return=1 strict_string_checks=1)
ubsan_options=(halt_on_error=1 abort_on_error=1 print_stacktrace=1)

join() { local IFS=:; echo "$*"; }

# Sets suite_passed/failed/skipped from the last closing line in a log.
read_summary() {
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" | tail -n 1)
  [ -n "$line" ] || return 1
  read -r suite_passed _ suite_failed _ suite_skipped _ <<<"${line//,/}"
}

# suite NAME BUILD_DIR SANITIZERS [busted args]
suite() {
  local name=$1 dir=$2 sanitizers=$3
  shift 3
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
    return
  fi
  if ! cmake --build "$dir" --parallel >&2; then
    fail_part "$name-build"
    return
  fi

  local reports="$root/$dir/sanitizer-reports"
  rm -rf "$reports"
  mkdir -p "$reports"
  # The no-GPU suite on every host, a GPU host included: under ASan the CUDA
  # driver needs protect_shadow_gap=0 and leaks by design (docs/reliability.md).
  echo "== sanitize: the spec suite under -fsanitize=$sanitizers (CUDA driver not loaded)"
  local log="$dir/suite.log"
  ASAN_OPTIONS=$(join "${asan_options[@]}" "log_path=$reports/asan") \
  UBSAN_OPTIONS=$(join "${ubsan_options[@]}" "log_path=$reports/ubsan") \
  GPURUN_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
  GPURUN_BUILD_DIR=$dir \
    tools/dev.sh test "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}

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

# UBSan alone: with gcc, a libubsan loaded beside libasan writes its reports
# to the process's stderr whatever log_path says, so under ASan a child's UB
# report shows only as that child's exit code 134. Alone, it honours
# log_path, and every UB report from every process lands in a file.
case "$mode" in
  asan) suite asan "$asan_dir" address,undefined "$@" ;;
  ubsan) suite ubsan "$ubsan_dir" undefined "$@" ;;
  valgrind) run_valgrind ;;
  all)
    suite asan "$asan_dir" address,undefined "$@"
    suite ubsan "$ubsan_dir" undefined "$@"
    run_valgrind ;;
esac

if [ -n "$failed_parts" ]; then
  echo "sanitize: failed:$failed_parts"
else
  echo "sanitize: clean"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ -z "$failed_parts" ]
