#!/bin/sh
# tools/lint.sh — luacheck (Debian's lua-check) over gpurun's Lua: lua/,
# scripts/, samples/, bench/, spec/ and tools/, with the repository's .luacheckrc.
#
# Prints each file with a warning and its warnings (with their codes, for an
# inline ignore where the code is right as it is), then ".ci/run"'s closing
# line: a file with no warning passes, a file with any fails. Exits non-zero
# on any warning. Without luacheck it says so and is skipped, except where CI
# runs (CI=true), where it fails: tools/dev.sh test installs lua-check there.
set -u

cd "$(dirname "$0")/.." || exit 1

if ! command -v luacheck >/dev/null 2>&1; then
  echo "lint: luacheck not found (apt-get install lua-check; tools/dev.sh packages lists it)"
  if [ "${CI:-}" = true ]; then
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi

report=$(luacheck --no-color --codes --config .luacheckrc lua scripts samples bench spec tools 2>&1)
status=$?
# One "Checking FILE  OK" (or "N warnings", "N errors") line per file.
passed=$(printf '%s\n' "$report" | grep -cE '^Checking .* OK$')
checked=$(printf '%s\n' "$report" | grep -c '^Checking ')
failed=$((checked - passed))
printf '%s\n' "$report" | grep -vE '^Checking .* OK$' | grep -v '^$'
if [ "$checked" -eq 0 ] || { [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; }; then
  # luacheck stopped before checking (a bad config, an unreadable folder).
  echo "lint: luacheck exited $status without a verdict on every file"
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed, 0 skipped"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
