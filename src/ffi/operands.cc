// Arguments of the kjit.ew_* and kjit.red_* global functions as the engines take
// them (operands.h).
#include "ffi/operands.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <string>

#include "kjit/errors.h"
#include "kjit/spec.h"
#include "support/compiler_hints.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::String;

const DLTensor* raw_tensor(const Array<Any>& desc, std::vector<std::unique_ptr<RawTensor>>* store, size_t index,
                           const char* api) {
  const DTypeInfo* dtype = find_dtype(std::string(desc[3].cast<String>()));
  if (dtype == nullptr) {
    throw TypeError(std::string(api) + ": argument #" + std::to_string(index) + " has dtype " +
                    std::string(desc[3].cast<String>()) + ", which " + std::string(api) + " does not support");
  }
  store->push_back(std::make_unique<RawTensor>());  // stable address: the DLTensor is referenced
  RawTensor& r = *store->back();
  int64_t item = (dtype->dl.bits * dtype->dl.lanes + 7) / 8;
  for (const Any& s : desc[1].cast<Array<Any>>()) r.shape.push_back(s.cast<int64_t>());
  for (const Any& s : desc[2].cast<Array<Any>>()) {
    int64_t bytes = s.cast<int64_t>();
    if (bytes % item != 0) {
      throw ValueError(std::string(api) + ": argument #" + std::to_string(index) + " has a byte stride " +
                       std::to_string(bytes) + " that is not a multiple of its element size " + std::to_string(item));
    }
    r.strides.push_back(bytes / item);
  }
  // The checked path describes a NumPy array by its address (elementwise.py, _described).
  r.t.data =
      reinterpret_cast<void*>(static_cast<uintptr_t>(desc[0].cast<int64_t>()));  // NOLINT(performance-no-int-to-ptr)
  r.t.device = DLDevice{kDLCPU, 0};
  r.t.ndim = static_cast<int32_t>(r.shape.size());
  r.t.dtype = dtype->dl;
  r.t.shape = r.shape.data();
  r.t.strides = r.strides.data();
  return &r.t;
}

/// The arguments operand_of does not decode inline: complex scalars, raw tensor
/// descriptions, and the rejections.
KJIT_COLD EwOperand unusual_operand(const AnyView& v, size_t index, std::vector<std::unique_ptr<RawTensor>>* store,
                                    const char* api) {
  const TVMFFIAny* raw = reinterpret_cast<const TVMFFIAny*>(&v);
  switch (raw->type_index) {
    case kTVMFFIArray: {
      Array<Any> parts = v.cast<Array<Any>>();
      if (parts.size() == 2) return EwOperand::of_complex(parts[0].cast<double>(), parts[1].cast<double>());
      if (parts.size() == 4) return EwOperand::of(raw_tensor(parts, store, index, api));
      break;
    }
    case kTVMFFIBigInt:
      throw ValueError(std::string(api) + ": argument #" + std::to_string(index) +
                       " is a Python integer outside the int64 range, which kjit cannot pass (it carries Python "
                       "ints as int64); pass a NumPy scalar or array of the type you mean");
    default:
      break;
  }
  throw TypeError(std::string(api) + ": argument #" + std::to_string(index) +
                  " must be a tensor or a bool, int, float or complex scalar (FFI type index " +
                  std::to_string(raw->type_index) + ")");
}

}  // namespace

/// One argument: a tensor (Tensor object or DLTensor*), a bool/int/float, a
/// complex scalar as [re, im], or a raw tensor description.
EwOperand operand_of(const tvm::ffi::AnyView& v, size_t index, std::vector<std::unique_ptr<RawTensor>>* store,
                     const char* api) {
  const TVMFFIAny* raw = reinterpret_cast<const TVMFFIAny*>(&v);
  switch (raw->type_index) {
    case kTVMFFITensor:
      return EwOperand::of(
          reinterpret_cast<const DLTensor*>(reinterpret_cast<const char*>(raw->v_obj) + sizeof(TVMFFIObject)));
    case kTVMFFIDLTensorPtr:
      return EwOperand::of(static_cast<const DLTensor*>(raw->v_ptr));
    case kTVMFFIBool:
      return EwOperand::of_bool(raw->v_int64 != 0);
    case kTVMFFIInt:
      return EwOperand::of_int(raw->v_int64);
    case kTVMFFIFloat:
      return EwOperand::of_float(raw->v_float64);
    default:
      return unusual_operand(v, index, store, api);
  }
}

/// Decodes args[begin, end) into `out` (cleared first); messages number them from
/// `label_base`.
void decode_operands(tvm::ffi::PackedArgs args, int begin, int end, int label_base, std::vector<EwOperand>* out,
                     std::vector<std::unique_ptr<RawTensor>>* store, const char* api) {
  out->clear();
  for (int i = begin; i < end; ++i) out->push_back(operand_of(args[i], i - label_base, store, api));
}

}  // namespace kjit
