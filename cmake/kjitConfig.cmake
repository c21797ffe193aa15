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
include(CMakeFindDependencyMacro)
if(NOT TARGET tvm_ffi::shared)
  find_dependency(tvm_ffi CONFIG HINTS "${_kjit_prefix}/../tvm_ffi/share/cmake/tvm_ffi")
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

if(NOT TARGET kjit::kjit)
  add_library(kjit::kjit SHARED IMPORTED)
  set_target_properties(kjit::kjit PROPERTIES
    IMPORTED_LOCATION "${kjit_LIBRARY}"
    IMPORTED_SONAME "libkjit.so"
    INTERFACE_INCLUDE_DIRECTORIES "${kjit_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "tvm_ffi::header;tvm_ffi::shared"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()

include("${CMAKE_CURRENT_LIST_DIR}/kjitAddModule.cmake")
