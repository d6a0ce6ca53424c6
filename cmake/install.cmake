# cmake --install: the executable, its man page, gpurun.so in Lua 5.4's C
# module folder and the Lua library in Lua 5.4's module folder, where any
# Lua 5.4 on the system finds them. cpack -G DEB packs the same files.

if(GPURUN_EXECUTABLE)
  install(TARGETS gpurun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # Debian installs man pages compressed.
  set(man_page ${CMAKE_BINARY_DIR}/gpurun.1.gz)
  add_custom_command(OUTPUT ${man_page}
    COMMAND gzip -9 -n -c ${CMAKE_SOURCE_DIR}/docs/gpurun.1 > ${man_page}
    DEPENDS ${CMAKE_SOURCE_DIR}/docs/gpurun.1 VERBATIM)
  add_custom_target(man_page ALL DEPENDS ${man_page})
  install(FILES ${man_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
if(TARGET gpurun_module)
  install(TARGETS gpurun_module LIBRARY DESTINATION ${GPURUN_LUA_MODULE_DIR})
endif()
install(DIRECTORY lua/gpurun DESTINATION ${GPURUN_LUA_LIBRARY_DIR})

# ---- the Debian package -----------------------------------------------------

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpurun)
set(CPACK_PACKAGE_VENDOR gpurun)
set(CPACK_PACKAGE_CONTACT "gpurun <dev@gpurun.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Lua 5.4 interpreter and module that drive NVIDIA GPUs (CUDA driver API, NVRTC)")
# The long description; Debian's first line is the summary above.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"gpurun is a superset of the lua5.4 command line with a built-in module,
gpurun, that compiles CUDA C kernels with NVRTC, launches them, captures
them into CUDA graphs, replays and times them. The same module loads into
any Lua 5.4: lua5.4 -l gpurun.
.
The CUDA driver (libcuda.so.1) is opened at run time; libnvrtc comes from
the CUDA toolkit, found through the RUNPATH the binaries carry.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION interpreters)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Stated, not computed: where dpkg-dev is missing, CPack skips its
# dpkg-shlibdeps step with a warning, leaving a package that installs and
# cannot start.
# These are what dpkg-shlibdeps gives for gpurun and gpurun.so on Debian 12
# (libnvrtc belongs to no Debian package and is left to the RUNPATH);
# tools/package-check.sh holds the list to it. Then the Lua modules the
# library requires, by name.
set(GPURUN_DEBIAN_SHARED_LIBRARY_DEPENDS
  "libc6 (>= 2.34), liblua5.4-0 (>= 5.4.4), libreadline8 (>= 6.0)")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${GPURUN_DEBIAN_SHARED_LIBRARY_DEPENDS}, lua-argparse, lua-cjson")
# NVIDIA's package of the NVRTC this build links, where NVIDIA's apt
# repository is set up; a toolkit from the runfile serves as well.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
  "cuda-nvrtc-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "lua5.4")
include(CPack)
