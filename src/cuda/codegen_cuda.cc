// Casts are resolved here, per kernel, into straight-line loads and stores, so the
// device never switches on dtypes at run time (PyTorch's LoadWithCast does).
#include "cuda/codegen_cuda.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "iterator/entry_call.h"
#include "iterator/promotion.h"
#include "kjit/errors.h"
#include "support/embedded_headers.h"

namespace kjit {
namespace cuda {

/// The device spelling of a type's storage (float16/bfloat16 are uint16_t bits).
std::string cuda_device_type(EwType t) {
  switch (t) {
    case EwType::kComplex64:
      return "kjit_complex<float>";
    case EwType::kComplex128:
      return "kjit_complex<double>";
    default:
      return iterator::storage_type(t);
  }
}

/// The type a stored value is widened to before any other conversion.
EwType cuda_widened(EwType t) { return iterator::is_half(t) ? EwType::kFloat32 : t; }

std::string cuda_widen(EwType t, const std::string& raw) {
  if (t == EwType::kFloat16) return "kjit_half_to_float(" + raw + ")";
  if (t == EwType::kBFloat16) return "kjit_bfloat16_to_float(" + raw + ")";
  return raw;
}

std::string cuda_narrow(EwType t, const std::string& value) {
  if (t == EwType::kFloat16) return "kjit_float_to_half(" + value + ")";
  if (t == EwType::kBFloat16) return "kjit_float_to_bfloat16(" + value + ")";
  return value;
}

/// A float `v` rounded to float16 or bfloat16 and widened back.
std::string cuda_round_to_half(EwType half, const std::string& v) { return cuda_widen(half, cuda_narrow(half, v)); }

/// Converts between two non-half types; complex -> real keeps the real part
/// (PyTorch's rule), complex -> bool tests both parts.
std::string cuda_cast_value(EwType from, EwType to, const std::string& v) {
  if (from == to) return v;
  std::string to_s = cuda_device_type(to);
  if (is_complex(to)) {
    std::string part = to == EwType::kComplex64 ? "float" : "double";
    return is_complex(from) ? to_s + "(" + v + ")" : to_s + "(static_cast<" + part + ">(" + v + "))";
  }
  if (is_complex(from)) {
    return to == EwType::kBool ? "kjit_nonzero(" + v + ")" : "static_cast<" + to_s + ">((" + v + ").re)";
  }
  return "static_cast<" + to_s + ">(" + v + ")";
}

}  // namespace cuda

namespace {

using cuda::cuda_cast_value;
using cuda::cuda_device_type;
using cuda::cuda_narrow;
using cuda::cuda_round_to_half;
using cuda::cuda_widen;
using cuda::cuda_widened;

/// Device source of the kernels for one set of types and one variant. The entry is
/// called through __kjit_apply (entry_call.h), qualified, so no name here hides it.
class CudaKernelWriter {
 public:
  CudaKernelWriter(const EwKernelTypes& types, EwCudaVariant variant)
      : t_(types), variant_(variant), c_(cuda_device_type(types.compute)) {
    n_out_ = t_.outputs.size();
    n_ops_ = n_out_ + t_.inputs.size();
  }

  std::string text() const {
    std::ostringstream o;
    o << declarations();
    if (strided()) o << offsets_struct();
    o << unrolled_function();
    if (variant_ == EwCudaVariant::kVectorized) {
      o << vectorized_function();
      for (int vec : {4, 2, 1}) {
        if (ew_cuda_vec_width_allowed(vec, ew_cuda_max_operand_size(t_))) o << vectorized_kernel(vec);
      }
    } else {
      o << unrolled_kernel();
    }
    return o.str();
  }

 private:
  bool strided() const { return variant_ == EwCudaVariant::kStrided || variant_ == EwCudaVariant::kCastStrided; }
  EwType type_of(size_t op) const { return op < n_out_ ? t_.outputs[op] : t_.inputs[op - n_out_]; }
  bool by_value(size_t input) const { return ew_cuda_by_value(t_, input); }
  bool any_by_value() const {
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      if (by_value(i)) return true;
    }
    return false;
  }
  std::string params() const {
    return std::string("int __n, kjit_ptrs __data") + (strided() ? ", kjit_offsets __oc" : "") +
           (any_by_value() ? ", kjit_scalars __sc" : "") + (t_.extra.empty() ? "" : ", kjit_extra __ex");
  }
  std::string args() const {
    return std::string("__n, __data") + (strided() ? ", __oc" : "") + (any_by_value() ? ", __sc" : "") +
           (t_.extra.empty() ? "" : ", __ex");
  }

  std::string declarations() const {
    std::ostringstream o;
    o << "constexpr int KJIT_THREADS = " << kEwCudaThreads << ";\n"
      << "constexpr int KJIT_WORK = " << ew_cuda_work_per_thread(t_) << ";\n"
      << "constexpr int KJIT_BLOCK_WORK = KJIT_THREADS * KJIT_WORK;\n"
      << "constexpr int KJIT_NOPS = " << n_ops_ << ";\n"
      << "struct kjit_ptrs { char* __p[KJIT_NOPS]; };\n";
    if (!t_.extra.empty()) {  // each extra in its travel type, in a 16-byte slot
      o << "struct kjit_extra { alignas(16) unsigned char __b[" << kEwExtraSlotBytes * t_.extra.size() << "]; };\n";
    }
    if (any_by_value()) {
      o << "struct kjit_scalars {";
      for (size_t i = 0; i < t_.inputs.size(); ++i) {
        if (by_value(i)) o << " " << cuda_device_type(t_.inputs[i]) << " __s" << i << ";";
      }
      o << " };\nstatic_assert(sizeof(kjit_scalars) == " << ew_cuda_scalars_layout(t_).back()
        << ", \"kjit_scalars must match the host's packing\");\n";
    }
    return o.str();
  }

  /// Mirrors the host's packing (cuda_launch.cc); the static_assert pins the size.
  std::string offsets_struct() const {
    std::ostringstream o;
    o << "constexpr int KJIT_MAX_DIMS = " << kEwCudaMaxDims << ";\n"
      << "struct kjit_divider { uint32_t __divisor, __magic, __shift; };\n"
      << "struct kjit_offsets {\n  int __ndim;\n  kjit_divider __sizes[KJIT_MAX_DIMS];\n"
      << "  int __strides[KJIT_MAX_DIMS][KJIT_NOPS];\n};\n"
      << "static_assert(sizeof(kjit_offsets) == " << ew_cuda_offsets_bytes(n_ops_)
      << ", \"kjit_offsets must match the host's packing\");\n"
      << "// n / divisor for n < 2^31 (PyTorch's IntDivider): mul-hi, add, shift.\n"
      << "__device__ __forceinline__ uint32_t kjit_div(const kjit_divider& __d, uint32_t __n) {\n"
      << "  return (__umulhi(__n, __d.__magic) + __n) >> __d.__shift;\n}\n"
      << "__device__ __forceinline__ void kjit_offsets_of(const kjit_offsets& __oc, uint32_t __linear, int* __off) {\n"
      << "#pragma unroll\n  for (int __k = 0; __k < KJIT_NOPS; ++__k) __off[__k] = 0;\n"
      << "#pragma unroll\n  for (int __d = 0; __d < KJIT_MAX_DIMS; ++__d) {\n    if (__d == __oc.__ndim) break;\n"
      << "    const uint32_t __q = kjit_div(__oc.__sizes[__d], __linear);\n"
      << "    const int __r = static_cast<int>(__linear - __q * __oc.__sizes[__d].__divisor);\n"
      << "#pragma unroll\n    for (int __k = 0; __k < KJIT_NOPS; ++__k) __off[__k] += __r * __oc.__strides[__d][__k];\n"
      << "    __linear = __q;\n  }\n}\n";
    return o.str();
  }

  /// Byte address of operand `op` for element index `i` (the strided form uses off[]).
  std::string address(size_t op, const std::string& i) const {
    std::string p = "__data.__p[" + std::to_string(op) + "]";
    if (strided()) return p + " + __off[" + std::to_string(op) + "]";
    return p + " + " + i + " * " + std::to_string(ew_cuda_operand_size(t_, op));
  }

  std::string load(size_t op, const std::string& addr) const {
    EwType t = type_of(op);
    std::string raw = "*reinterpret_cast<const " + cuda_device_type(t) + "*>(" + addr + ")";
    return to_compute(t, cuda_widen(t, raw));
  }

  /// A widened value of type `t` as the compute type; under a half result another
  /// type is rounded to it first (cast to the common dtype, then computed in float).
  std::string to_compute(EwType t, const std::string& widened_value) const {
    std::string v = cuda_cast_value(cuda_widened(t), t_.compute, widened_value);
    return t_.half_result && t != *t_.half_result ? cuda_round_to_half(*t_.half_result, v) : v;
  }

  /// Input i's value for the element at `i_expr`: from the parameters when by value.
  std::string load_input(size_t i, const std::string& i_expr) const {
    if (!by_value(i)) return load(n_out_ + i, address(n_out_ + i, i_expr));
    EwType t = t_.inputs[i];
    return to_compute(t, cuda_widen(t, "__sc.__s" + std::to_string(i)));
  }

  std::string store(size_t op, const std::string& addr, std::string value) const {
    EwType t = type_of(op);
    // A half result goes into another type only after rounding to its own; a result
    // of the entry's own type is not the half result.
    if (t_.half_result && t != *t_.half_result && !own_type(op)) value = cuda_round_to_half(*t_.half_result, value);
    return "*reinterpret_cast<" + cuda_device_type(t) + "*>(" + addr +
           ") = " + cuda_narrow(t, cuda_cast_value(t_.result(op), cuda_widened(t), value)) + ";";
  }

  bool own_type(size_t k) const { return t_.result(k) != t_.compute; }

  /// Output k's type as the entry produces it (the compute type, or its own).
  std::string result_spelling(size_t k) const { return cuda_device_type(t_.result(k)); }

 public:
  std::vector<std::string> result_spellings() const {
    std::vector<std::string> out;
    for (size_t k = 0; k < n_out_; ++k) out.push_back(result_spelling(k));
    return out;
  }

 private:
  /// The entry call for slot `j` of the per-thread arrays in0.., out0...
  std::string compute(const std::string& j) const {
    std::string a;
    for (size_t i = 0; i < t_.inputs.size(); ++i)
      a += (a.empty() ? "" : ", ") + ("__in" + std::to_string(i) + "[" + j + "]");
    for (size_t e = 0; e < t_.extra.size(); ++e) {
      a += (a.empty() ? "" : ", ") + ("*reinterpret_cast<const " + cuda_device_type(t_.extra[e]) + "*>(__ex.__b + " +
                                      std::to_string(kEwExtraSlotBytes * e) + ")");
    }
    std::string s = "{";
    std::string results;
    for (size_t k = 0; k < n_out_; ++k) {
      s += " " + result_spelling(k) + " __r" + std::to_string(k) + ";";
      results += "__r" + std::to_string(k) + ", ";
    }
    s += " __kjit_apply(" + results + a + ");";
    for (size_t k = 0; k < n_out_; ++k)
      s += " __out" + std::to_string(k) + "[" + j + "] = __r" + std::to_string(k) + ";";
    return s + " }";
  }

  std::string register_arrays() const {
    std::ostringstream o;
    for (size_t i = 0; i < t_.inputs.size(); ++i) o << "  " << c_ << " __in" << i << "[KJIT_WORK];\n";
    for (size_t k = 0; k < n_out_; ++k) o << "  " << result_spelling(k) << " __out" << k << "[KJIT_WORK];\n";
    return o.str();
  }

  /// One guarded pass over the thread's elements j (element start + tid + j * 128).
  std::string pass(const std::string& head, const std::string& body) const {
    return "#pragma unroll\n  for (int __j = 0; __j < KJIT_WORK; ++__j) {\n"
           "    const int __k = kjit_thread_index() + __j * KJIT_THREADS;\n"
           "    if (__k >= __remaining) break;\n" +
           head + body + "  }\n";
  }

  /// Where the element's operands are: its index, or (strided) every operand's
  /// offset, computed once; the outputs' offsets are kept for the store pass.
  std::string locate() const {
    if (!strided()) return "    const int __i = __start + __k;\n";
    std::string s =
        "    int __off[KJIT_NOPS];\n    kjit_offsets_of(__oc, static_cast<uint32_t>(__start + __k), __off);\n";
    for (size_t k = 0; k < n_out_; ++k)
      s += "    __out_off" + std::to_string(k) + "[__j] = __off[" + std::to_string(k) + "];\n";
    return s;
  }

  std::string store_address(size_t k) const {
    if (!strided()) return address(k, "__i");
    return "__data.__p[" + std::to_string(k) + "] + __out_off" + std::to_string(k) + "[__j]";
  }

  /// Loads all, computes all, then stores all: the loads are in flight together.
  std::string unrolled_function() const {
    std::ostringstream arrays, loads, stores;
    arrays << register_arrays();
    if (strided()) {
      for (size_t k = 0; k < n_out_; ++k) arrays << "  int __out_off" << k << "[KJIT_WORK];\n";
    }
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      loads << "    __in" << i << "[__j] = " << load_input(i, "__i") << ";\n";
    }
    for (size_t k = 0; k < n_out_; ++k) {
      stores << "    " << store(k, store_address(k), "__out" + std::to_string(k) + "[__j]") << "\n";
    }
    std::ostringstream o;
    o << "__device__ __forceinline__ void kjit_unrolled(" << params() << ", int __start) {\n"
      << "  const int __remaining = __n - __start;\n"
      << arrays.str() << pass(locate(), loads.str()) << pass("", "    " + compute("__j") + "\n")
      << pass(strided() ? "" : "    const int __i = __start + __k;\n", stores.str()) << "}\n";
    return o.str();
  }

  std::string unrolled_kernel() const {
    return "extern \"C\" __global__ void " + ew_cuda_kernel_name(variant_) + "(" + params() + ") {\n" +
           "  kjit_unrolled(" + args() + ", kjit_block_index() * KJIT_BLOCK_WORK);\n}\n";
  }

  /// A loop over the thread's vectors u (elements start + (tid + u * 128) * V ...).
  static std::string vector_pass(const std::string& body) {
    return "#pragma unroll\n  for (int __u = 0; __u < KJIT_WORK / __V; ++__u) {\n"
           "    const int __i = __start + (kjit_thread_index() + __u * KJIT_THREADS) * __V;\n" +
           body + "  }\n";
  }

  std::string vector_loads() const {
    std::ostringstream o;
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      if (by_value(i)) {
        o << "#pragma unroll\n    for (int __e = 0; __e < __V; ++__e) __in" << i
          << "[__u * __V + __e] = " << load_input(i, "__i") << ";\n";
        continue;
      }
      o << "    const __vec_t __v" << i << " = *reinterpret_cast<const __vec_t*>(" << address(n_out_ + i, "__i")
        << ");\n"
        << "#pragma unroll\n    for (int __e = 0; __e < __V; ++__e) __in" << i << "[__u * __V + __e] = __v" << i
        << ".__v[__e];\n";
    }
    return o.str();
  }

  std::string vector_stores() const {
    std::ostringstream o;
    for (size_t k = 0; k < n_out_; ++k) {
      o << "    __vec_t __w" << k << ";\n#pragma unroll\n    for (int __e = 0; __e < __V; ++__e) __w" << k
        << ".__v[__e] = __out" << k << "[__u * __V + __e];\n    *reinterpret_cast<__vec_t*>(" << address(k, "__i")
        << ") = __w" << k << ";\n";
    }
    return o.str();
  }

  /// Full blocks use aligned vector accesses; the tail block runs the unrolled loop.
  std::string vectorized_function() const {
    std::ostringstream o;
    o << "template <typename __S, int __V>\nstruct alignas(sizeof(__S) * __V) kjit_vec { __S __v[__V]; };\n"
      << "template <int __V>\n__device__ __forceinline__ void kjit_vectorized(" << params() << ") {\n"
      << "  const int __start = kjit_block_index() * KJIT_BLOCK_WORK;\n"
      << "  if (__n - __start < KJIT_BLOCK_WORK) {\n    kjit_unrolled(" << args() << ", __start);\n    return;\n  }\n"
      << "  typedef kjit_vec<" << c_ << ", __V> __vec_t;\n"
      << register_arrays() << vector_pass(vector_loads())
      << "#pragma unroll\n  for (int __j = 0; __j < KJIT_WORK; ++__j) " << compute("__j") << "\n"
      << vector_pass(vector_stores()) << "}\n";
    return o.str();
  }

  std::string vectorized_kernel(int vec) const {
    return "extern \"C\" __global__ void " + ew_cuda_kernel_name(variant_, vec) + "(" + params() + ") {\n" +
           "  kjit_vectorized<" + std::to_string(vec) + ">(" + args() + ");\n}\n";
  }

  const EwKernelTypes& t_;
  EwCudaVariant variant_;
  std::string c_;  ///< the compute type's device spelling
  size_t n_out_ = 0, n_ops_ = 0;
};

void check_types(const EwKernelTypes& types, EwCudaVariant variant) {
  internal_check(!types.outputs.empty(), "an elementwise CUDA kernel without outputs");
  internal_check(types.by_value.empty() || types.by_value.size() == types.inputs.size(),
                 "by-value flags that do not match the inputs");
  internal_check(!iterator::is_half(types.compute),
                 "float16/bfloat16 as an elementwise compute type (they compute in float)");
  bool cast_variant = variant == EwCudaVariant::kCastContiguous || variant == EwCudaVariant::kCastStrided;
  internal_check(cast_variant || !ew_cuda_needs_cast(types), "a no-cast CUDA variant for types that need casts");
}

}  // namespace

const char* ew_cuda_variant_name(EwCudaVariant v) {
  switch (v) {
    case EwCudaVariant::kVectorized:
      return "vectorized";
    case EwCudaVariant::kStrided:
      return "strided";
    case EwCudaVariant::kCastContiguous:
      return "cast_contiguous";
    default:
      return "cast_strided";
  }
}

std::string ew_cuda_kernel_name(EwCudaVariant v, int vec_width) {
  std::string name = std::string("kjit_ew_") + ew_cuda_variant_name(v);
  return v == EwCudaVariant::kVectorized ? name + std::to_string(vec_width) : name;
}

int ew_cuda_operand_size(const EwKernelTypes& types, size_t op) {
  size_t n_out = types.outputs.size();
  return iterator::size_of(op < n_out ? types.outputs[op] : types.inputs[op - n_out]);
}

int ew_cuda_max_operand_size(const EwKernelTypes& types) {
  int widest = 1;
  for (size_t op = 0; op < types.outputs.size() + types.inputs.size(); ++op) {
    widest = std::max(widest, ew_cuda_operand_size(types, op));
  }
  return widest;
}

int ew_cuda_work_per_thread(const EwKernelTypes& types) { return ew_cuda_max_operand_size(types) == 1 ? 16 : 8; }

bool ew_cuda_needs_cast(const EwKernelTypes& types) {
  for (EwType t : types.outputs) {
    if (t != types.compute) return true;
  }
  for (EwType t : types.inputs) {
    if (t != types.compute) return true;
  }
  return false;
}

bool ew_cuda_vec_width_allowed(int vec_width, int element_size) {
  return (vec_width == 1 || vec_width == 2 || vec_width == 4) && vec_width * element_size <= kEwCudaMaxVecBytes;
}

bool ew_cuda_by_value(const EwKernelTypes& types, size_t i) { return i < types.by_value.size() && types.by_value[i]; }

std::vector<size_t> ew_cuda_scalars_layout(const EwKernelTypes& types) {
  std::vector<size_t> offsets;
  size_t at = 0, align = 1;
  for (size_t i = 0; i < types.inputs.size(); ++i) {
    const size_t size = static_cast<size_t>(iterator::size_of(types.inputs[i]));
    if (ew_cuda_by_value(types, i)) at = (at + size - 1) / size * size;
    offsets.push_back(at);
    if (ew_cuda_by_value(types, i)) {
      at += size;
      align = std::max(align, size);
    }
  }
  offsets.push_back((at + align - 1) / align * align);
  return offsets;
}

size_t ew_cuda_offsets_bytes(size_t num_operands) {
  return 4 * (1 + 3 * static_cast<size_t>(kEwCudaMaxDims) + static_cast<size_t>(kEwCudaMaxDims) * num_operands);
}

std::string emit_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                  EwCudaVariant variant) {
  check_types(types, variant);
  std::ostringstream o;
  o << "// Generated by kjit: elementwise CUDA kernel '" << entry << "' " << types.text() << ", "
    << ew_cuda_variant_name(variant) << "\n"
    << "#line 1 \"kjit_cuda_prelude\"\n"
    << detail::elementwise_cuda_prelude_text() << iterator::wrap_user_code(code)
    << "#line 1 \"kjit_elementwise_cuda\"\n"
    << iterator::entry_apply(iterator::entry_callee(code, entry, cuda_device_type(types.compute)),
                             CudaKernelWriter(types, variant).result_spellings(), "__device__ __forceinline__",
                             "__device__")
    << CudaKernelWriter(types, variant).text();
  return o.str();
}

}  // namespace kjit
