#!/bin/bash
# tools/package-check.sh BUILD_DIR — the two packaged installs, the .deb and
# the rock, built and tried in temporary folders (run by `tools/dev.sh
# package`, which builds BUILD_DIR first and installs the tools). Ends with
# the closing line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
build_dir=$(cd "${1:-build}" && pwd) || exit 1

passed=0 failed=0 skipped=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# check NAME COMMAND...: one check, passed when COMMAND succeeds.
check() {
  local name=$1
  shift
  local output
  if output=$("$@" 2>&1); then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    printf '%s\n' "$output" | tail -n 30 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

# expect_output EXPECTED COMMAND...: COMMAND succeeds and prints EXPECTED.
expect_output() {
  local expected=$1
  shift
  local actual
  actual=$("$@") || return 1
  [ "$actual" = "$expected" ] || { printf 'expected: %s\n     got: %s\n' "$expected" "$actual"; return 1; }
}

version=$("$build_dir/gpurun" -e 'io.write(require("gpurun").version)')

# ---- the .deb ---------------------------------------------------------------

# cpack -G DEB in BUILD_DIR; its Depends (stated, and held to what
# dpkg-shlibdeps finds in it); dpkg -x into a temporary root; its RUNPATHs
# (tools/check-runpath.sh); from there an uncached NVRTC compile, gpurun -v,
# a script that loads the Lua library, and lua5.4 loading the unpacked
# gpurun.so.

echo "== package-check: cpack -G DEB in $build_dir"
make_deb() {
  rm -f "$build_dir"/gpurun_*.deb
  (cd "$build_dir" && cpack -G DEB) && ls "$build_dir"/gpurun_"$version"_*.deb
}
check "cpack -G DEB builds gpurun_${version}_<arch>.deb" make_deb
deb=$(ls "$build_dir"/gpurun_*.deb 2>/dev/null | head -n 1)
deb_root=$scratch/deb-root

has_depends() {
  local depends
  depends=$(dpkg-deb -f "$deb" Depends) || return 1
  echo "Depends: $depends"
  local package
  for package in liblua5.4-0 libreadline8 libc6 lua-argparse lua-cjson; do
    [[ ", $depends," == *", $package"[\ ,]* ]] || { echo "no $package"; return 1; }
  done
}
check "its Depends name Lua 5.4, readline, libc, lua-argparse and lua-cjson" has_depends

# The Depends are stated in cmake/install.cmake; dpkg-shlibdeps, run here on
# the packed binaries, says what they need, each entry of which the stated
# list must hold as it is.
depends_cover_shlibdeps() {
  local work=$scratch/shlibdeps
  mkdir -p "$work/debian" "$work/root" && dpkg -x "$deb" "$work/root" || return 1
  printf 'Source: gpurun\n\nPackage: gpurun\nArchitecture: any\n' >"$work/debian/control"
  local found
  found=$(cd "$work" && dpkg-shlibdeps -O --ignore-missing-info \
    root/usr/bin/gpurun root/usr/lib/lua/5.4/gpurun.so 2>/dev/null) || return 1
  found=${found#shlibs:Depends=}
  echo "dpkg-shlibdeps: $found"
  local depends entry
  depends=$(dpkg-deb -f "$deb" Depends) || return 1
  IFS=, read -ra entries <<<"$found"
  for entry in "${entries[@]}"; do
    entry=${entry# }
    [[ ", $depends," == *", $entry,"* ]] || { echo "Depends lacks '$entry' (cmake/install.cmake)"; return 1; }
  done
}
check "its Depends hold every shared library dpkg-shlibdeps finds" depends_cover_shlibdeps

unpack() {
  dpkg -x "$deb" "$deb_root" || return 1
  local file
  for file in usr/bin/gpurun usr/lib/lua/5.4/gpurun.so usr/share/lua/5.4/gpurun/bench.lua \
              usr/share/lua/5.4/gpurun/script/bench.lua usr/share/lua/5.4/gpurun/io/npy.lua \
              usr/share/man/man1/gpurun.1.gz; do
    [ -f "$deb_root/$file" ] || { echo "missing /$file"; return 1; }
  done
}
check "dpkg -x unpacks gpurun, gpurun.so, the Lua library and the man page" unpack

check "the unpacked gpurun and gpurun.so have no empty or relative RUNPATH entry" \
  tools/check-runpath.sh "$deb_root/usr"

# Uncached, so NVRTC itself runs: it must find its builtins library beside
# libnvrtc with no help from ld.so.conf (fresh-root.sh's CI step has none).
deb_compiles() {
  env -u GPURUN_LUA_DIR GPURUN_NO_CACHE=1 GPURUN_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
    "$deb_root/usr/bin/gpurun" -e 'local code = require("gpurun").Program(
      [[extern "C" __global__ void k(float *x) { x[0] = 1.0f; }]], "c++"):compile("ptx")
    assert(code.code:find(".entry k", 1, true))'
}
check "the unpacked gpurun compiles a kernel with NVRTC (no cache)" deb_compiles

deb_version() {
  local output
  output=$(env -u GPURUN_LUA_DIR "$deb_root/usr/bin/gpurun" -v) || return 1
  echo "$output"
  [[ "$output" == "gpurun $version"$'\n'*$'\n'"Lua 5.4."*"  Copyright (C) "* ]]
}
check "the unpacked gpurun -v" deb_version

cat >"$scratch/short.lua" <<'EOF'
-- loads the module and the Lua library, and says where the library came from
local gpurun = require("gpurun")
local check = require("gpurun.check")
local _, from = require("gpurun.bench")
assert(type(gpurun.device_count()) == "number" and type(check) == "table")
-- names whose code is in a subsystem's folder (script/, io/)
assert(require("gpurun.sweep.sizes").parse_size("2^10") == 1024 and require("gpurun.npy").header)
print(from)
EOF
check "a short script run by the unpacked gpurun uses the unpacked Lua library" \
  expect_output "$deb_root/usr/share/lua/5.4/gpurun/bench.lua" \
  env -u GPURUN_LUA_DIR "$deb_root/usr/bin/gpurun" "$scratch/short.lua"
check "lua5.4 loads the unpacked gpurun.so, which finds the unpacked Lua library" \
  expect_output "$deb_root/usr/share/lua/5.4/gpurun/bench.lua" \
  env -u GPURUN_LUA_DIR LUA_CPATH_5_4="$deb_root/usr/lib/lua/5.4/?.so;;" lua5.4 "$scratch/short.lua"

man_page() {
  local warnings
  warnings=$(zcat "$deb_root/usr/share/man/man1/gpurun.1.gz" | groff -man -Tutf8 -ww -z 2>&1) || return 1
  [ -z "$warnings" ] || { echo "$warnings"; return 1; }
}
if command -v groff >/dev/null 2>&1; then
  check "the man page formats without warnings" man_page
else
  echo "skipped: the man page (groff is not installed)"
  skipped=$((skipped + 1))
fi

# ---- the rock ---------------------------------------------------------------

# luarocks make (on a copy of the source tree) into a temporary tree; its
# gpurun.so's RUNPATH; lua5.4 loading the module and the library from that
# tree.

echo "== package-check: luarocks make into a temporary tree"
rock_source=$scratch/source
tree=$scratch/tree
copy_source() {
  mkdir -p "$rock_source" || return 1
  if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$root" ls-files -z --cached --others --exclude-standard \
      | (cd "$root" && xargs -0 cp --parents -t "$rock_source")
  else
    tar -C "$root" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$rock_source" -xf -
  fi
}
# Debian's lua-argparse and lua-cjson serve the rock's dependencies: luarocks
# cannot see them, hence --deps-mode=none.
rock_make() {
  copy_source || return 1
  (cd "$rock_source" && luarocks make --lua-version=5.4 --tree="$tree" --deps-mode=none \
    "gpurun-$version-1.rockspec")
}
check "luarocks make builds and installs gpurun-$version-1.rockspec" rock_make

rock_files() {
  local file
  for file in lib/lua/5.4/gpurun.so share/lua/5.4/gpurun/bench.lua share/lua/5.4/gpurun/script/bench.lua \
              share/lua/5.4/gpurun/io/npy.lua; do
    [ -f "$tree/$file" ] || { echo "missing $file"; return 1; }
  done
  [ ! -e "$tree/bin/gpurun" ] || { echo "the rock installed the executable"; return 1; }
}
check "the tree has gpurun.so and the Lua library, not the executable" rock_files
check "the rock's gpurun.so has no empty or relative RUNPATH entry" \
  tools/check-runpath.sh "$tree/lib"

rock_one_liner() {
  eval "$(luarocks --lua-version=5.4 --tree="$tree" path)" || return 1
  cd / && env -u GPURUN_LUA_DIR lua5.4 -e \
    'local g = require("gpurun") print(g.version, g.device_count() >= 0, select(2, require("gpurun.args")))'
}
check "lua5.4 -e 'require(\"gpurun\")' with the tree's luarocks path" \
  expect_output "$version"$'\t'"true"$'\t'"$tree/share/lua/5.4/gpurun/args.lua" rock_one_liner

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
