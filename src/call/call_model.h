// The call model: what a call of a checked function means, derived from its spec
// once at load. It binds a caller's arguments by position, keyword and default,
// runs the checks that need only metadata (argument kinds, scalar ranges, rank,
// dtype, shapes and symbols, layout, device, constraints), and says what each
// returned tensor is (shape, dtype, device). Every front end asks it: `mod.fn`
// (kjit._call.Function), the tvm-ffi function kjit.call_infer, a torch op's fake
// implementation and a JAX callable's abstract evaluation. Its messages come from
// the stub prelude's message functions, the ones the generated stubs call.
//
// Errors follow the tvm-ffi C ABI, as a stub's do: a method returns -1 with the
// error raised on this thread (TVMFFIErrorSetRaisedFromCStr); `raise_if_failed`
// turns that into a C++ exception for C++ callers.
#ifndef KJIT_SRC_CALL_CALL_MODEL_H_
#define KJIT_SRC_CALL_CALL_MODEL_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kjit/small_vector.h"
#include "kjit/spec.h"

namespace kjit {

/// A packed kTVMFFIOpaquePyObject whose `zero_padding` is this carries the name of
/// its Python type in `v_c_str`, for the model's messages (kjit_stub::kind_name;
/// call_checks.cc asserts it is kjit_stub::kPythonTypeNamed).
constexpr uint32_t kPythonTypeNamed = 0x4b4a4954;

/// A parameter the caller passes (the spec's call_args() less returned tensors).
struct CallerParam {
  std::string name;
  size_t param = 0;  ///< index into FunctionSpec::params
  int slot = 0;      ///< its position among the stub's arguments
  bool tensor = false;
  bool written = false;       ///< a tensor the kernel writes (`out`)
  bool has_default = false;   ///< a scalar with a default
  TVMFFIAny default_value{};  ///< bool, int or float: the default's value
  std::string type_text;      ///< "float32[n] out", for messages
};

/// A tensor parameter among the caller's: its caller index, and whether the kernel
/// writes it.
struct TensorCaller {
  int32_t index;
  bool written;
};

/// A returned tensor of one call, as kjit allocates it.
struct OutputMeta {
  SmallVector<int64_t, 8> shape;
  DLDataType dtype{};
  DLDevice device{kDLCPU, 0};
};

/// Where the caller's value of a parameter comes from after binding.
constexpr int32_t kFromDefault = -1;

class CallModel {
 public:
  explicit CallModel(FunctionSpec spec);
  CallModel(const CallModel&) = delete;
  CallModel& operator=(const CallModel&) = delete;

  const FunctionSpec& spec() const { return spec_; }
  const std::vector<CallerParam>& callers() const { return callers_; }
  /// The tensor parameters among the callers, in order.
  const std::vector<TensorCaller>& tensor_callers() const { return tensor_callers_; }
  /// The returned tensors, in spec order (indices into FunctionSpec::params).
  const std::vector<size_t>& returned() const { return returned_; }
  /// For each stub argument, the caller parameter it takes (>= 0) or returned
  /// tensor k as -1 - k.
  const std::vector<int32_t>& stub_slots() const { return stub_slots_; }
  bool has_defaults() const { return has_defaults_; }
  /// For messages about a call that passed too much: "; 'y' is returned by scale,
  /// not passed: call scale(x, alpha)", or "" when nothing is returned.
  std::string returned_note() const;

  /// Binds a call of `nargs` positional arguments and keywords `kwnames`: `from[i]`
  /// (one per caller parameter) becomes the index of its value among the positional
  /// arguments then the keywords, or kFromDefault. -1 with a TypeError raised for a
  /// missing, unknown or repeated argument, or too many.
  int bind(size_t nargs, const std::string_view* kwnames, size_t nkw, int32_t* from) const;

  /// Checks a call whose caller arguments (caller order, bound) are `args`: tensors
  /// as DLTensor* or tvm-ffi Tensor Anys, None, scalars as tvm-ffi passes them.
  /// With `data_checked` false only metadata is read (no alignment or NULL-data
  /// checks: a fake tensor or an abstract value has no data). Fills `outputs` (one
  /// per returned tensor). -1 with the error raised when a check fails.
  int infer(const TVMFFIAny* args, bool data_checked, OutputMeta* outputs) const;

  /// The checks of infer() that read data pointers (alignment, NULL data), for a call
  /// whose metadata are those of a call infer() passed (a caller's cache of it). -1
  /// with the error raised.
  int check_data(const TVMFFIAny* args) const;

  /// Where the value of shape symbol `symbol` comes from when the caller's arguments
  /// give it directly: a whole dim of a tensor (its index, counted from the end
  /// after a batch group), or an integer scalar; caller -1 otherwise (it is solved,
  /// or never bound). Front ends whose sizes are symbolic (torch.compile's dynamic
  /// shapes) build returned shapes from these.
  struct SymbolSource {
    int caller = -1;
    int dim = 0;  ///< shape index; negative counts from the end
    bool scalar = false;
  };
  SymbolSource symbol_source(const std::string& symbol) const;

  /// The callers that name batch group `group`, in binding order, each with the
  /// count of its declared dims after the group: a returned tensor's leading dims
  /// are the first present one's.
  std::vector<std::pair<int, int>> batch_sources(const std::string& group) const;

  /// The checks, precomputed in the stub's order (defined in call_checks.cc).
  struct Plan;

 private:
  std::shared_ptr<const Plan> make_plan() const;

  FunctionSpec spec_;
  std::vector<CallerParam> callers_;
  std::vector<TensorCaller> tensor_callers_;
  std::vector<size_t> returned_;
  std::vector<int32_t> stub_slots_;
  bool has_defaults_ = false;
  std::string signature_text_;  ///< "x, y, alpha, shift": the caller's parameters
  std::shared_ptr<const Plan> plan_;
};

/// Throws the error a -1 of the model (or a stub) left on this thread.
void raise_if_failed(int rc);

}  // namespace kjit

#endif  // KJIT_SRC_CALL_CALL_MODEL_H_
