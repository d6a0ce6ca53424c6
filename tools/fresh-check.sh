#!/bin/bash
# tools/fresh-check.sh — every install path the README and docs/install.md
# give, tried as a new user would on bare Debian 12 roots (tools/fresh-root.sh:
# a clean clone, the toolkit mounted with no loader entry; needs root): a
# build root, a deb root and a rock root, $FRESH_ROOT-build, -deb and -rock,
# each reset from $FRESH_ROOT_BARE first. Ends with "N passed, N failed,
# N skipped" over all.
#
#   tools/fresh-check.sh                 the three roots (what .ci/run runs)
#   tools/fresh-check.sh inside ROOT     the part that runs inside root ROOT
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

passed=0 failed=0 skipped=0
failed_parts=""

# count NAME STATUS LINE: adds a closing line (or, with none, the status as
# one check) to the totals.
count() {
  local name=$1 status=$2 line=$3
  if [ -z "$line" ]; then
    [ "$status" -eq 0 ] && line="1 passed, 0 failed, 0 skipped" || line="0 passed, 1 failed, 0 skipped"
  elif [ "$status" -ne 0 ] && [[ "$line" == *" 0 failed,"* ]]; then
    line="${line/ 0 failed,/ 1 failed,}"
  fi
  local p f s
  read -r p _ f _ s _ <<<"${line//,/}"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  [ "$f" -eq 0 ] || failed_parts="$failed_parts $name"
}

# part NAME COMMAND...: runs it; its closing line, or its exit status, counts.
part() {
  local name=$1
  shift
  echo "== fresh-check: $name: $*"
  local log
  log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  count "$name" "$status" "$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)"
  rm -f "$log"
  echo "== fresh-check: $name: exit $status"
}

finish() {
  [ -z "$failed_parts" ] && echo "fresh-check: clean" || echo "fresh-check: failed:$failed_parts"
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}

# ---- inside a root ------------------------------------------------------------

# docs_block NAME: the text of install.md's block marked <!-- fresh root: NAME -->.
docs_block() {
  awk -v mark="<!-- fresh root: $1 -->" '
    $0 == mark { found = 1; next }
    found == 1 && /^```/ { found = 2; next }
    found == 2 && /^```/ { exit }
    found == 2 { print }' docs/install.md
}

# run_docs NAME [COMMAND]: the block, then COMMAND, in one shell that stops
# at the first failure.
run_docs() {
  local text
  text=$(docs_block "$1")
  [ -n "$text" ] || { echo "docs/install.md has no block marked <!-- fresh root: $1 -->"; return 1; }
  bash -exc "$text${2:+$'\n'$2}"
}

# The main job, by COMMAND...: with a GPU it runs; without one, it prints one
# line (on stderr, after any build lines) and exits 1.
main_job() {
  local errors output status last devices
  errors=$(mktemp)
  output=$("$@" 2>"$errors")
  status=$?
  cat "$errors"
  printf '%s' "${output:+$output$'\n'}"
  last=$(tail -n 1 "$errors")
  rm -f "$errors"
  if devices=$(gpurun_bin -e 'io.write(require("gpurun").device_count())') && [ "$devices" -gt 0 ]; then
    [ "$status" -eq 0 ]
  elif [ "$status" -eq 1 ] && [ -z "$output" ] && [[ "$last" == "cudagraphs.lua: no CUDA GPU available: "* ]]; then
    echo "ok: $* printed its one line and exited 1"
  else
    echo "FAILED: $* (exit $status): expected one 'no CUDA GPU available' line and exit 1"
    return 1
  fi
}
gpurun_bin() { if [ -x build/gpurun ]; then build/gpurun "$@"; else gpurun "$@"; fi; }

# readme_spec LUA: the README's own spec (its <!-- user file: --> blocks) in
# a project folder, run by busted --lua=LUA --helper=gpurun.testing.
readme_spec() {
  local project output
  project=$(mktemp -d)
  awk -v project="$project" '
    /^<!-- user file: .* -->$/ { path = $4; next }
    path != "" && !inside && /^```/ { inside = 1; system("mkdir -p \"$(dirname \"" project "/" path "\")\""); next }
    inside && /^```/ { inside = 0; close(project "/" path); path = ""; next }
    inside { print > (project "/" path) }' README.md
  [ -n "$(ls -A "$project")" ] || { echo "the README has no <!-- user file: --> block"; return 1; }
  output=$(cd "$project" && busted --lua="$1" --helper=gpurun.testing 2>&1) || { echo "$output"; return 1; }
  echo "$output"
  [[ "$output" == *"1 spec(s) tagged #gpu excluded: "* ]]
}

# No package dev.sh build does not need (a root reset from the bare one).
build_packages_only() {
  tools/dev.sh build || return 1
  local package extra=""
  for package in lua-argparse lua-cjson lua-busted lua5.4 openmpi-bin dpkg-dev; do
    dpkg -s "$package" >/dev/null 2>&1 && extra="$extra $package"
  done
  [ -z "$extra" ] || { echo "tools/dev.sh build installed:$extra"; return 1; }
}

# The .deb as install.md builds it, kept in out/ (package-check makes its own).
deb_build() {
  command -v dpkg-shlibdeps >/dev/null && echo "note: dpkg-shlibdeps is installed here"
  run_docs deb-build || return 1
  mkdir -p out && cp build/gpurun_*.deb out/ && dpkg-deb -f out/gpurun_*.deb Depends
}

# The part inside one root, which runs install.md's blocks marked
# <!-- fresh root: NAME --> as they stand (apt answering yes):
#
#   build   tools/dev.sh build, which must install the build packages only;
#           the .deb as install.md builds it (deb-build), before anything
#           installs dpkg-dev; tools/dev.sh test, test-module and package
#           (the .deb's uncached NVRTC compile included) and run, the main
#           job, which with no GPU prints one line and exits 1; cmake
#           --install into /usr/local (cmake-install) and into another
#           prefix (prefix), from which busted --lua=lua5.4 runs the
#           README's own spec
#   deb     a second bare root: apt install of the .deb the build root made
#           (deb-install), gpurun -v and the main job's no-GPU line there
#   rock    a third: luarocks make after the prerequisites install.md lists
#           (rock), then the README's own spec by busted --lua=lua5.4
inside() {
  # A person answers yes to apt; nothing asks anything else.
  echo 'APT::Get::Assume-Yes "true";' >/etc/apt/apt.conf.d/90fresh-check
  export DEBIAN_FRONTEND=noninteractive
  case "$1" in
    build)
      part "dev.sh build: build packages only" build_packages_only
      part "deb-build" deb_build
      part tests tools/dev.sh test
      part module tools/dev.sh test-module
      part packages tools/dev.sh package
      part run main_job tools/dev.sh run
      part cmake-install run_docs cmake-install
      part "installed main job" main_job gpurun scripts/cudagraphs.lua --elements 4096
      part "prefix, the README's spec in lua5.4" run_docs prefix "$(declare -f readme_spec); readme_spec lua5.4" ;;
    deb)
      mkdir -p build && mv gpurun_*.deb build/ || return 1
      part deb-install run_docs deb-install
      part "the .deb's main job" main_job /usr/bin/gpurun scripts/cudagraphs.lua --elements 4096 ;;
    rock)
      part rock run_docs rock
      part "the README's spec in lua5.4 from the rock" readme_spec lua5.4 ;;
    *)
      echo "fresh-check: no root '$1' (build, deb or rock)"
      return 2 ;;
  esac
}

if [ "${1:-}" = inside ]; then
  inside "${2:-}"
  finish
  exit
fi

# ---- the three roots ------------------------------------------------------------

base=${FRESH_ROOT:-${TMPDIR:-/tmp}/gpurun-fresh-root}
export FRESH_ROOT_BARE=${FRESH_ROOT_BARE:-$base-bare}

# in_root NAME COMMAND [FILE...]: reset root NAME, run COMMAND there.
in_root() {
  local name=$1
  shift
  FRESH_ROOT=$base-$name tools/fresh-root.sh reset &&
    FRESH_ROOT=$base-$name tools/fresh-root.sh run . "$@"
  local status=$?
  FRESH_ROOT=$base-$name tools/fresh-root.sh clean >/dev/null
  return "$status"
}

FRESH_ROOT=$base-build tools/fresh-root.sh init || { echo "fresh-check: tools/fresh-root.sh init failed"; exit 1; }
part "build root" in_root build "tools/fresh-check.sh inside build"
deb=$(ls "$base"-build/home/user/gpurun/out/gpurun_*.deb 2>/dev/null | head -n 1)
if [ -n "$deb" ]; then
  part "deb root" in_root deb "tools/fresh-check.sh inside deb" "$deb"
else
  echo "fresh-check: the build root made no .deb"
  count "deb root" 1 ""
fi
part "rock root" in_root rock "tools/fresh-check.sh inside rock"
finish
