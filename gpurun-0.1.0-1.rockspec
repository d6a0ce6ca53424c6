-- `luarocks make` in this folder builds gpurun.so (CMake, below) and
-- installs it and the Lua library (gpurun.args, gpurun.bench, ...) for
-- Lua 5.4. It needs the CUDA toolkit's headers and NVRTC (CMake finds the
-- toolkit in /usr/local/cuda, on PATH through nvcc, or at $CUDAToolkit_ROOT)
-- and Lua's headers (liblua5.4-dev). The gpurun executable is not part of
-- the rock: cmake --install or the .deb install it.
rockspec_format = "3.0"
package = "gpurun"
version = "0.1.0-1"
-- This source tree: `luarocks make` builds what is here.
source = {
  url = "git+file://.",
}
description = {
  summary = "Drive NVIDIA GPUs from Lua 5.4: NVRTC kernels, launches, CUDA graphs, timing",
  detailed = [[
The gpurun module compiles CUDA C kernels with NVRTC, launches them with
checked arguments, captures them into CUDA graphs, replays and times them,
and checks the results. The CUDA driver is opened at run time: the module
loads, and compiles kernels, on a machine without one.]],
  labels = { "cuda", "gpu", "nvrtc" },
}
dependencies = {
  "lua >= 5.4, < 5.5",
  "argparse",
  "lua-cjson",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LUA_INCLUDE_DIR = "$(LUA_INCDIR)",
    GPURUN_EXECUTABLE = "OFF",
    GPURUN_LUA_MODULE_DIR = "$(LIBDIR)",
    GPURUN_LUA_LIBRARY_DIR = "$(LUADIR)",
    -- where luarocks then copies them: <tree>/lib/lua/5.4, <tree>/share/lua/5.4
    GPURUN_MODULE_TO_LUA_LIBRARY = "../../../share/lua/5.4",
  },
}
