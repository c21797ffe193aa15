// kjit/reduction.h — reductions from computation strings, as CuPy's
// ReductionKernel: a map of the broadcast inputs, an associative combine, a
// finishing post step; over any axes, with keepdims, dtype= and out=, NumPy's or
// PyTorch's accumulation types, pairwise (accurate) sums, vectorised and threaded
// CPU loops.
//
//   kjit::Reduction sum("template <typename T> T add(T a, T b) { return a + b; }",
//                       kjit::EwOperand::of_int(0));
//   sum.run({kjit::EwOperand::of(&x)}, kjit::ReduceAxes::of({1}), false, std::nullopt, &out);
#ifndef KJIT_REDUCTION_H_
#define KJIT_REDUCTION_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {

/// The axes a call reduces: all of them, or the listed ones (negative counts from
/// the end, NumPy's rule).
struct ReduceAxes {
  bool all = true;
  std::vector<int64_t> axes;
  static ReduceAxes everything() { return {}; }
  static ReduceAxes of(std::vector<int64_t> axes) { return {false, std::move(axes)}; }
};

struct ReductionOptions {
  std::string build_directory;  ///< kernel cache root; empty: default_cache_dir()
  bool verbose = false;
  /// Bool and integers narrower than 64 bits accumulate, and return, in int64
  /// (NumPy: uint64 for unsigned), as sum and prod do; false keeps their type, as
  /// max and min do. float16/bfloat16 always accumulate in float32.
  bool upcast_integers = true;
};

/// The code of a reduction: each part is C++ defining its function (the last
/// definition, as kjit.elementwise finds its entry), called with the accumulator
/// type as T when it is a template.
struct ReductionCode {
  std::string reduce;  ///< `T f(T a, T b)`: the combine (associative and commutative)
  std::string map;     ///< `T f(T x, T y, ...)`: one value per element of the broadcast inputs; empty: the input
  std::string post;    ///< `U f(T acc, int64_t n)`: the finished value; empty: the accumulator
  /// A value-and-index reduction (argmax, argmin): `reduce` is `bool f(T a, T b)`,
  /// whether a is strictly better than b; the result is the int64 index of the best
  /// element along the one reduced axis, the first of equals (NumPy's rule). One
  /// input, no map, post, identity or dtype=.
  bool arg = false;
  /// A type of the code as the accumulator ("Welford<T>", T the compute type), for
  /// reductions that carry several values (mean and M2, max and sum): `map` makes one
  /// from each element, `reduce` combines two, `post` finishes one (both required).
  /// Empty: the accumulator is T.
  std::string accumulator = {};
  /// With `accumulator`: a C++ expression of T for its identity ("Welford<T>{}");
  /// empty: none (an empty reduction is a ValueError). The numeric identity is unused.
  std::string identity_code = {};
};

/// A reduction compiled per (input dtypes, accumulator, output dtype) on first
/// use, cached in memory and on disk.
class Reduction {
 public:
  /// `identity`: the combine's identity, what an empty reduction gives (as a
  /// scalar operand); nullopt: an empty reduction is a ValueError. `name` names
  /// the reduction in messages and cache files (default: the combine's name).
  Reduction(const ReductionCode& code, std::optional<EwOperand> identity, const std::string& name = "",
            ReductionOptions options = {});
  ~Reduction();
  Reduction(Reduction&&) noexcept;
  Reduction& operator=(Reduction&&) noexcept;

  const std::string& name() const;

  /// The output a call makes: its shape and dtype (order: C-contiguous). Throws
  /// ValueError (shapes, axes: an AxisError for one out of range, in NumPy's
  /// wording), TypeError (dtypes).
  EwOutput output_for(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                      std::optional<EwType> dtype, Promotion promotion = Promotion::kNumPy) const;

  /// Reduces into `out` (its shape must be output_for's; its dtype one the result
  /// casts to, NumPy's same_kind or PyTorch's canCast). CPU tensors only.
  void run(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims, std::optional<EwType> dtype,
           const DLTensor* out, Promotion promotion = Promotion::kNumPy);

  /// Reduces into a new output that `allocate` makes (k = 0) for output_for's
  /// layout, C-contiguous: the call's plan lays the output out itself, and checks
  /// nothing of it (Elementwise's EwAllocation::kFreshContiguous).
  void run_allocating(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                      std::optional<EwType> dtype, const EwAllocate& allocate, Promotion promotion = Promotion::kNumPy);

 private:
  struct Impl;  // src/reduction/reduction.cc
  std::unique_ptr<Impl> impl_;
};

}  // namespace kjit

#endif  // KJIT_REDUCTION_H_
