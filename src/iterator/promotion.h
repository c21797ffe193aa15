// Element types of the elementwise engine: sizes, C++ spellings, promotion
// (NumPy 2 / PyTorch) and the safe-cast rule for outputs.
#ifndef KJIT_SRC_ITERATOR_PROMOTION_H_
#define KJIT_SRC_ITERATOR_PROMOTION_H_

#include <optional>
#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {
namespace iterator {

enum class Kind { kBool, kUInt, kInt, kFloat, kComplex };

Kind kind_of(EwType t);
int size_of(EwType t);
/// The C++ type the kernel stores and loads ("uint16_t" for float16 bits).
const char* storage_type(EwType t);
/// float16 or bfloat16: computed in float32, rounded to their own type.
inline bool is_half(EwType t) { return t == EwType::kFloat16 || t == EwType::kBFloat16; }
/// The type the kernel computes in: float for float16/bfloat16, else the type.
EwType compute_type(EwType t);
const char* cpp_compute_type(EwType t);

/// The engine's type of a DLPack dtype; nullopt when unsupported.
std::optional<EwType> from_dl(DLDataType d);
std::string dl_name(DLDataType d);

/// Promotion of two strong types; nullopt where the rules have none (NumPy with
/// ml_dtypes: bfloat16 with float16 or integers wider than 8 bits, which
/// result_type still resolves as ml_dtypes' ufuncs do; PyTorch: uint16..uint64
/// with other integers, bool or complex).
std::optional<EwType> promote(EwType a, EwType b, Promotion p);

/// One input as promotion sees it.
struct TypeInput {
  EwType type = EwType::kFloat32;
  enum class Weight { kStrong, kZeroDim, kWeak } weight = Weight::kStrong;
  size_t index = 0;  ///< the input's position, for messages
};

/// The common type of the inputs (TensorIterator's compute_types step): NumPy's
/// np.result_type of all of them (the least type each casts to safely, whatever
/// their order; for bfloat16, what ml_dtypes' ufunc loops compute in) or torch's
/// ResultTypeState. Throws TypeError naming the inputs when torch's rules have no
/// common type; `fn` names the entry function.
EwType result_type(const std::string& fn, const std::vector<TypeInput>& inputs, Promotion p);

/// The floating type a floating computation promotes the inputs' integer or bool
/// result `promoted` to: NumPy's (the least float every strong input casts to
/// safely: int8 -> float16, int16 -> float32, int32 -> float64) or PyTorch's
/// (float32). Float and complex results are returned as they are.
EwType float_result_type(const std::vector<TypeInput>& inputs, EwType promoted, Promotion p);

/// Whether a result of type `from` may be written into an output of type `to`
/// (NumPy's same_kind / PyTorch's canCast).
bool can_cast(EwType from, EwType to, Promotion p);

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_PROMOTION_H_
