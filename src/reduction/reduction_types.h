// What one reduction kernel is made for, on either backend: the types it is
// instantiated for and the entry functions of its code.
#ifndef KJIT_SRC_REDUCTION_REDUCTION_TYPES_H_
#define KJIT_SRC_REDUCTION_REDUCTION_TYPES_H_

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

}  // namespace kjit

#endif  // KJIT_SRC_REDUCTION_REDUCTION_TYPES_H_
