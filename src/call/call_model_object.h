// The call model as a tvm-ffi object ("kjit.CallModel"): what kjit.load_inline
// returns for each function and kjit.call_infer takes. kjit._call reads the model
// behind the handle Python hands it (`__chandle__()`).
#ifndef KJIT_SRC_CALL_CALL_MODEL_OBJECT_H_
#define KJIT_SRC_CALL_CALL_MODEL_OBJECT_H_

#include <tvm/ffi/object.h>

#include <memory>
#include <utility>

#include "call/call_model.h"

namespace kjit {

class CallModelObj : public tvm::ffi::Object {
 public:
  explicit CallModelObj(std::shared_ptr<const CallModel> m) : model(std::move(m)) {}
  std::shared_ptr<const CallModel> model;
  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("kjit.CallModel", CallModelObj, tvm::ffi::Object);
};

/// A new kjit.CallModel object for `spec`.
tvm::ffi::ObjectRef make_call_model_object(const FunctionSpec& spec);

}  // namespace kjit

#endif  // KJIT_SRC_CALL_CALL_MODEL_OBJECT_H_
