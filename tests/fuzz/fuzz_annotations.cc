// Fuzzes `// @kjit` and `// @BE` annotations: read_annotations on arbitrary source
// text, then the module's whole front door (annotations resolved against the C++
// definitions in the same text).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "kjit/declare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  if (!kjit_fuzz::run_guarded("read_annotations", [&] { kjit::read_annotations(kjit::label_sources({source})); })) {
    return 0;
  }
  kjit_fuzz::run_guarded("resolve_module_functions", [&] { kjit::resolve_module_functions({source}, {}, {}); });
  kjit_fuzz::run_guarded("uses_brainevent_spelling",
                         [&] { kjit::uses_brainevent_spelling(kjit::label_sources({source})); });
  return 0;
}
