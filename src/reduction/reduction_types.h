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
  /// The accumulator is the code's type `kUserAccumulator<T>` (ReductionCode::accumulator),
  /// with identity `kUserIdentity<T>()` when `user_identity`.
  bool user_accumulator = false, user_identity = false;
};

/// What kjit adds to the code of a reduction with a user accumulator: an alias of
/// it and its identity, as templates of the compute type.
inline constexpr char kUserAccumulator[] = "__kjit_accumulator";
inline constexpr char kUserIdentity[] = "__kjit_accumulator_identity";

/// The body of an arg reduction's `better(__a, __b)` on either backend, `callee`
/// the user's comparison: a NaN is better than any number and two NaNs are equal,
/// so the first NaN wins, as in NumPy's and torch's argmax and argmin. A comparison
/// alone ranks a NaN nowhere (false both ways), and the index found would depend
/// on the order the loops compare in. `x != x` holds only for NaN (float and
/// complex); for integer types the compiler drops it.
std::string arg_better_expr(const std::string& callee);

}  // namespace kjit

#endif  // KJIT_SRC_REDUCTION_REDUCTION_TYPES_H_
