// The loop reads each input in its own type and converts to the compute type, and
// converts the result to each output's type on store: no temporary copies.
#include "elementwise/codegen_cpu.h"

#include <sstream>

#include "elementwise/promotion.h"
#include "support/embedded_headers.h"

namespace kjit {
namespace {

/// `v` rounded to float16 or bfloat16 and widened back (a double).
std::string round_to_half(EwType half, const std::string& v) {
  if (half == EwType::kFloat16) return "float16_value(float16_bits(static_cast<double>(" + v + ")))";
  return "bfloat16_value(bfloat16_bits(static_cast<double>(" + v + ")))";
}

/// C++ expression loading one element of `t` from byte pointer `p` as compute type
/// C; an input of another type than a half result is first rounded to it (cast to
/// the common dtype, then computed in float).
std::string load_expr(EwType t, const std::string& p, const std::optional<EwType>& half) {
  std::string storage = ew::storage_type(t);
  std::string value = "ld<" + storage + ">(" + p + ")";
  if (t == EwType::kFloat16) value = "float16_value(" + value + ")";
  if (t == EwType::kBFloat16) value = "bfloat16_value(" + value + ")";
  if (half && t != *half) value = round_to_half(*half, value);
  return "static_cast<C>(" + value + ")";
}

/// Stores compute-type value `v` as `t`; a half result goes into another type only
/// after rounding to its own.
std::string store_stmt(EwType t, const std::string& p, std::string v, const std::optional<EwType>& half) {
  std::string storage = ew::storage_type(t);
  if (half && t != *half) v = round_to_half(*half, v);
  if (t == EwType::kFloat16) return "st<uint16_t>(" + p + ", float16_bits(static_cast<double>(" + v + ")));";
  if (t == EwType::kBFloat16) return "st<uint16_t>(" + p + ", bfloat16_bits(static_cast<double>(" + v + ")));";
  return "st<" + storage + ">(" + p + ", static_cast<" + storage + ">(" + v + "));";
}

bool uses_complex(const EwKernelTypes& t) {
  for (EwType x : t.inputs) {
    if (is_complex(x)) return true;
  }
  for (EwType x : t.outputs) {
    if (is_complex(x)) return true;
  }
  return is_complex(t.compute);
}

class KernelWriter {
 public:
  KernelWriter(const std::string& entry, const EwKernelTypes& types) : entry_(entry), t_(types) {
    n_out_ = t_.outputs.size();
    n_ops_ = n_out_ + t_.inputs.size();
  }

  /// One element at byte offsets `off(op)` of each operand.
  std::string element(const std::vector<std::string>& addr) const {
    std::ostringstream o;
    std::string args;
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      args += (args.empty() ? "" : ", ") + load_expr(t_.inputs[i], addr[n_out_ + i], t_.half_result);
    }
    for (int e = 0; e < t_.num_extra; ++e) args += (args.empty() ? "" : ", ") + ("ex[" + std::to_string(e) + "]");
    if (n_out_ == 1) {
      o << "const C r0 = static_cast<C>(" << entry_ << "(" << args << ")); "
        << store_stmt(t_.outputs[0], addr[0], "r0", t_.half_result);
      return o.str();
    }
    std::string refs;
    for (size_t k = 0; k < n_out_; ++k) {
      o << "C r" << k << "{}; ";
      refs += ", r" + std::to_string(k);
    }
    o << entry_ << "(" << args << refs << "); ";
    for (size_t k = 0; k < n_out_; ++k)
      o << store_stmt(t_.outputs[k], addr[k], "r" + std::to_string(k), t_.half_result) << " ";
    return o.str();
  }

  int size(size_t op) const { return ew::size_of(op < n_out_ ? t_.outputs[op] : t_.inputs[op - n_out_]); }

  /// Contiguous: every operand advances by its element size.
  std::string contiguous() const {
    std::ostringstream o;
    std::string cond;
    std::vector<std::string> addr;
    for (size_t op = 0; op < n_ops_; ++op) {
      cond += (cond.empty() ? "" : " && ") + ("s" + std::to_string(op) + " == " + std::to_string(size(op)));
      addr.push_back("d" + std::to_string(op) + " + k * " + std::to_string(size(op)));
    }
    o << "  if (" << cond << ") {\n";
    if (n_out_ == 1) o << streaming();
    o << "    for (int64_t k = 0; k < n; ++k) { " << element(addr) << "}\n    return;\n  }\n";
    return o.str();
  }

  /// Large contiguous runs: compute 1 KB blocks in a local buffer and write them
  /// with non-temporal stores, which skip reading the output into the cache first
  /// (about 20% less memory traffic for a binary op, measured here).
  std::string streaming() const {
    const int s0 = size(0);
    std::vector<std::string> in_block, in_tail, out_block;
    for (size_t op = 0; op < n_ops_; ++op) {
      in_block.push_back(op == 0 ? "buf + j * " + std::to_string(s0)
                                 : "d" + std::to_string(op) + " + (k + j) * " + std::to_string(size(op)));
      in_tail.push_back("d" + std::to_string(op) + " + k * " + std::to_string(size(op)));
    }
    std::ostringstream o;
    o << "#if defined(__SSE2__)\n"
      << "    if (n * " << s0 << " >= (int64_t{1} << 22)) {  // beyond the caches: stream the output\n"
      << "      int64_t k = 0;\n"
      << "      for (; k < n && (reinterpret_cast<uintptr_t>(d0 + k * " << s0 << ") & 15) != 0; ++k) { "
      << element(in_tail) << "}\n"
      << "      constexpr int64_t kBlock = 1024 / " << s0 << ";\n"
      << "      alignas(16) char buf[1024];\n"
      << "      for (; k + kBlock <= n; k += kBlock) {\n"
      << "        for (int64_t j = 0; j < kBlock; ++j) { " << element(in_block) << "}\n"
      << "        for (int q = 0; q < 1024; q += 16)\n"
      << "          _mm_stream_si128(reinterpret_cast<__m128i*>(d0 + k * " << s0
      << " + q), _mm_load_si128(reinterpret_cast<const __m128i*>(buf + q)));\n"
      << "      }\n"
      << "      for (; k < n; ++k) { " << element(in_tail) << "}\n"
      << "      _mm_sfence();\n"
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
      std::string s = "s" + std::to_string(op);
      if (op == b) {
        cond += (cond.empty() ? "" : " && ") + (s + " == 0");
        addr.push_back("d" + std::to_string(op));
      } else {
        cond += (cond.empty() ? "" : " && ") + (s + " == " + std::to_string(size(op)));
        addr.push_back("d" + std::to_string(op) + " + k * " + std::to_string(size(op)));
      }
    }
    o << "  if (" << cond << ") {\n    for (int64_t k = 0; k < n; ++k) { " << element(addr) << "}\n    return;\n  }\n";
    return o.str();
  }

  std::string generic() const {
    std::vector<std::string> addr;
    for (size_t op = 0; op < n_ops_; ++op) {
      addr.push_back("d" + std::to_string(op) + " + k * s" + std::to_string(op));
    }
    return "  for (int64_t k = 0; k < n; ++k) { " + element(addr) + "}\n";
  }

  std::string body() const {
    std::ostringstream o;
    for (size_t op = 0; op < n_ops_; ++op) {
      o << "  char* const d" << op << " = data[" << op << "];\n"
        << "  const int64_t s" << op << " = strides[" << op << "];\n";
    }
    o << contiguous();
    for (size_t i = 0; i < t_.inputs.size(); ++i) o << broadcast(n_out_ + i);
    o << generic();
    return o.str();
  }

 private:
  std::string entry_;
  const EwKernelTypes& t_;
  size_t n_out_ = 0, n_ops_ = 0;
};

}  // namespace

std::string EwKernelTypes::text() const {
  auto list = [](const std::vector<EwType>& v) {
    std::string s;
    for (EwType t : v) s += (s.empty() ? "" : ", ") + std::string(ew_type_name(t));
    return s;
  };
  return "(" + list(inputs) + ") -> " + (outputs.size() == 1 ? list(outputs) : "(" + list(outputs) + ")") +
         ", computing in " + ew_type_name(compute) +
         (half_result ? std::string(" rounded to ") + ew_type_name(*half_result) : std::string());
}

std::string emit_elementwise_cpu(const std::string& code, const std::string& entry, const EwKernelTypes& types) {
  std::ostringstream o;
  o << "// Generated by kjit: elementwise kernel '" << entry << "' " << types.text() << "\n"
    << "#include <cmath>\n#include <cstdint>\n#include <cstring>\n"
    << "#if defined(__SSE2__)\n#include <emmintrin.h>\n#endif\n";
  if (uses_complex(types)) o << "#include <complex>\n";
  o << "#line 1 \"code\"\n"
    << code << "\n"
    << "#line 1 \"kjit_elementwise_loop\"\n"
    << detail::float16_conversions_text() << "namespace kjit_ew {\nnamespace {\n"
    << "using kjit_float16::bfloat16_bits;\nusing kjit_float16::bfloat16_value;\n"
    << "using kjit_float16::float16_bits;\nusing kjit_float16::float16_value;\n"
    << "using C = " << ew::storage_type(types.compute) << ";\n"
    << "// memcpy: operands need not be aligned to their element size.\n"
    << "template <typename S> inline S ld(const char* p) { S v; std::memcpy(&v, p, sizeof(S)); return v; }\n"
    << "template <typename S> inline void st(char* p, S v) { std::memcpy(p, &v, sizeof(S)); }\n"
    << "}  // namespace\n}  // namespace kjit_ew\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) void kjit_ew_kernel(char** data, const int64_t* "
       "strides,\n"
    << "                                                                       int64_t n, const void* extra) {\n"
    << "  using namespace kjit_ew;\n"
    << "  [[maybe_unused]] const C* ex = static_cast<const C*>(extra);\n";
  KernelWriter w(entry, types);
  o << w.body() << "}\n";
  return o.str();
}

}  // namespace kjit
