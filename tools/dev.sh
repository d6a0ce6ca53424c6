#!/bin/sh
# tools/dev.sh — set up, build and run gpurun on a Debian machine with the
# CUDA toolkit: run, test, test-module, package, build and packages, as
# usage() below says. Missing Debian packages are installed when run as
# root, or named for you to install otherwise.
set -eu

cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${GPURUN_BUILD_DIR:-build}

usage() {
  cat <<'USAGE'
# tools/dev.sh — set up, build and run gpurun on a Debian machine with the CUDA toolkit.
#
#   tools/dev.sh run  [script args]   build, then run the main job
#                                     (gpurun scripts/cudagraphs.lua --elements 4096)
#   tools/dev.sh test [busted args]   build, then run the spec suite through gpurun
#   tools/dev.sh test-module [args]   build, then run the specs of the bindings and the
#                                     Lua library with stock busted on lua5.4, which
#                                     loads build/gpurun.so (not the command-line specs)
#   tools/dev.sh package              build, then build and try the installs: the .deb
#                                     (cpack) and the rock (luarocks make), in
#                                     temporary folders (tools/package-check.sh)
#   tools/dev.sh build                configure and build only (into build/, or $GPURUN_BUILD_DIR)
#   tools/dev.sh packages             list the Debian packages each command needs, and
#                                     the optional ones, with what each is for
#
# Missing Debian packages are installed when run as root, or named for you
# to install otherwise: build needs the build ones, run also the run ones,
# test and test-module also the test ones, package also the packaging ones.
# Extra CMake options: $GPURUN_CMAKE_ARGS.
USAGE
}

# The Debian packages, one list by what needs them: a package, a command or
# a file that shows it is there (not dpkg's database: a GPU host may have the
# packages unpacked without dpkg knowing), and what it is for.
packages=$(cat <<'LIST'
build    cmake            cmake                          the build (CMake and its back end)
build    make             make                           the build (CMake's back end without ninja)
build    gcc              gcc                            the C compiler
build    liblua5.4-dev    /usr/include/lua5.4/lua.h      Lua 5.4's headers and liblua5.4
build    libreadline-dev  /usr/include/readline/readline.h  the interactive mode
run      lua-argparse     /usr/share/lua/5.4/argparse.lua  gpurun.args, the scripts' command lines
run      lua-cjson        /usr/lib/x86_64-linux-gnu/lua/5.4/cjson.so  gpurun.report's JSON
test     lua-busted       /usr/share/lua/5.4/busted/runner.lua  the spec runner
test     lua5.4           /usr/bin/lua5.4                the specs that compare with lua5.4 or load gpurun.so
test     openmpi-bin      mpirun                         the rank specs of gpurun.dist
optional g++              g++                            the reductions and scans run on the CPU (spec/reductions_emulated_spec.lua)
optional python3          python3                        the table of the reduction benchmark's sides (spec/reductions_spec.lua)
optional python3-numpy    /usr/lib/python3/dist-packages/numpy/__init__.py  .npy files compared with NumPy (spec/npy_numpy_spec.lua)
optional gnuplot-nox      gnuplot                        the sweep's picture
optional graphviz         dot                            graph drawings (to_dot rendered)
optional mpich            mpiexec.mpich                  the rank specs under MPICH's ABI and launcher
optional libopenmpi-dev   /usr/lib/x86_64-linux-gnu/libmpi.so  Open MPI's headers and mpicc, for MPI programs beside gpurun
optional clang            clang                          the PTX parser's libFuzzer target (tools/fuzz-ptx.sh)
optional libclang-rt-14-dev  /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a  libFuzzer's runtime for it
optional lua-check        luacheck                       the Lua linter: tools/lint.sh, and the gate's own spec (spec/lint_spec.lua)
package  dpkg-dev         dpkg-shlibdeps                 tools/package-check.sh: the .deb's Depends held to dpkg-shlibdeps
package  luarocks         luarocks                       tools/package-check.sh: the rock
package  groff-base       groff                          tools/package-check.sh: the man page checked
LIST
)

# needs GROUP... -> "package:probe ..." of those groups.
needs() {
  printf '%s\n' "$packages" | while read -r group package probe _; do
    case " $* " in *" $group "*) printf ' %s:%s' "$package" "$probe" ;; esac
  done
}

command=${1:-build}
[ $# -gt 0 ] && shift
# The packages each command needs; the optional ones only name specs that
# are pending without them, and are installed where CI runs (CI=true): a GPU
# host has its own MPI and no package access.
case "$command" in
  build) required=$(needs build) optional="" ;;
  run) required=$(needs build run) optional="" ;;
  test|test-module) required=$(needs build run test) optional=$(needs optional) ;;
  package) required=$(needs build run test package) optional="" ;;
  packages)
    printf '%s\n' "$packages" | while read -r group package _ why; do
      [ -n "$group" ] && printf '%-9s %-19s %s\n' "$group" "$package" "$why"
    done
    exit 0 ;;
  *)
    usage >&2
    exit 2 ;;
esac

# missing_of "package:probe ..." -> the packages whose probe fails
missing_of() {
  for entry in $1; do
    package=${entry%%:*}
    probe=${entry#*:}
    case "$probe" in
      /*) [ -e "$probe" ] ;;
      *) command -v "$probe" >/dev/null 2>&1 ;;
    esac || printf ' %s' "$package"
  done
}
missing=$(missing_of "$required")
missing_optional=$(missing_of "$optional")
if [ -n "$missing_optional" ]; then
  if [ "${CI:-}" = true ]; then
    missing="$missing$missing_optional"
  else
    echo "dev.sh: optional Debian packages not installed:$missing_optional (tools/dev.sh packages says what for; CI installs them)" >&2
  fi
fi
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: installing Debian packages:$missing" >&2
    apt-get update -qq >&2
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >&2
  else
    echo "dev.sh: missing Debian packages:$missing" >&2
    echo "dev.sh: install them as root with: apt-get install$missing" >&2
    echo "dev.sh: (or, with sudo: sudo apt-get install$missing)" >&2
    exit 1
  fi
fi

cuda_root=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$cuda_root/include/nvrtc.h" ]; then
  echo "dev.sh: the CUDA toolkit was not found at $cuda_root (set CUDA_HOME):" >&2
  echo "dev.sh: gpurun needs its headers and NVRTC; install NVIDIA's cuda-toolkit package" >&2
  exit 1
fi

generator=""
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build_dir" $generator -DCUDAToolkit_ROOT="$cuda_root" \
    ${GPURUN_CMAKE_ARGS:-} >&2
fi
cmake --build "$build_dir" --parallel >&2

case "$command" in
  build) ;;
  run)
    [ $# -gt 0 ] || set -- --elements 4096
    exec "$build_dir/gpurun" scripts/cudagraphs.lua "$@" ;;
  test|test-module)
    GPURUN_BIN="$root/$build_dir/gpurun"
    # The suite's compiles go to a cache of its own, not the user's.
    GPURUN_CACHE_DIR=${GPURUN_TEST_CACHE_DIR:-$root/$build_dir/test-kernel-cache}
    export GPURUN_BIN GPURUN_CACHE_DIR
    [ "$command" = test ] && exec "$GPURUN_BIN" spec/run.lua "$@"
    # The module first on lua5.4's C path; ";;" (the default) unless the
    # caller's own path says otherwise.
    LUA_CPATH_5_4="$root/$build_dir/?.so;${LUA_CPATH_5_4:-${LUA_CPATH:-;}}"
    export LUA_CPATH_5_4
    exec busted --lua=lua5.4 --exclude-pattern=cli_spec --exclude-pattern=lua_conformance_spec \
      --exclude-pattern=scripts_spec --exclude-pattern=fuzz_spec "$@" ;;
  package)
    exec tools/package-check.sh "$build_dir" ;;
esac
