// Element types of the elementwise engine: sizes, C++ spellings, promotion
// (NumPy 2 / PyTorch) and the safe-cast rule for outputs.
#ifndef KJIT_SRC_ELEMENTWISE_PROMOTION_H_
#define KJIT_SRC_ELEMENTWISE_PROMOTION_H_

#include <optional>
#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {
namespace ew {

enum class Kind { kBool, kUInt, kInt, kFloat, kComplex };

Kind kind_of(EwType t);
int size_of(EwType t);
/// The C++ type the kernel stores and loads ("uint16_t" for float16 bits).
const char* storage_type(EwType t);
/// The type the kernel computes in: float for float16/bfloat16, else the type.
EwType compute_type(EwType t);
const char* cpp_compute_type(EwType t);

/// The engine's type of a DLPack dtype; nullopt when unsupported.
std::optional<EwType> from_dl(DLDataType d);
std::string dl_name(DLDataType d);

/// Promotion of two strong types.
EwType promote(EwType a, EwType b, Promotion p);

/// One input as promotion sees it.
struct TypeInput {
  EwType type = EwType::kFloat32;
  enum class Weight { kStrong, kZeroDim, kWeak } weight = Weight::kStrong;
};

/// The common type of the inputs (TensorIterator's compute_types step).
EwType result_type(const std::vector<TypeInput>& inputs, Promotion p);

/// Whether a result of type `from` may be written into an output of type `to`
/// (NumPy's same_kind / PyTorch's canCast).
bool can_cast(EwType from, EwType to, Promotion p);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ELEMENTWISE_PROMOTION_H_
