// The loop reads each input in its own type and converts to the compute type, and
// converts the result to each output's type on store: no temporary copies.
#include "cpu/codegen_cpu.h"

#include <sstream>

#include "iterator/entry_call.h"
#include "iterator/promotion.h"
#include "support/embedded_headers.h"

namespace kjit {
namespace {

/// Bytes of output a streaming kernel computes before writing them out (streaming()).
constexpr int kStreamBlockBytes = 256;

/// `v` rounded to float16 or bfloat16 and widened back (a double).
std::string round_to_half(EwType half, const std::string& v) {
  if (half == EwType::kFloat16) return "float16_value(float16_bits(static_cast<double>(" + v + ")))";
  return "bfloat16_value(bfloat16_bits(static_cast<double>(" + v + ")))";
}

}  // namespace

namespace cpu {

/// C++ expression loading one element of `t` from byte pointer `p` as compute type
/// C; an input of another type than a half result is first rounded to it (cast to
/// the common dtype, then computed in float).
std::string load_expr(EwType t, const std::string& p, const std::optional<EwType>& half) {
  std::string storage = iterator::storage_type(t);
  std::string value = "__ld<" + storage + ">(" + p + ")";
  if (t == EwType::kFloat16) value = "float16_value(" + value + ")";
  if (t == EwType::kBFloat16) value = "bfloat16_value(" + value + ")";
  if (half && t != *half) value = round_to_half(*half, value);
  return "static_cast<__C>(" + value + ")";
}

/// Stores compute-type value `v` as `t`; a half result goes into another type only
/// after rounding to its own.
std::string store_stmt(EwType t, const std::string& p, std::string v, const std::optional<EwType>& half) {
  std::string storage = iterator::storage_type(t);
  if (half && t != *half) v = round_to_half(*half, v);
  if (t == EwType::kFloat16) return "__st<uint16_t>(" + p + ", float16_bits(static_cast<double>(" + v + ")));";
  if (t == EwType::kBFloat16) return "__st<uint16_t>(" + p + ", bfloat16_bits(static_cast<double>(" + v + ")));";
  return "__st<" + storage + ">(" + p + ", static_cast<" + storage + ">(" + v + "));";
}

std::string memory_access_text() {
  return "// memcpy: operands need not be aligned to their element size.\n"
         "template <typename __S> inline __S __ld(const char* __p) { __S __v; std::memcpy(&__v, __p, sizeof(__S)); "
         "return __v; }\n"
         "template <typename __S> inline void __st(char* __p, __S __v) { std::memcpy(__p, &__v, sizeof(__S)); }\n";
}

}  // namespace cpu

namespace {

bool uses_complex(const EwKernelTypes& t) {
  return any_kernel_type(t, [](EwType x) { return is_complex(x); });
}

/// Writes the loop. Its names are reserved identifiers (`__kjit...`, `__d0`, ...)
/// and the entry is called qualified (entry_call.h), so any entry name works.
class KernelWriter {
 public:
  explicit KernelWriter(const EwKernelTypes& types) : t_(types) {
    n_out_ = t_.outputs.size();
    n_ops_ = n_out_ + t_.inputs.size();
  }

  /// One element at byte offsets `off(op)` of each operand.
  std::string element(const std::vector<std::string>& addr) const {
    std::ostringstream o;
    std::string args;
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      args += ", " + cpu::load_expr(t_.inputs[i], addr[n_out_ + i], t_.half_result);
    }
    for (size_t e = 0; e < t_.extra.size(); ++e) args += ", __e" + std::to_string(e);
    std::string results;
    for (size_t k = 0; k < n_out_; ++k) {
      o << result_spelling(k) << " __r" << k << "; ";
      results += (k ? ", __r" : "__r") + std::to_string(k);
    }
    o << "__kjit_apply(" << results << args << "); ";
    for (size_t k = 0; k < n_out_; ++k) {
      // A result of the entry's own type is not the half result: it is stored as it is.
      static const std::optional<EwType> kNoHalf;
      const std::optional<EwType>& half = own_type(k) ? kNoHalf : t_.half_result;
      o << cpu::store_stmt(t_.outputs[k], addr[k], "__r" + std::to_string(k), half) << " ";
    }
    return o.str();
  }

  bool own_type(size_t k) const { return k < t_.results.size() && t_.results[k] != t_.compute; }

  /// Output k's type as the entry produces it: the compute type __C, or its own.
  std::string result_spelling(size_t k) const {
    return own_type(k) ? std::string(iterator::storage_type(t_.results[k])) : std::string("__C");
  }

  std::vector<std::string> result_spellings() const {
    std::vector<std::string> out;
    for (size_t k = 0; k < n_out_; ++k) out.push_back(result_spelling(k));
    return out;
  }

  int size(size_t op) const { return iterator::size_of(op < n_out_ ? t_.outputs[op] : t_.inputs[op - n_out_]); }

  /// Contiguous: every operand advances by its element size.
  std::string contiguous() const {
    std::ostringstream o;
    std::string cond;
    std::vector<std::string> addr;
    for (size_t op = 0; op < n_ops_; ++op) {
      cond += (cond.empty() ? "" : " && ") + ("__s" + std::to_string(op) + " == " + std::to_string(size(op)));
      addr.push_back("__d" + std::to_string(op) + " + __k * " + std::to_string(size(op)));
    }
    o << "  if (" << cond << ") {\n";
    if (n_out_ == 1) o << streaming();
    // Two vectors per iteration: about 7% faster from L2 than one (float32 add,
    // 2^16, measured here), as torch's Vectorized loops do.
    o << "#pragma GCC unroll 2\n";
    o << "    for (int64_t __k = 0; __k < __n; ++__k) { " << element(addr) << "}\n    return;\n  }\n";
    return o.str();
  }

  /// Large contiguous runs: compute 256-byte blocks in a local buffer and write
  /// them with non-temporal stores (kjit/detail/stream_stores.h), which skip
  /// reading the output into the cache first. The block size is measured: float32
  /// add at 2^24 on 2 threads takes 0.75-0.8x the time of plain stores with
  /// 256-byte blocks, 0.85-0.9x with 1 KB blocks, whose long bursts of stores wait
  /// on the write-combining buffers.
  std::string streaming() const {
    const int s0 = size(0);
    std::vector<std::string> in_block, in_tail;
    for (size_t op = 0; op < n_ops_; ++op) {
      in_block.push_back(op == 0 ? "__buf + __j * " + std::to_string(s0)
                                 : "__d" + std::to_string(op) + " + (__k + __j) * " + std::to_string(size(op)));
      in_tail.push_back("__d" + std::to_string(op) + " + __k * " + std::to_string(size(op)));
    }
    std::ostringstream o;
    o << "#if defined(__SSE2__)\n"
      << "    if (__n * " << s0 << " >= (int64_t{1} << 22)) {  // beyond the caches: stream the output\n"
      << "      int64_t __k = 0;\n"
      << "      for (; __k < __n && (reinterpret_cast<uintptr_t>(__d0 + __k * " << s0 << ") & 63) != 0; ++__k) { "
      << element(in_tail) << "}\n"
      << "      constexpr int64_t __block = " << kStreamBlockBytes << " / " << s0 << ";\n"
      << "      alignas(64) char __buf[" << kStreamBlockBytes << "];\n"
      << "      for (; __k + __block <= __n; __k += __block) {\n"
      << "        for (int64_t __j = 0; __j < __block; ++__j) { " << element(in_block) << "}\n"
      << "        for (int __q = 0; __q < " << kStreamBlockBytes << "; __q += 64) kjit_stream::stream64(__d0 + __k * "
      << s0 << " + __q, __buf + __q);\n"
      << "      }\n"
      << "      for (; __k < __n; ++__k) { " << element(in_tail) << "}\n"
      << "      kjit_stream::stream_fence();\n"
      << "      return;\n"
      << "    }\n"
      << "#endif\n";
    return o.str();
  }

  /// Input `b` broadcast (stride 0), the others contiguous.
  std::string broadcast(size_t b) const {
    std::ostringstream o;
    std::string cond;
    std::vector<std::string> addr;
    for (size_t op = 0; op < n_ops_; ++op) {
      std::string s = "__s" + std::to_string(op);
      if (op == b) {
        cond += (cond.empty() ? "" : " && ") + (s + " == 0");
        addr.push_back("__d" + std::to_string(op));
      } else {
        cond += (cond.empty() ? "" : " && ") + (s + " == " + std::to_string(size(op)));
        addr.push_back("__d" + std::to_string(op) + " + __k * " + std::to_string(size(op)));
      }
    }
    o << "  if (" << cond << ") {\n    for (int64_t __k = 0; __k < __n; ++__k) { " << element(addr)
      << "}\n    return;\n  }\n";
    return o.str();
  }

  std::string generic() const {
    std::vector<std::string> addr;
    for (size_t op = 0; op < n_ops_; ++op) {
      addr.push_back("__d" + std::to_string(op) + " + __k * __s" + std::to_string(op));
    }
    return "  for (int64_t __k = 0; __k < __n; ++__k) { " + element(addr) + "}\n";
  }

  /// Extra scalars, each in its own 16-byte slot in the type it travels in
  /// (iterator::extra_travel_type), loaded once: the loop's stores may alias them.
  std::string extras() const {
    std::ostringstream o;
    for (size_t e = 0; e < t_.extra.size(); ++e) {
      o << "  const " << iterator::storage_type(t_.extra[e]) << " __e" << e << " = __ld<"
        << iterator::storage_type(t_.extra[e]) << ">(static_cast<const char*>(__extra) + " << 16 * e << ");\n";
    }
    return o.str();
  }

  std::string body() const {
    std::ostringstream o;
    o << (t_.extra.empty() ? "  (void)__extra;\n" : extras());
    for (size_t op = 0; op < n_ops_; ++op) {
      o << "  char* const __d" << op << " = __data[" << op << "];\n"
        << "  const int64_t __s" << op << " = __strides[" << op << "];\n";
    }
    o << contiguous();
    for (size_t i = 0; i < t_.inputs.size(); ++i) o << broadcast(n_out_ + i);
    o << generic();
    return o.str();
  }

 private:
  const EwKernelTypes& t_;
  size_t n_out_ = 0, n_ops_ = 0;
};

}  // namespace

std::string emit_elementwise_cpu(const std::string& code, const std::string& entry, const EwKernelTypes& types) {
  std::ostringstream o;
  o << "// Generated by kjit: elementwise kernel '" << entry << "' " << types.text() << "\n"
    << "#include <cmath>\n#include <cstdint>\n#include <cstring>\n";
  if (uses_complex(types)) o << "#include <complex>\n";
  o << iterator::wrap_user_code(code) << "#line 1 \"kjit_elementwise_loop\"\n"
    << detail::float16_conversions_text() << detail::stream_stores_text() << "namespace __kjit_ew {\nnamespace {\n"
    << "using kjit_float16::bfloat16_bits;\nusing kjit_float16::bfloat16_value;\n"
    << "using kjit_float16::float16_bits;\nusing kjit_float16::float16_value;\n"
    << "using __C = " << iterator::storage_type(types.compute) << ";\n"
    << cpu::memory_access_text()
    << iterator::entry_apply(iterator::entry_callee(code, entry, "__C"), KernelWriter(types).result_spellings(),
                             "inline __attribute__((always_inline))", "")
    << "}  // namespace\n}  // namespace __kjit_ew\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) void kjit_ew_kernel(char** __data, const int64_t* "
       "__strides,\n"
    << "                                                                       int64_t __n, const void* __extra) {\n"
    << "  using namespace __kjit_ew;\n";
  KernelWriter w(types);
  o << w.body() << "}\n";
  return o.str();
}

}  // namespace kjit
