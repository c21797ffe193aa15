# Writes OUTPUT, a C++ source defining `const char* kjit::detail::FUNCTION()` that
# returns the text of the header INPUT byte for byte, so generated code embeds
# exactly what the header says.
#   cmake -DINPUT=<header> -DOUTPUT=<source> -DFUNCTION=<name> -P embed_header.cmake
foreach(var INPUT OUTPUT FUNCTION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_header.cmake: ${var} is not set")
  endif()
endforeach()

file(READ "${INPUT}" text)
set(delimiter "KJIT_EMBED")
# The text must not end the raw string literal early.
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')${delimiter}\"', the delimiter of its embedding")
endif()

get_filename_component(header "${INPUT}" NAME)
file(WRITE "${OUTPUT}" "// Generated from include/kjit/detail/${header} by cmake/embed_header.cmake: edit the header.
#include \"support/embedded_headers.h\"

namespace kjit {
namespace detail {

const char* ${FUNCTION}() {
  return R\"${delimiter}(${text})${delimiter}\";
}

}  // namespace detail
}  // namespace kjit
")
