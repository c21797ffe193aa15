// The kjit.ew_* tvm-ffi global functions behind kjit.elementwise: packed calls, so
// tensors and scalars arrive as they were passed from Python.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <memory>
#include <mutex>
#include <vector>

#include "kjit/elementwise.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::PackedArgs;
using tvm::ffi::String;

std::mutex g_mu;
std::vector<std::unique_ptr<Elementwise>> g_kernels;  // id -> engine; lives for the process

Elementwise& kernel_of(int64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  internal_check(id >= 0 && static_cast<size_t>(id) < g_kernels.size(), "unknown elementwise id");
  return *g_kernels[id];
}

/// Same mapping as global_functions.cc: kjit's C++ errors become FFI error kinds.
template <typename F>
auto boundary(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const kjit::Error& e) {
    throw tvm::ffi::Error(e.kind(), e.what(), "");
  } catch (const SpecError& e) {
    throw tvm::ffi::Error("SpecError", e.what(), "");
  } catch (const CompileError& e) {
    throw tvm::ffi::Error("CompileError", e.what(), "");
  } catch (const ToolchainError& e) {
    throw tvm::ffi::Error("ToolchainError", e.what(), "");
  } catch (const CacheError& e) {
    throw tvm::ffi::Error("CacheError", e.what(), "");
  }
}

/// One argument: a tensor (Tensor object or DLTensor*), a bool/int/float, or a
/// complex scalar as a 2-element array [re, im].
EwOperand operand_of(const AnyView& v, size_t index) {
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
    case kTVMFFIArray: {
      Array<double> parts = v.cast<Array<double>>();
      if (parts.size() == 2) return EwOperand::of_complex(parts[0], parts[1]);
      break;
    }
    default:
      break;
  }
  throw TypeError("kjit.elementwise: argument #" + std::to_string(index) +
                  " must be a tensor or a bool, int, float or complex scalar (FFI type index " +
                  std::to_string(raw->type_index) + ")");
}

Promotion promotion_of(int64_t p) { return p == 1 ? Promotion::kTorch : Promotion::kNumPy; }

/// ew_outputs(id, promotion, inputs...) -> [[shape, dtype, order], ...]
void outputs_entry(PackedArgs args, Any* rv) {
  boundary([&] {
    Elementwise& ew = kernel_of(args[0].cast<int64_t>());
    std::vector<EwOperand> inputs;
    for (int i = 2; i < args.size(); ++i) inputs.push_back(operand_of(args[i], i - 2));
    Array<Any> out;
    for (const EwOutput& o : ew.outputs_for(inputs, promotion_of(args[1].cast<int64_t>()))) {
      Array<int64_t> shape(o.shape.begin(), o.shape.end());
      Array<int64_t> order;
      for (int d : o.order) order.push_back(d);
      out.push_back(Array<Any>{shape, String(ew_type_name(o.type)), order});
    }
    *rv = out;
    return 0;
  });
}

/// ew_run(id, promotion, n_inputs, n_outputs, inputs..., outputs..., extra...)
void run_entry(PackedArgs args, Any* rv) {
  boundary([&] {
    Elementwise& ew = kernel_of(args[0].cast<int64_t>());
    Promotion p = promotion_of(args[1].cast<int64_t>());
    int n_in = static_cast<int>(args[2].cast<int64_t>()), n_out = static_cast<int>(args[3].cast<int64_t>());
    std::vector<EwOperand> inputs, extra;
    std::vector<const DLTensor*> outputs;
    for (int i = 0; i < n_in; ++i) inputs.push_back(operand_of(args[4 + i], i));
    for (int k = 0; k < n_out; ++k) {
      EwOperand o = operand_of(args[4 + n_in + k], k);
      if (o.tensor == nullptr) throw TypeError(ew.name() + ": out[" + std::to_string(k) + "] must be a tensor");
      outputs.push_back(o.tensor);
    }
    for (int e = 4 + n_in + n_out; e < args.size(); ++e) extra.push_back(operand_of(args[e], e));
    ew.run(inputs, outputs, extra, p);
    *rv = nullptr;
    return 0;
  });
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("kjit.ew_create",
           [](const String& code, const String& name, int64_t num_outputs, const String& build_dir, bool verbose) {
             return boundary([&] {
               ElementwiseOptions opts;
               opts.build_directory = std::string(build_dir);
               opts.verbose = verbose;
               auto ew = std::make_unique<Elementwise>(std::string(code), std::string(name),
                                                       static_cast<int>(num_outputs), opts);
               std::lock_guard<std::mutex> lock(g_mu);
               g_kernels.push_back(std::move(ew));
               return Array<Any>{static_cast<int64_t>(g_kernels.size() - 1), String(g_kernels.back()->name())};
             });
           })
      .def_packed("kjit.ew_outputs", outputs_entry)
      .def_packed("kjit.ew_run", run_entry)
      .def("kjit.ew_num_threads", []() { return static_cast<int64_t>(ew_num_threads()); })
      .def("kjit.set_ew_num_threads", [](int64_t n) { set_ew_num_threads(static_cast<int>(n)); });
}

}  // namespace
}  // namespace kjit
