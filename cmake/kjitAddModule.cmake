# kjit_add_module and kjit_install_module: kernels built ahead of time, at the
# consumer's build, by `python -m kjit build` (kjit.build: the checked stubs, the
# manifest, no RUNPATH into this machine's tvm-ffi). docs/cpp.md documents both.
set_property(GLOBAL PROPERTY KJIT_PACKAGE_DIR "${_kjit_prefix}")

# kjit_add_module(<name> SOURCES <file>... [FUNCTIONS <fn>[=<signature>]...] [JAX]
#                 [INCLUDE_DIRECTORIES <dir>...] [COMPILE_OPTIONS <flag>...]
#                 [CUDA_ARCH <archs>] [ISA <level>] [DEPENDS <file>...] [OUTPUT_DIRECTORY <dir>])
# Adds the target <name>, built with `all`, that writes <OUTPUT_DIRECTORY>/<name>.so
# (default: the current binary folder); its path is the target's KJIT_MODULE_FILE
# property. FUNCTIONS as `kjit build -f`: names (specs inferred from the C++) or
# name=signature; none reads `// @kjit` annotations. DEPENDS lists the headers the
# sources include, so editing them rebuilds the module. ISA (baseline, x86-64-v3,
# x86-64-v4, native) is the instruction set, any x86-64 by default.
function(kjit_add_module name)
  set(keywords JAX OUTPUT_DIRECTORY CUDA_ARCH ISA SOURCES FUNCTIONS INCLUDE_DIRECTORIES COMPILE_OPTIONS DEPENDS)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "JAX" "OUTPUT_DIRECTORY;CUDA_ARCH;ISA"
                        "SOURCES;FUNCTIONS;INCLUDE_DIRECTORIES;COMPILE_OPTIONS;DEPENDS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kjit_add_module(${name}): unknown arguments '${ARG_UNPARSED_ARGUMENTS}'; it takes SOURCES, "
                        "FUNCTIONS, JAX, INCLUDE_DIRECTORIES, COMPILE_OPTIONS, CUDA_ARCH, ISA, DEPENDS, OUTPUT_DIRECTORY")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "kjit_add_module(${name}): no SOURCES; name the module's C++ (and .cu) files")
  endif()
  if(TARGET "${name}")
    message(FATAL_ERROR "kjit_add_module(${name}): a target named '${name}' exists already")
  endif()
  set(sources)
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${path}")
      message(FATAL_ERROR "kjit_add_module(${name}): no source file '${path}'")
    endif()
    list(APPEND sources "${path}")
  endforeach()
  set(folder "${CMAKE_CURRENT_BINARY_DIR}")
  if(ARG_OUTPUT_DIRECTORY)
    get_filename_component(folder "${ARG_OUTPUT_DIRECTORY}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  set(output "${folder}/${name}.so")

  set(args --name "${name}" -o "${output}")
  # FUNCTIONS reach `kjit build` in a file, a JSON list (--functions-file), byte for
  # byte: read from this call's own arguments (ARGV<i>; ARG_FUNCTIONS is a CMake
  # list, cut at the ';' of a constraint) and passed through no command line, shell
  # or make (quotes, '#', '$', newlines). The module depends on the file.
  set(json "")
  set(in_functions FALSE)
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 1 ${last})
    set(arg "${ARGV${i}}")
    if(arg IN_LIST keywords)
      string(COMPARE EQUAL "${arg}" FUNCTIONS in_functions)
    elseif(in_functions)
      string(REPLACE "\\" "\\\\" arg "${arg}")
      string(REPLACE "\"" "\\\"" arg "${arg}")
      if(NOT json STREQUAL "")
        string(APPEND json ",\n ")
      endif()
      string(APPEND json "\"${arg}\"")
    endif()
  endforeach()
  set(functions_file)
  if(NOT json STREQUAL "")
    set(functions_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_functions.json")
    _kjit_write_if_changed("${functions_file}" "[${json}]\n")
    list(APPEND args --functions-file "${functions_file}")
  endif()
  if(ARG_JAX)
    list(APPEND args --jax)
  endif()
  foreach(dir IN LISTS ARG_INCLUDE_DIRECTORIES)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND args "--include-directory=${dir}")
  endforeach()
  foreach(flag IN LISTS ARG_COMPILE_OPTIONS)
    list(APPEND args "--cflag=${flag}")
  endforeach()
  if(ARG_CUDA_ARCH)
    list(APPEND args "--cuda-arch=${ARG_CUDA_ARCH}")
  endif()
  if(ARG_ISA)
    list(APPEND args "--isa=${ARG_ISA}")
  endif()
  # The project's C++ compiler, and a cache inside the build tree (`make clean`
  # with the build folder; the user's ~/.cache/kjit is not touched).
  set(env "KJIT_CACHE_DIR=${CMAKE_BINARY_DIR}/kjit_cache")
  if(CMAKE_CXX_COMPILER)
    list(APPEND env "CXX=${CMAKE_CXX_COMPILER}")
  endif()
  _kjit_python(python)
  file(MAKE_DIRECTORY "${folder}")
  add_custom_command(OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -E env ${env} "${python}" -m kjit build ${args} ${sources}
    DEPENDS ${sources} ${ARG_DEPENDS} ${functions_file}
    COMMENT "kjit: building module ${name}"
    VERBATIM)
  add_custom_target("${name}" ALL DEPENDS "${output}")
  set_target_properties("${name}" PROPERTIES KJIT_MODULE_FILE "${output}")
endfunction()

# Writes <text> to <file> when the file holds anything else (an unchanged file keeps
# its time, so what depends on it is not rebuilt).
function(_kjit_write_if_changed file text)
  set(old "")
  if(EXISTS "${file}")
    file(READ "${file}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${file}" "${text}")
  endif()
endfunction()

# kjit_install_module(<name> DESTINATION <dir> [COMPONENT <component>]): installs
# the library of kjit_add_module(<name>) (into a wheel: DESTINATION is the package).
function(kjit_install_module name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "DESTINATION;COMPONENT" "")
  if(NOT TARGET "${name}")
    message(FATAL_ERROR "kjit_install_module(${name}): no target '${name}'; call kjit_add_module(${name} ...) first")
  endif()
  get_target_property(output "${name}" KJIT_MODULE_FILE)
  if(NOT output)
    message(FATAL_ERROR "kjit_install_module(${name}): '${name}' was not made by kjit_add_module")
  endif()
  if(NOT ARG_DESTINATION)
    message(FATAL_ERROR "kjit_install_module(${name}): no DESTINATION")
  endif()
  set(component)
  if(ARG_COMPONENT)
    set(component COMPONENT "${ARG_COMPONENT}")
  endif()
  install(PROGRAMS "${output}" DESTINATION "${ARG_DESTINATION}" ${component})
endfunction()

# The Python that runs `kjit build`: KJIT_PYTHON_EXECUTABLE, else the one tvm-ffi's
# config used (Python_EXECUTABLE); it must import this very kjit package.
function(_kjit_python out)
  get_property(checked GLOBAL PROPERTY KJIT_PYTHON_CHECKED)
  if(checked)
    set(${out} "${checked}" PARENT_SCOPE)
    return()
  endif()
  get_property(package GLOBAL PROPERTY KJIT_PACKAGE_DIR)
  if(KJIT_PYTHON_EXECUTABLE)
    set(python "${KJIT_PYTHON_EXECUTABLE}")
  elseif(Python_EXECUTABLE)
    set(python "${Python_EXECUTABLE}")
  elseif(Python3_EXECUTABLE)
    set(python "${Python3_EXECUTABLE}")
  else()
    find_program(python NAMES python3 python)
  endif()
  execute_process(
    COMMAND "${python}" -c "import os, kjit; print(os.path.realpath(os.path.dirname(kjit.__file__)))"
    OUTPUT_VARIABLE found ERROR_VARIABLE error RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(expected "${package}" REALPATH)
  if(NOT rc EQUAL 0 OR NOT found STREQUAL expected)
    string(STRIP "${error}" error)
    string(REGEX REPLACE ".*\n" "" error "${error}")
    if(NOT rc EQUAL 0 AND error)
      set(found "fails: ${error}")
    elseif(NOT rc EQUAL 0)
      set(found "fails (exit status ${rc})")
    elseif(NOT found)
      set(found "prints no folder")
    else()
      set(found "imports kjit from ${found}")
    endif()
    message(FATAL_ERROR "kjit_add_module runs `python -m kjit build` with ${python}, whose `import kjit` ${found}, "
                        "not this package (${expected}); set -DKJIT_PYTHON_EXECUTABLE=<the Python kjit is installed in>")
  endif()
  set_property(GLOBAL PROPERTY KJIT_PYTHON_CHECKED "${python}")
  set(${out} "${python}" PARENT_SCOPE)
endfunction()
