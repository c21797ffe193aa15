// The preludes of generated host code: the headers under include/kjit/detail, as
// embedded at build time.
#include <string>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "support/embedded_headers.h"

namespace kjit {

// The stub prelude uses the float16 conversions; both texts keep a module self-contained.
std::string emit_stub_prelude() {
  return std::string(detail::float16_conversions_text()) + detail::stub_prelude_text();
}

std::string emit_cuda_prelude() { return detail::cuda_host_prelude_text(); }

std::string emit_xla_prelude() { return detail::xla_prelude_text(); }

std::string emit_xla_helpers_source() {
  return kStubIncludesLine + emit_stub_prelude() + emit_xla_prelude() + detail::xla_helpers_text();
}

std::string emit_xla_elementwise_source() {
  return kStubIncludesLine + emit_stub_prelude() + emit_xla_prelude() + detail::xla_elementwise_text();
}

}  // namespace kjit
