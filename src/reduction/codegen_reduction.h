// The C++ source of one reduction CPU kernel: the user's code, an Ops type that
// loads, maps, combines and stores in the kernel's types, and the loops of
// kjit/detail/reduction_loop.h.
#ifndef KJIT_SRC_REDUCTION_CODEGEN_REDUCTION_H_
#define KJIT_SRC_REDUCTION_CODEGEN_REDUCTION_H_

#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {

/// The types one reduction kernel is instantiated for.
struct RedKernelTypes {
  std::vector<EwType> inputs;  ///< as the kernel loads them
  EwType acc = EwType::kFloat64;
  EwType output = EwType::kFloat64;
  /// "(int8) -> int64, accumulating in int64"
  std::string text() const;
  /// Short and unique: the kernel map's key.
  std::string key() const;
};

/// The entry functions of a reduction's code (empty map/post: none).
struct RedEntries {
  std::string reduce, map, post;
  bool arg = false;  ///< reduce is `bool better(T a, T b)` of a value-and-index (arg) reduction
};

/// The exported `void kjit_red_kernel(char**, const int64_t* range, int64_t mode,
/// const void* problem)` (kjit/detail/reduction_loop.h says what each mode does)
/// and `int64_t kjit_red_acc_bytes()`, the size of its accumulator (partials' element).
/// `code` holds every part's definitions.
std::string emit_reduction_cpu(const std::string& code, const RedEntries& entries, const RedKernelTypes& types);

}  // namespace kjit

#endif  // KJIT_SRC_REDUCTION_CODEGEN_REDUCTION_H_
