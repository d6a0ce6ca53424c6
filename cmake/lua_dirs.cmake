# Where gpurun's Lua library is found from the binary that holds the
# bindings (src/module/searcher.c): the source tree's lua/ for binaries in this
# build folder; else the installed copy, at a path relative to the folder of
# the executable or of gpurun.so, so that an installed tree can move
# (dpkg -x into any root, a luarocks tree anywhere).
function(gpurun_relative_dir out from to)
  foreach(dir from to)
    if(NOT IS_ABSOLUTE "${${dir}}")
      set(${dir} "${CMAKE_INSTALL_PREFIX}/${${dir}}")
    endif()
  endforeach()
  file(RELATIVE_PATH relative "${from}" "${to}")
  set(${out} "${relative}" PARENT_SCOPE)
endfunction()

gpurun_relative_dir(executable_to_lua "${CMAKE_INSTALL_BINDIR}" "${GPURUN_LUA_LIBRARY_DIR}")
gpurun_relative_dir(module_to_lua "${GPURUN_LUA_MODULE_DIR}" "${GPURUN_LUA_LIBRARY_DIR}")
# luarocks installs into the rock's own folder and then copies the files to
# the tree's lib/lua/5.4 and share/lua/5.4: it passes the relative path of
# the tree's layout (the rockspec).
set(GPURUN_MODULE_TO_LUA_LIBRARY "" CACHE STRING
  "The Lua library's folder relative to the installed gpurun.so's (empty: from the install folders)")
if(GPURUN_MODULE_TO_LUA_LIBRARY)
  set(module_to_lua "${GPURUN_MODULE_TO_LUA_LIBRARY}")
endif()

target_compile_definitions(gpurun_bindings PRIVATE
  GPURUN_SOURCE_LUA_DIR="${CMAKE_SOURCE_DIR}/lua"
  GPURUN_BUILD_DIR="${CMAKE_BINARY_DIR}"
  GPURUN_EXECUTABLE_TO_LUA_LIBRARY="${executable_to_lua}"
  GPURUN_MODULE_TO_LUA_LIBRARY="${module_to_lua}")
