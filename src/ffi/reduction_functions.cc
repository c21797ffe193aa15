// The kjit.red_* tvm-ffi global functions behind kjit.reduction: reductions by id,
// the call functions kjit._call.Computation calls (made per call class by
// kjit.red_function), and the checked path's red_output (the output a call makes,
// for Python to allocate in the inputs' framework) and red_run.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ffi/axis_list.h"
#include "ffi/boundary.h"
#include "ffi/id_table.h"
#include "ffi/new_outputs.h"
#include "ffi/operands.h"
#include "kjit/errors.h"
#include "kjit/reduction.h"
#include "kjit/spec.h"
#include "support/thread_scratch.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::PackedArgs;
using tvm::ffi::String;

constexpr const char* kApi = "kjit.reduction";

IdTable<Reduction> g_reductions;  // id -> reduction, until kjit.red_free

/// axis: None (every axis), an Array of ints, or (from the XLA handler, which
/// cannot build an Array) an int whose bit i names axis i.
ReduceAxes axes_of(const AnyView& v) {
  if (v == nullptr) return ReduceAxes::everything();
  if (std::optional<int64_t> mask = v.as<int64_t>()) {
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < 63; ++i) {
      if ((*mask >> i) & 1) axes.push_back(i);
    }
    return ReduceAxes::of(std::move(axes));
  }
  std::vector<int64_t> axes;
  for (const Any& a : v.cast<Array<Any>>()) axes.push_back(a.cast<int64_t>());
  return ReduceAxes::of(std::move(axes));
}

/// dtype: "" (none) or a dtype name.
std::optional<EwType> dtype_of(const std::string& name) {
  if (name.empty()) return std::nullopt;
  std::optional<ScalarType> t = find_scalar_type(name);
  if (!t || is_text(*t)) {
    throw TypeError(std::string(kApi) + ": dtype " + name +
                    " is not one kjit.reduction computes in (bool, int8..int64, uint8..uint64, float16, bfloat16, "
                    "float32, float64, complex64, complex128)");
  }
  return *t;
}

/// The call's common arguments: (id, promotion, axis, keepdims, dtype, ...).
struct CallArgs {
  std::shared_ptr<Reduction> reduction;
  Promotion promotion = Promotion::kNumPy;
  ReduceAxes axes;
  bool keepdims = false;
  std::optional<EwType> dtype;
};

CallArgs call_args(PackedArgs args, int least) {
  if (args.size() < least) {
    throw TypeError("kjit.red_*: expected at least " + std::to_string(least) + " arguments, got " +
                    std::to_string(args.size()));
  }
  CallArgs c;
  c.reduction = g_reductions.get(args[0].cast<int64_t>());
  c.promotion = promotion_of(args[1].cast<int64_t>());
  c.axes = axes_of(args[2]);
  c.keepdims = args[3].cast<bool>();
  c.dtype = dtype_of(std::string(args[4].cast<String>()));
  return c;
}

/// red_output(id, promotion, axis, keepdims, dtype, inputs...) -> [shape, dtype]
void red_output(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    const CallArgs c = call_args(args, 6);
    std::vector<EwOperand> inputs;
    std::vector<std::unique_ptr<RawTensor>> store;
    decode_operands(args, 5, args.size(), 5, &inputs, &store, kApi);
    const EwOutput o = c.reduction->output_for(inputs, c.axes, c.keepdims, c.dtype, c.promotion);
    *rv = Array<Any>{Array<int64_t>(o.shape.begin(), o.shape.end()), String(ew_type_name(o.type))};
    return 0;
  });
}

/// red_run(id, promotion, axis, keepdims, dtype, out, inputs...)
void red_run(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    const CallArgs c = call_args(args, 7);
    std::vector<EwOperand> inputs;
    std::vector<std::unique_ptr<RawTensor>> store;
    const EwOperand out = operand_of(args[5], 0, &store, kApi);
    if (out.tensor == nullptr) throw TypeError(std::string(kApi) + ": out must be a tensor");
    decode_operands(args, 6, args.size(), 6, &inputs, &store, kApi);
    c.reduction->run(inputs, c.axes, c.keepdims, c.dtype, out.tensor, c.promotion);
    *rv = nullptr;
    return 0;
  });
}

/// Per-thread buffers of the call functions: they keep their capacity, so a small
/// call allocates nothing here.
struct RedScratch {
  std::vector<EwOperand> inputs;
  ReduceAxes axes;
};

/// axis as a call function takes it: an int, or a tuple of ints (an AxisList from
/// kjit's call type, an Array from tvm-ffi's conversion); false for anything else
/// (a bool, None, a tuple holding another kind), which the checked path reads.
bool axis_arg(const TVMFFIAny* raw, ReduceAxes* axes) {
  axes->all = false;
  axes->axes.clear();
  if (raw->type_index == kTVMFFIInt) {
    axes->axes.push_back(raw->v_int64);
    return true;
  }
  if (raw->type_index == kTVMFFIOpaquePtr && raw->zero_padding == kAxisListTag) {
    const auto* list = static_cast<const AxisList*>(raw->v_ptr);
    axes->axes.assign(list->axes, list->axes + list->n);
    return true;
  }
  if (raw->type_index != kTVMFFIArray) return false;
  const AnyView& view = *reinterpret_cast<const AnyView*>(raw);  // what PackedArgs holds: the same layout
  for (const Any& a : view.cast<Array<Any>>()) {
    if (a.type_index() != kTVMFFIInt) return false;
    axes->axes.push_back(a.cast<int64_t>());
  }
  return true;
}

/// keepdims as a call function takes it: a bool or an int (Python's truth).
bool keepdims_arg(const TVMFFIAny* raw, bool* keepdims) {
  if (raw->type_index != kTVMFFIBool && raw->type_index != kTVMFFIInt) return false;
  *keepdims = raw->v_int64 != 0;
  return true;
}

/// dtype as a call function takes it: a dtype name (kjit._call.Computation names
/// the dtype objects it is given); false for anything else.
bool dtype_arg(const TVMFFIAny* raw, std::string* name) {
  if (raw->type_index == kTVMFFIRawStr) {
    *name = raw->v_c_str;
    return true;
  }
  if (raw->type_index != kTVMFFISmallStr && raw->type_index != kTVMFFIStr) return false;
  *name = std::string(reinterpret_cast<const AnyView*>(raw)->cast<String>());
  return true;
}

/// The keyword arguments a call function takes after its tensors, as bits of the
/// call class kjit._call.Computation passes (its `keywords`: axis, keepdims, dtype).
constexpr int64_t kAxisArg = 1, kKeepdimsArg = 2, kDtypeArg = 4;

/// red_function(id, promotion, into, keywords) -> the call function of one call
/// class: f(*inputs[, axis][, keepdims][, dtype]) returns the new output, and with
/// `into` f(*inputs, out[, axis][, keepdims][, dtype]) reduces into out and returns
/// True. It runs only when every input and out are tensors, axis an int or a tuple
/// of ints, keepdims a bool or int and dtype a name; otherwise it returns None and
/// runs nothing, and the call takes the checked path (red_output and red_run),
/// which reads every other form.
tvm::ffi::Function red_function(int64_t id, int64_t promotion, bool into, int64_t keywords) {
  return at_ffi_boundary([&] {
    std::shared_ptr<Reduction> red = g_reductions.get(id);
    internal_check(keywords >= 0 && keywords <= (kAxisArg | kKeepdimsArg | kDtypeArg),
                   "red_function with unknown keywords");
    const Promotion p = promotion_of(promotion);
    const int n_out = into ? 1 : 0;
    const bool has_axis = (keywords & kAxisArg) != 0, has_keepdims = (keywords & kKeepdimsArg) != 0;
    const bool has_dtype = (keywords & kDtypeArg) != 0;
    const int n_kw = int{has_axis} + int{has_keepdims} + int{has_dtype};
    return tvm::ffi::Function::FromPacked(
        [red, p, n_out, has_axis, has_keepdims, has_dtype, n_kw](PackedArgs args, Any* rv) {
          const auto* raw = reinterpret_cast<const TVMFFIAny*>(args.data());
          const int n_in = args.size() - n_out - n_kw;
          RedScratch& s = thread_scratch<RedScratch>();
          s.inputs.resize(std::max(n_in, 0));
          bool taken = n_in >= 1;
          for (int i = 0; taken && i < n_in; ++i) {
            const DLTensor* t = tensor_arg(&raw[i]);
            s.inputs[i] = EwOperand::of(t);
            taken = t != nullptr;
          }
          const DLTensor* out = n_out > 0 && taken ? tensor_arg(&raw[n_in]) : nullptr;
          taken = taken && (n_out == 0 || out != nullptr);
          const TVMFFIAny* kw = raw + n_in + n_out;
          s.axes.all = true;
          taken = taken && (!has_axis || axis_arg(kw++, &s.axes));
          bool keepdims = false;
          taken = taken && (!has_keepdims || keepdims_arg(kw++, &keepdims));
          std::string dtype_name;
          taken = taken && (!has_dtype || dtype_arg(kw, &dtype_name));
          if (!taken) {
            *rv = nullptr;
            return;
          }
          at_ffi_boundary([&] {
            const std::optional<EwType> dtype = dtype_of(dtype_name);
            if (out != nullptr) {
              red->run(s.inputs, s.axes, keepdims, dtype, out, p);
              *rv = true;
              return 0;
            }
            tvm::ffi::Tensor made;
            // Two captured pointers: fit std::function's inline buffer, so no allocation.
            auto allocate = [m = &made, &red](size_t, const EwOutput& layout, DLDevice device) -> const DLTensor* {
              *m = allocate_output(layout, device, red->name(), kApi);
              return m->GetDLTensorPtr();
            };
            red->run_allocating(s.inputs, s.axes, keepdims, dtype, allocate, p);
            *rv = std::move(made);
            return 0;
          });
        });
  });
}

/// red_create(reduce, map, post, name, identity, upcast_integers, build_dir, verbose, arg, accumulator,
/// identity_code) -> [id, name]
void red_create(PackedArgs args, Any* rv) {
  at_ffi_boundary([&] {
    if (args.size() != 11) {
      throw TypeError("kjit.red_create: expected 11 arguments, got " + std::to_string(args.size()));
    }
    ReductionCode code{std::string(args[0].cast<String>()), std::string(args[1].cast<String>()),
                       std::string(args[2].cast<String>()), args[8].cast<bool>(),
                       std::string(args[9].cast<String>()), std::string(args[10].cast<String>())};
    std::optional<EwOperand> identity;
    std::vector<std::unique_ptr<RawTensor>> store;
    if (args[4] != nullptr) identity = operand_of(args[4], 0, &store, kApi);
    ReductionOptions opts;
    opts.upcast_integers = args[5].cast<bool>();
    opts.build_directory = std::string(args[6].cast<String>());
    opts.verbose = args[7].cast<bool>();
    auto r = std::make_shared<Reduction>(code, identity, std::string(args[3].cast<String>()), opts);
    const String entry(r->name());
    *rv = Array<Any>{g_reductions.add(std::move(r)), entry};
    return 0;
  });
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def_packed("kjit.red_create", red_create)
      .def_packed("kjit.red_output", red_output)
      .def_packed("kjit.red_run", red_run)
      .def("kjit.red_function", red_function)
      .def("kjit.red_free", [](int64_t id) {
        // The kernel handles go; the compiled libraries stay loaded and cached on disk.
        g_reductions.free(id);
      });
}

}  // namespace
}  // namespace kjit
