// The call model for every tvm-ffi caller (Python front ends, C++):
//   kjit.call_model(name, signature) -> kjit.CallModel
//   kjit.call_infer(model, args) -> [[shape, dtype, device], ...], one per returned tensor
//   kjit.raise_pending() raises the error a C ABI call left on this thread
// `args` are the caller's arguments in parameter order (bound, defaults filled):
// tensors, None, scalars, or for a tensor only its metadata as [Shape, dtype,
// Device] (a fake tensor, an abstract value). Failed checks raise kjit's messages.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/device.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include "call/call_model_object.h"
#include "ffi/boundary.h"
#include "kjit/errors.h"

namespace kjit {

tvm::ffi::ObjectRef make_call_model_object(const FunctionSpec& spec) {
  return tvm::ffi::ObjectRef(tvm::ffi::make_object<CallModelObj>(std::make_shared<const CallModel>(spec)));
}

namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::ObjectRef;
using tvm::ffi::Shape;
using tvm::ffi::String;

const CallModel& model_of(const ObjectRef& ref) {
  const auto* obj = ref.as<CallModelObj>();
  if (obj == nullptr) throw TypeError("kjit.call_infer: the first argument must be a kjit.CallModel");
  return *obj->model;
}

/// A tensor's metadata [Shape, dtype, Device] as a DLTensor without data.
void metadata_tensor(const Array<Any>& meta, size_t i, DLTensor* t) {
  if (meta.size() != 3) {
    throw TypeError("kjit.call_infer: argument " + std::to_string(i) +
                    ": tensor metadata is [shape, dtype, device], got " + std::to_string(meta.size()) + " items");
  }
  Shape shape = meta[0].cast<Shape>();
  t->data = nullptr;
  t->device = meta[2].cast<DLDevice>();
  t->ndim = static_cast<int32_t>(shape.size());
  t->dtype = meta[1].cast<DLDataType>();
  t->shape = const_cast<int64_t*>(shape.data());
  t->strides = nullptr;
  t->byte_offset = 0;
}

Array<Any> call_infer(const ObjectRef& model_ref, const Array<Any>& args) {
  return at_ffi_boundary([&] {
    const CallModel& model = model_of(model_ref);
    const size_t n = model.callers().size();
    if (args.size() != n) {
      throw TypeError("kjit.call_infer: " + model.spec().name + " takes " + std::to_string(n) + " arguments, got " +
                      std::to_string(args.size()));
    }
    std::vector<Array<Any>> metas(n);  // keeps the shapes the DLTensors point into
    std::vector<DLTensor> tensors(n);
    std::vector<TVMFFIAny> packed(n);
    for (size_t i = 0; i < n; ++i) {
      const Any& a = args[static_cast<int64_t>(i)];
      if (model.callers()[i].tensor && a.type_index() == tvm::ffi::TypeIndex::kTVMFFIArray) {
        metas[i] = a.cast<Array<Any>>();
        metadata_tensor(metas[i], i, &tensors[i]);
        packed[i].type_index = kTVMFFIDLTensorPtr;
        packed[i].v_ptr = &tensors[i];
      } else {
        packed[i] = *tvm::ffi::detail::AnyUnsafe::TVMFFIAnyPtrFromAny(a);
      }
    }
    std::vector<OutputMeta> outputs(model.returned().size());
    raise_if_failed(model.infer(packed.data(), /*data_checked=*/false, outputs.data()));
    Array<Any> out;
    for (const OutputMeta& o : outputs) {
      Array<Any> entry;
      entry.push_back(Shape(std::vector<int64_t>(o.shape.begin(), o.shape.end())));
      entry.push_back(o.dtype);
      entry.push_back(o.device);
      out.push_back(entry);
    }
    return out;
  });
}

/// kjit.raise_pending(): raises the error left on this thread by a function kjit._call
/// called through the C ABI (an elementwise call function) or by the call model, so
/// that tvm-ffi's Python call converts it as any call's (the kind's exception type, a
/// CompileError's command and log) and no second conversion exists.
void raise_pending(tvm::ffi::PackedArgs, Any*) {
  TVMFFIObjectHandle error = nullptr;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == nullptr) at_ffi_boundary([] { internal_check(false, "kjit.raise_pending without a pending error"); });
  using tvm::ffi::detail::ObjectUnsafe;
  throw ObjectUnsafe::ObjectRefFromObjectPtr<tvm::ffi::Error>(
      ObjectUnsafe::ObjectPtrFromOwned<tvm::ffi::Object>(static_cast<TVMFFIObject*>(error)));
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::ObjectDef<CallModelObj>();  // NOLINT(bugprone-unused-raii): registers the type as it is made
  refl::GlobalDef()
      .def("kjit.call_model",
           [](const String& name, const String& signature) {
             return at_ffi_boundary(
                 [&] { return make_call_model_object(parse_signature(std::string(name), std::string(signature))); });
           })
      .def("kjit.call_infer", call_infer)
      .def_packed("kjit.raise_pending", raise_pending);
}

}  // namespace kjit
