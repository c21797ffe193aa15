// kjit/elementwise.h — computation strings as JIT-compiled elementwise kernels with
// TensorIterator semantics: broadcasting, type promotion (NumPy 2 or PyTorch),
// casts inside the kernel, out= with a safe-cast check, overlap checks, dimension
// reordering and coalescing, vectorised and threaded CPU loops.
//
//   kjit::Elementwise add("template <typename T> T add(T a, T b) { return a + b; }");
//   add.run({kjit::EwOperand::of(&a), kjit::EwOperand::of(&b)}, {&c});
#ifndef KJIT_ELEMENTWISE_H_
#define KJIT_ELEMENTWISE_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kjit/spec.h"

namespace kjit {

/// The element types of the engine: the spec model's scalar types (bool,
/// int8..uint64, float16, bfloat16, float32, float64, complex64, complex128).
using EwType = ScalarType;
/// "float32", as scalar_type_name.
inline const char* ew_type_name(EwType t) { return scalar_type_name(t); }
DLDataType ew_dl_type(EwType t);

/// Promotion rules: NumPy 2 (NEP 50: only Python scalars are weak) or PyTorch
/// (0-d tensors and Python scalars take part by category only; int + float
/// tensors give the float type; Python floats default to float32).
enum class Promotion { kNumPy, kTorch };

/// An input: a tensor, or a scalar (a Python scalar is weak; a NumPy scalar is a
/// 0-d tensor of its type).
struct EwOperand {
  const DLTensor* tensor = nullptr;
  enum class Scalar { kNone, kBool, kInt, kFloat, kComplex } scalar = Scalar::kNone;
  int64_t int_value = 0;
  double real = 0, imag = 0;

  static EwOperand of(const DLTensor* t) { return {t, Scalar::kNone, 0, 0, 0}; }
  static EwOperand of_bool(bool v) { return {nullptr, Scalar::kBool, v ? 1 : 0, 0, 0}; }
  static EwOperand of_int(int64_t v) { return {nullptr, Scalar::kInt, v, 0, 0}; }
  static EwOperand of_float(double v) { return {nullptr, Scalar::kFloat, 0, v, 0}; }
  static EwOperand of_complex(double re, double im) { return {nullptr, Scalar::kComplex, 0, re, im}; }
};

/// An output's layout: what a call produces (what run_allocating asks its
/// allocator for, and what an out= tensor must match).
struct EwOutput {
  std::vector<int64_t> shape;
  EwType type = EwType::kFloat32;
  /// Dims from the slowest-varying to the fastest of a layout that follows the
  /// inputs' (TensorIterator's rule): allocate `shape` permuted by `order`
  /// contiguously, then view it through the inverse permutation.
  std::vector<int> order;
};

/// Makes output `k` of a call: `layout.shape` in the order `layout.order` asks
/// for, of type `layout.type`, on `device`. The tensor must live until the call
/// returns.
using EwAllocate = std::function<const DLTensor*(size_t k, const EwOutput& layout, DLDevice device)>;

/// What run_allocating may assume of its allocator's tensors.
enum class EwAllocation {
  kAny,              ///< any strides and memory: each call checks the outputs' layout and overlap
  kFreshContiguous,  ///< new memory, contiguous in layout.order (kjit's own outputs): no checks
};

/// The type an elementwise function computes in (Python: `compute=`).
struct EwCompute {
  enum class Rule {
    kPromoted,  ///< the inputs' promoted type (TensorIterator's common dtype)
    kFloat,     ///< as kPromoted, but integer and bool results become floating, as np.sin/torch.sin promote
    kType,      ///< `type`: every input is cast to it (NumPy's dtype=); it is the result type
  } rule = Rule::kPromoted;
  EwType type = EwType::kFloat64;  ///< Rule::kType only
  /// Per output, the dtype the entry function declares for it when that is not the
  /// computed type (`bool lt(T, T)`: bool): such an output has its own dtype, which
  /// the compute rule does not change. Empty, or nullopt: the result type.
  std::vector<std::optional<EwType>> own_outputs;
};

struct ElementwiseOptions {
  std::string build_directory;  ///< kernel cache root; empty: default_cache_dir()
  bool verbose = false;
  /// kPromoted is raised to kFloat when the entry function's declared return type
  /// is float or double (an integer result would truncate it).
  EwCompute compute;
};

/// A computation string compiled per (dtypes, arity) on first use, cached in
/// memory and on disk.
class Elementwise {
 public:
  /// `code` defines the entry function (the last function, or `name`), which
  /// returns its result(s) or writes them through num_outputs trailing `T&`
  /// parameters. Extra scalar arguments of a call are passed after the tensor
  /// inputs as bool, int64_t, double (complex: the complex compute type) and
  /// converted to the entry's parameter types (docs/elementwise.md).
  explicit Elementwise(std::string code, const std::string& name = "", int num_outputs = 1,
                       ElementwiseOptions options = {});
  ~Elementwise();
  Elementwise(Elementwise&&) noexcept;
  Elementwise& operator=(Elementwise&&) noexcept;

  /// The entry function's name.
  const std::string& name() const;
  int num_outputs() const;

  /// The outputs a call with these inputs produces. Throws ValueError (shapes),
  /// TypeError (dtypes).
  std::vector<EwOutput> outputs_for(const std::vector<EwOperand>& inputs,
                                    Promotion promotion = Promotion::kNumPy) const;

  /// Computes into `outputs` (allocated by the caller, or a user's out=): checks
  /// shapes, safe casting into each output and memory overlap, then runs.
  /// `extra` are the extra scalar arguments. Throws kjit::ValueError/TypeError
  /// (user errors) and CompileError.
  void run(const std::vector<EwOperand>& inputs, const std::vector<const DLTensor*>& outputs,
           const std::vector<EwOperand>& extra = {}, Promotion promotion = Promotion::kNumPy);

  /// As run, into new outputs made by `allocate` (which may itself run
  /// elementwise calls). A call is planned once per inputs' metadata, so a
  /// repeated one costs a lookup, the allocations and the loop.
  void run_allocating(const std::vector<EwOperand>& inputs, const EwAllocate& allocate,
                      const std::vector<EwOperand>& extra = {}, Promotion promotion = Promotion::kNumPy,
                      EwAllocation allocation = EwAllocation::kAny);

 private:
  struct Impl;  // src/elementwise/engine.cc: kernels, plans, the call path
  std::unique_ptr<Impl> impl_;
};

/// Threads used by elementwise CPU loops: KJIT_NUM_THREADS, else OMP_NUM_THREADS,
/// else the hardware's; set_num_threads overrides (0 restores the default). An
/// environment value that is not a count in [1, kMaxThreads] is ignored (with a
/// warning on stderr); set_num_threads throws ValueError outside [0, kMaxThreads].
constexpr int kMaxThreads = 4096;
int get_num_threads();
void set_num_threads(int64_t n);

}  // namespace kjit

#endif  // KJIT_ELEMENTWISE_H_
