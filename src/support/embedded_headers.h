// The text of the headers under include/kjit/detail, built into the library
// (cmake/embed_header.cmake) so the code generators emit them verbatim.
#ifndef KJIT_SRC_SUPPORT_EMBEDDED_HEADERS_H_
#define KJIT_SRC_SUPPORT_EMBEDDED_HEADERS_H_

namespace kjit {
namespace detail {

const char* float16_conversions_text();       ///< kjit/detail/float16_conversions.h
const char* stream_stores_text();             ///< kjit/detail/stream_stores.h
const char* half_blocks_text();               ///< kjit/detail/half_blocks.h
const char* stub_prelude_text();              ///< kjit/detail/stub_prelude.h
const char* xla_prelude_text();               ///< kjit/detail/xla_prelude.h
const char* xla_helpers_text();               ///< kjit/detail/xla_helpers.h
const char* xla_elementwise_text();           ///< kjit/detail/xla_elementwise.h
const char* cuda_host_prelude_text();         ///< kjit/detail/cuda_host_prelude.h
const char* elementwise_cuda_prelude_text();  ///< kjit/detail/elementwise_cuda_prelude.h
const char* reduction_loop_text();            ///< kjit/detail/reduction_loop.h
const char* reduction_cuda_text();            ///< kjit/detail/reduction_cuda.h

}  // namespace detail
}  // namespace kjit

#endif  // KJIT_SRC_SUPPORT_EMBEDDED_HEADERS_H_
