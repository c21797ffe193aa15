# find_package(kjit CONFIG REQUIRED): kjit::kjit (libkjit, its headers, tvm-ffi) and
# kjit_add_module (kjitAddModule.cmake). This file sits at <prefix>/lib/cmake/kjit,
# beside <prefix>/lib/libkjit.so and <prefix>/include/kjit: pip's site-packages/kjit,
# or a `cmake --install` prefix. `python -m kjit.config --cmakedir` prints this folder.
get_filename_component(_kjit_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(kjit_INCLUDE_DIR "${_kjit_prefix}/include")
set(kjit_LIBRARY "${_kjit_prefix}/lib/libkjit.so")

# tvm-ffi's own package config runs Python (tvm_ffi.config) to find its files. A pip
# install puts tvm_ffi beside kjit and a virtual environment's python three folders
# up; both are used when the caller named neither.
if(NOT Python_EXECUTABLE)
  get_filename_component(_kjit_env "${_kjit_prefix}/../../../.." ABSOLUTE)
  foreach(_kjit_candidate IN ITEMS "${_kjit_env}/bin/python3" "${_kjit_env}/bin/python")
    if(EXISTS "${_kjit_candidate}")
      set(Python_EXECUTABLE "${_kjit_candidate}" CACHE FILEPATH "The Python that kjit is installed in")
      break()
    endif()
  endforeach()
endif()
# tvm-ffi beside kjit first (pip's layout), else where that Python's tvm_ffi is.
include(CMakeFindDependencyMacro)
if(NOT TARGET tvm_ffi::shared)
  set(_kjit_tvm_ffi_hints "${_kjit_prefix}/../tvm_ffi/share/cmake/tvm_ffi")
  if(Python_EXECUTABLE AND NOT EXISTS "${_kjit_tvm_ffi_hints}/tvm_ffi-config.cmake")
    execute_process(COMMAND "${Python_EXECUTABLE}" -m tvm_ffi.config --cmakedir
                    OUTPUT_VARIABLE _kjit_tvm_ffi_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _kjit_rc ERROR_QUIET)
    if(_kjit_rc EQUAL 0)
      list(APPEND _kjit_tvm_ffi_hints "${_kjit_tvm_ffi_dir}")
    endif()
  endif()
  find_dependency(tvm_ffi CONFIG HINTS ${_kjit_tvm_ffi_hints})
endif()

foreach(_kjit_file IN ITEMS "${kjit_LIBRARY}" "${kjit_INCLUDE_DIR}/kjit/runtime.h")
  if(NOT EXISTS "${_kjit_file}")
    set(${CMAKE_FIND_PACKAGE_NAME}_FOUND FALSE)
    set(${CMAKE_FIND_PACKAGE_NAME}_NOT_FOUND_MESSAGE
        "kjit's package config at ${CMAKE_CURRENT_LIST_DIR} has no ${_kjit_file}: the installation is incomplete "
        "(reinstall kjit)")
    return()
  endif()
endforeach()

# A program linking kjit::kjit starts without LD_LIBRARY_PATH: libkjit's RUNPATH
# reaches the tvm-ffi of its environment (pip's site-packages/tvm_ffi/lib), and the
# program itself needs the libtvm_ffi.so found here (--no-as-needed: also when it
# calls no tvm-ffi function; one link option, which no link order can split), so its
# RUNPATH (CMake's in the build tree, INSTALL_RPATH_USE_LINK_PATH's installed) loads
# that one where libkjit's does not reach it: kjit and tvm-ffi in different
# environments (pip --user, a system site-packages).
if(NOT TARGET kjit::kjit)
  add_library(kjit::kjit SHARED IMPORTED)
  set_target_properties(kjit::kjit PROPERTIES
    IMPORTED_LOCATION "${kjit_LIBRARY}"
    IMPORTED_SONAME "libkjit.so"
    INTERFACE_INCLUDE_DIRECTORIES "${kjit_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "tvm_ffi::header;tvm_ffi::shared"
    INTERFACE_LINK_OPTIONS "LINKER:--push-state,--no-as-needed,$<TARGET_FILE:tvm_ffi::shared>,--pop-state"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()

include("${CMAKE_CURRENT_LIST_DIR}/kjitAddModule.cmake")
