#!/bin/bash
# tools/fresh-check.sh — what a newcomer runs on a fresh machine, in a clean
# clone: the README's test command, the module's specs through lua5.4 and
# gpurun.so, the packages (the .deb's uncached NVRTC compile included), and
# the main job, which on a machine with no GPU must print its one-line
# message. .ci/run runs it inside tools/fresh-root.sh's bare Debian 12 root,
# where the toolkit has no loader entry (docs/reliability.md, "A fresh
# machine"); it runs anywhere else too.
#
# Ends with the closing line "N passed, N failed, N skipped" over all parts.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

passed=0 failed=0 skipped=0
failed_parts=""

# part NAME COMMAND...: runs it, adds its closing line to the totals.
part() {
  local name=$1
  shift
  echo "== fresh-check: $name: $*"
  local log
  log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
  rm -f "$log"
  if [ -z "$line" ]; then
    line="0 passed, 1 failed, 0 skipped"
  elif [ "$status" -ne 0 ] && [[ "$line" == *" 0 failed,"* ]]; then
    line="${line/ 0 failed,/ 1 failed,}"
  fi
  local p f s
  read -r p _ f _ s _ <<<"${line//,/}"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  [ "$f" -eq 0 ] || failed_parts="$failed_parts $name"
}

part tests tools/dev.sh test
part module tools/dev.sh test-module
part packages tools/dev.sh package

# The main job: with a GPU it runs; without one, it prints one line (on
# stderr, after dev.sh's own build lines) and exits 1.
echo "== fresh-check: run: tools/dev.sh run"
errors=$(mktemp)
output=$(tools/dev.sh run 2>"$errors")
status=$?
cat "$errors"
printf '%s' "${output:+$output$'\n'}"
last=$(tail -n 1 "$errors")
rm -f "$errors"
if gpurun_devices=$(build/gpurun -e 'io.write(require("gpurun").device_count())') &&
   [ "$gpurun_devices" -gt 0 ]; then
  if [ "$status" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_parts="$failed_parts run"; fi
elif [ "$status" -eq 1 ] && [ -z "$output" ] && [[ "$last" == "cudagraphs.lua: no CUDA GPU available: "* ]]; then
  echo "ok: tools/dev.sh run printed its one line and exited 1"
  passed=$((passed + 1))
else
  echo "FAILED: tools/dev.sh run (exit $status): expected one 'no CUDA GPU available' line and exit 1"
  failed=$((failed + 1))
  failed_parts="$failed_parts run"
fi

[ -z "$failed_parts" ] && echo "fresh-check: clean" || echo "fresh-check: failed:$failed_parts"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
