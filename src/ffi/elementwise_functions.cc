// The kjit.ew_* tvm-ffi global functions behind kjit.elementwise: engines by id,
// the call functions Python calls (made per call class by kjit.ew_function), and
// the checked path's ew_outputs and ew_run. Packed calls: tensors and scalars
// arrive as they were passed from Python.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/thread_pool.h"
#include "ffi/boundary.h"
#include "ffi/id_table.h"
#include "ffi/new_outputs.h"
#include "ffi/operands.h"
#include "kjit/elementwise.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"
#include "kjit/runtime.h"
#include "kjit/spec.h"
#include "support/compiler_hints.h"
#include "support/thread_scratch.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::PackedArgs;
using tvm::ffi::String;

IdTable<Elementwise> g_engines;  // id -> engine, until kjit.ew_free

/// Shared: a call or a call function keeps the engine alive through ew_free.
std::shared_ptr<Elementwise> engine_of(int64_t id) { return g_engines.get(id); }

/// ew_outputs(id, promotion, inputs...) -> [[shape, dtype, order], ...]: the
/// output layouts, for the checked path to allocate.
void ew_outputs(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    Elementwise& ew = *engine_of(args[0].cast<int64_t>());
    std::vector<EwOperand> inputs;
    std::vector<std::unique_ptr<RawTensor>> store;
    decode_operands(args, 2, args.size(), 2, &inputs, &store);
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

/// ew_run(id, promotion, n_inputs, n_outputs, inputs..., outputs..., extra...):
/// the checked path's run into outputs it allocated or the caller's out=.
void ew_run(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    Elementwise& ew = *engine_of(args[0].cast<int64_t>());
    const int n_in = static_cast<int>(args[2].cast<int64_t>()), n_out = static_cast<int>(args[3].cast<int64_t>());
    std::vector<EwOperand> inputs, extra;
    std::vector<const DLTensor*> outputs;
    std::vector<std::unique_ptr<RawTensor>> store;
    decode_operands(args, 4, 4 + n_in, 4, &inputs, &store);
    for (int k = 0; k < n_out; ++k) {
      EwOperand o = operand_of(args[4 + n_in + k], k, &store);
      if (o.tensor == nullptr) throw TypeError(ew.name() + ": out[" + std::to_string(k) + "] must be a tensor");
      outputs.push_back(o.tensor);
    }
    decode_operands(args, 4 + n_in + n_out, args.size(), 0, &extra, &store);
    ew.run(inputs, outputs, extra, promotion_of(args[1].cast<int64_t>()));
    *rv = nullptr;
    return 0;
  });
}

/// Runs `ew` on `inputs` and `extra` into new outputs: *rv is the output, or an
/// Array of them.
void run_into_new_outputs(Elementwise& ew, Promotion p, const std::vector<EwOperand>& inputs,
                          const std::vector<EwOperand>& extra, Any* rv) {
  struct Made {
    const std::string* fn;
    tvm::ffi::Tensor single;             // the usual single output, without a heap vector
    std::vector<tvm::ffi::Tensor> more;  // each Tensor keeps its DLTensor where the engine saw it
  } made{&ew.name(), {}, {}};
  // One captured pointer: fits std::function's inline buffer, so no allocation.
  auto allocate = [m = &made](size_t k, const EwOutput& layout, DLDevice device) -> const DLTensor* {
    tvm::ffi::Tensor t = allocate_output(layout, device, *m->fn, "kjit.elementwise");
    if (k == 0) {
      m->single = std::move(t);
      return m->single.GetDLTensorPtr();
    }
    m->more.push_back(std::move(t));
    return m->more.back().GetDLTensorPtr();
  };
  ew.run_allocating(inputs, allocate, extra, p, EwAllocation::kFreshContiguous);
  if (made.more.empty()) {
    *rv = std::move(made.single);
  } else {
    made.more.insert(made.more.begin(), made.single);
    *rv = Array<tvm::ffi::Tensor>(made.more.begin(), made.more.end());
  }
}

[[noreturn]] KJIT_COLD void throw_too_few_arguments(const std::string& fn, int n_out, int n_extra, int got) {
  throw TypeError(fn + ": expected at least one input before " + std::to_string(n_out) + " output tensor(s) and " +
                  std::to_string(n_extra) + " extra scalar(s), got " + std::to_string(got) + " argument(s) in all");
}

/// The scalar a call function takes (a bool, int or float) into *out; false for
/// anything else.
KJIT_INLINE bool scalar_arg(const TVMFFIAny* raw, EwOperand* out) {
  switch (raw->type_index) {
    case kTVMFFIBool:
      *out = EwOperand::of_bool(raw->v_int64 != 0);
      return true;
    case kTVMFFIInt:
      *out = EwOperand::of_int(raw->v_int64);
      return true;
    case kTVMFFIFloat:
      *out = EwOperand::of_float(raw->v_float64);
      return true;
    default:
      return false;
  }
}

/// Per-thread operand buffers of the call functions: they keep their capacity, so
/// a small call allocates nothing here.
struct CallScratch {
  std::vector<EwOperand> inputs, extra;
  std::vector<const DLTensor*> outputs;
};

/// A call function's arguments decoded into `s`: inputs (tensors, and with
/// `scalar_inputs` bools, ints and floats), n_out output tensors, then extra
/// scalars. False, with nothing to run, when one is not of its kind.
bool decode_call(PackedArgs args, int n_in, int n_out, bool scalar_inputs, CallScratch* s) {
  const TVMFFIAny* raw = reinterpret_cast<const TVMFFIAny*>(args.data());
  s->inputs.resize(n_in);
  s->outputs.resize(n_out);
  s->extra.resize(args.size() - n_in - n_out);
  for (int i = 0; i < n_in; ++i) {
    if (const DLTensor* t = tensor_arg(&raw[i])) {
      s->inputs[i] = EwOperand::of(t);
    } else if (!scalar_inputs || !scalar_arg(&raw[i], &s->inputs[i])) {
      return false;
    }
  }
  for (int k = 0; k < n_out; ++k) {
    s->outputs[k] = tensor_arg(&raw[n_in + k]);
    if (s->outputs[k] == nullptr) return false;
  }
  for (size_t e = 0; e < s->extra.size(); ++e) {
    if (!scalar_arg(&raw[n_in + n_out + e], &s->extra[e])) return false;
  }
  return true;
}

/// Whether a call of these inputs makes a 0-d result: every input is a scalar or a
/// 0-d tensor (broadcasting keeps any other rank).
KJIT_INLINE bool zero_dim_result(const std::vector<EwOperand>& inputs) {
  for (const EwOperand& x : inputs) {
    if (x.tensor != nullptr && x.tensor->ndim != 0) return false;
  }
  return true;
}

/// ew_function(id, promotion, scalar_inputs, into, n_extra) -> the call function
/// of one call class: f(*inputs, *extra) returns the new output (or an Array of
/// them), and with `into` f(*inputs, *outs, *extra) computes into the num_outputs
/// arguments before the n_extra extra scalars and returns True. It runs only when
/// every input is a tensor (or, with `scalar_inputs`, a bool, int or float), every
/// output a tensor and every extra a bool, int or float; otherwise it returns None
/// and runs nothing, so Python need not check those types and sends what a call
/// function declines down the checked path (ew_outputs and ew_run). tvm-ffi turns
/// NumPy scalars into plain floats and ints: weak, which is what PyTorch makes of
/// them, so torch calls pass `scalar_inputs`; under NumPy's rules they are strong,
/// and only Python can tell them from its own scalars, so NumPy calls pass
/// `scalar_inputs` only after checking. Extras travel as bool, int64 or double
/// either way (iterator::extra_travel_type). A NumPy call with new outputs also declines
/// a 0-d result, which NumPy returns as a NumPy scalar: the checked path makes it,
/// so the hot path need not look at every result's rank.
tvm::ffi::Function ew_function(int64_t id, int64_t promotion, bool scalar_inputs, bool into, int64_t n_extra) {
  return at_ffi_boundary([&] {
    std::shared_ptr<Elementwise> ew = engine_of(id);
    Promotion p = promotion_of(promotion);
    const int n_out = into ? ew->num_outputs() : 0, n_ex = static_cast<int>(n_extra);
    internal_check(n_extra >= 0, "ew_function with a negative count of extra scalars");
    const bool decline_zero_dim = p == Promotion::kNumPy && n_out == 0;
    return tvm::ffi::Function::FromPacked(
        [ew, p, scalar_inputs, n_out, n_ex, decline_zero_dim](PackedArgs args, Any* rv) {
          const int n_in = args.size() - n_out - n_ex;
          CallScratch& s = thread_scratch<CallScratch>();
          if (n_in >= 1 &&
              (!decode_call(args, n_in, n_out, scalar_inputs, &s) || (decline_zero_dim && zero_dim_result(s.inputs)))) {
            *rv = nullptr;
            return;
          }
          at_ffi_boundary([&] {
            if (n_in < 1) throw_too_few_arguments(ew->name(), n_out, n_ex, args.size());
            if (n_out > 0) {
              ew->run(s.inputs, s.outputs, s.extra, p);
              *rv = true;
            } else {
              run_into_new_outputs(*ew, p, s.inputs, s.extra, rv);
            }
            return 0;
          });
        });
  });
}

/// A C-contiguous CPU tensor of a dtype kjit knows by name (for results whose
/// framework cannot allocate it, e.g. bfloat16 for DLPack inputs).
tvm::ffi::Tensor ew_empty(const Array<int64_t>& shape, const String& dtype_name) {
  return at_ffi_boundary([&] {
    const DTypeInfo* d = find_dtype(std::string(dtype_name));
    if (d == nullptr) {
      throw TypeError("kjit: cannot allocate a tensor of dtype '" + std::string(dtype_name) +
                      "', which kjit does not know (its dtypes: " + known_dtype_names() + ")");
    }
    std::vector<int64_t> dims(shape.begin(), shape.end());
    // Its own size check: the planner's does not guard this function.
    int64_t bytes = (static_cast<int64_t>(d->dl.bits) * d->dl.lanes + 7) / 8;
    std::string text;
    for (int64_t n : dims) text += (text.empty() ? "" : ", ") + std::to_string(n);
    for (int64_t n : dims) {
      if (n < 0) throw ValueError("kjit: cannot allocate a tensor of shape (" + text + "): an extent is negative");
    }
    for (int64_t n : dims) {
      if (n != 0 && __builtin_mul_overflow(bytes, n, &bytes)) {
        throw ValueError("kjit: cannot allocate a tensor of shape (" + text + ") and dtype " + d->name +
                         ": its size in bytes overflows int64");
      }
    }
    return empty_host_tensor(tvm::ffi::ShapeView(dims.data(), dims.size()), d->dl, "kjit.elementwise");
  });
}

/// compute= as the C++ option: "" (the promoted type), "float", or a dtype name.
EwCompute compute_of(const std::string& text) {
  EwCompute c;
  if (text.empty()) return c;
  if (text == "float") {
    c.rule = EwCompute::Rule::kFloat;
    return c;
  }
  std::optional<ScalarType> t = find_scalar_type(text);
  if (!t) {
    throw SpecError("kjit.elementwise: compute='" + text +
                    "' is neither 'float' nor a dtype kjit.elementwise supports (bool, int8..int64, uint8..uint64, "
                    "float16, bfloat16, float32, float64, complex64, complex128)");
  }
  c.rule = EwCompute::Rule::kType;
  c.type = *t;
  return c;
}

/// The most outputs an elementwise function may have (its entry writes them through
/// trailing T& parameters; a count past this is a mistake, not a kernel).
constexpr int64_t kMaxOutputs = 64;

/// ew_create(code, name, num_outputs, build_dir, verbose[, compute]) -> [id, entry
/// name]: a new engine; compute as compute_of takes it (absent: "").
void ew_create(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    if (args.size() != 5 && args.size() != 6) {
      throw TypeError("kjit.ew_create: expected 5 or 6 arguments, got " + std::to_string(args.size()));
    }
    ElementwiseOptions opts;
    opts.build_directory = std::string(args[3].cast<String>());
    opts.verbose = args[4].cast<bool>();
    if (args.size() == 6) opts.compute = compute_of(std::string(args[5].cast<String>()));
    const int64_t num_outputs = args[2].cast<int64_t>();
    if (num_outputs < 1 || num_outputs > kMaxOutputs) {
      throw SpecError("kjit.elementwise: num_outputs must be between 1 and " + std::to_string(kMaxOutputs) + ", got " +
                      std::to_string(num_outputs));
    }
    auto ew = std::make_shared<Elementwise>(std::string(args[0].cast<String>()), std::string(args[1].cast<String>()),
                                            static_cast<int>(num_outputs), opts);
    const String entry(ew->name());
    *rv = Array<Any>{g_engines.add(std::move(ew)), entry};
    return 0;
  });
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def_packed("kjit.ew_create", ew_create)
      .def_packed("kjit.ew_outputs", ew_outputs)
      .def_packed("kjit.ew_run", ew_run)
      .def("kjit.ew_function", ew_function)
      .def("kjit.ew_empty", ew_empty)
      .def("kjit.ew_xla_library",
           [](const String& xla_include_dir, const String& cache_dir, bool verbose) {
             return at_ffi_boundary([&] {
               return String(elementwise_xla_library(std::string(xla_include_dir), std::string(cache_dir), verbose));
             });
           })
      .def("kjit.ew_free",
           [](int64_t id) {
             // The engine's plans and kernel handles go; the compiled libraries stay
             // loaded (another engine may use the same one) and cached on disk.
             g_engines.free(id);
           })
      .def("kjit.get_num_threads", []() { return static_cast<int64_t>(get_num_threads()); })
      .def("kjit.set_num_threads", [](int64_t n) { at_ffi_boundary([&] { set_num_threads(n); }); })
      .def("kjit.set_adaptive_threads", [](bool on) { cpu::set_adaptive_threads(on); });
}

}  // namespace
}  // namespace kjit
