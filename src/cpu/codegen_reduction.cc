// Inputs are loaded in their own types and converted to the accumulator type on
// load, as the elementwise loops convert to their compute type; the finished
// value is converted to the output's type on store.
#include "cpu/codegen_reduction.h"

#include <sstream>

#include "cpu/codegen_cpu.h"
#include "iterator/entry_call.h"
#include "iterator/promotion.h"
#include "support/embedded_headers.h"

namespace kjit {
namespace {

bool uses_complex(const RedKernelTypes& t) {
  if (is_complex(t.acc) || is_complex(t.output)) return true;
  for (EwType x : t.inputs) {
    if (is_complex(x)) return true;
  }
  return false;
}

/// The Ops type of kjit_red::Reducer: the map over the inputs at `__in[1..]`, the
/// combine, the identity, and the store (post, then the output's type).
/// The Ops of a value-and-index reduction: the accumulator is a value and its
/// index; of two, the better one wins, and of equals the first (lower index).
std::string arg_ops_struct(const std::string& code, const RedEntries& e, const RedKernelTypes& t) {
  std::ostringstream o;
  const std::string better = iterator::entry_callee(code, e.reduce, "__C");
  o << "struct __Best {\n  __C __v;\n  int64_t __i;\n};\n"
    << "struct __Ops {\n  using __Acc = __Best;\n  using __Value = __C;\n  static constexpr bool __kArg = true;\n"
    << "  static constexpr int __kOperands = 2;\n"
    << "  static constexpr int64_t __kSizes[__kOperands] = {" << iterator::size_of(t.output) << ", "
    << iterator::size_of(t.inputs[0]) << "};\n"
    << "  static inline __attribute__((always_inline)) __C __value(const char* __p) {\n"
    << "    return " << cpu::load_expr(t.inputs[0], "__p", std::nullopt) << ";\n  }\n"
    << "  static inline __attribute__((always_inline)) bool __better(__C __a, __C __b) {\n"
    << "    return " << arg_better_expr(better) << ";\n  }\n"
    << "  static inline __attribute__((always_inline)) __Best __map(const char* const* __in, int64_t __i) {\n"
    << "    return __Best{__value(__in[1]), __i};\n  }\n"
    << "  static inline __attribute__((always_inline)) __Best __combine(__Best __a, __Best __b) {\n"
    << "    if (__better(__b.__v, __a.__v)) return __b;\n"
    << "    if (__better(__a.__v, __b.__v)) return __a;\n"
    << "    return __a.__i <= __b.__i ? __a : __b;\n  }\n"
    << "  static inline __Best __identity(const void*) { return __Best{__C(), -1}; }\n"
    << "  static inline void __store(char* __p, __Best __acc, int64_t) { "
    << cpu::store_stmt(t.output, "__p", "__acc.__i", std::nullopt) << " }\n};\n";
  return o.str();
}

std::string ops_struct(const std::string& code, const RedEntries& e, const RedKernelTypes& t) {
  if (e.arg) return arg_ops_struct(code, e, t);
  std::ostringstream o;
  const size_t n_in = t.inputs.size();
  // The accumulator: the compute type, or the code's own type of it (user_accumulator).
  const std::string user = std::string("::") + iterator::kUserNamespace + "::";
  const std::string acc = e.user_accumulator ? user + kUserAccumulator + "<__C>" : "__C";
  const std::string identity = !e.user_accumulator ? "__ld<__C>(static_cast<const char*>(__p))"
                               : e.user_identity   ? user + kUserIdentity + "<__C>()"
                                                   : "__Acc{}";  // unused: a call with nothing to reduce is refused
  o << "struct __Ops {\n  using __Acc = " << acc << ";\n  static constexpr bool __kArg = false;\n"
    << "  static constexpr int __kOperands = " << n_in + 1 << ";\n"
    << "  static constexpr int64_t __kSizes[__kOperands] = {" << iterator::size_of(t.output);
  for (EwType x : t.inputs) o << ", " << iterator::size_of(x);
  o << "};\n";
  std::string loads;
  for (size_t i = 0; i < n_in; ++i) {
    loads += (i ? ", " : "") + cpu::load_expr(t.inputs[i], "__in[" + std::to_string(i + 1) + "]", std::nullopt);
  }
  const std::string mapped = e.map.empty() ? loads : iterator::entry_callee(code, e.map, "__C") + "(" + loads + ")";
  o << "  static inline __attribute__((always_inline)) __Acc __map(const char* const* __in, int64_t) {\n"
    << "    return static_cast<__Acc>(" << mapped << ");\n  }\n"
    << "  static inline __attribute__((always_inline)) __Acc __combine(__Acc __a, __Acc __b) {\n"
    << "    return static_cast<__Acc>(" << iterator::entry_callee(code, e.reduce, "__C") << "(__a, __b));\n  }\n"
    << "  static inline __Acc __identity(const void* __p) { (void)__p; return " << identity << "; }\n"
    << "  static inline void __store(char* __p, __Acc __acc, int64_t __n) {\n";
  if (e.post.empty()) {
    o << "    (void)__n;\n    " << cpu::store_stmt(t.output, "__p", "__acc", std::nullopt) << "\n";
  } else {
    o << "    "
      << cpu::store_stmt(t.output, "__p", iterator::entry_callee(code, e.post, "__C") + "(__acc, __n)", std::nullopt)
      << "\n";
  }
  o << "  }\n};\n";
  return o.str();
}

}  // namespace

std::string emit_reduction_cpu(const std::string& code, const RedEntries& entries, const RedKernelTypes& types) {
  std::ostringstream o;
  o << cpu::kernel_source_head("reduction '" + entries.reduce + "' " + types.text(), code, uses_complex(types),
                               "kjit_reduction_loop", detail::reduction_loop_text())
    << "namespace __kjit_red {\nnamespace {\n"
    << cpu::kernel_namespace_head(types.acc) << ops_struct(code, entries, types)
    << "}  // namespace\n}  // namespace __kjit_red\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) void kjit_red_kernel(char**, const int64_t* __range,\n"
    << "                                                                        int64_t __mode, const void* __problem) "
       "{\n"
    << "  kjit_red::kjit_red_run<__kjit_red::__Ops>(__range, __mode, __problem);\n"
    << "}\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) int64_t kjit_red_acc_bytes() {\n"
    << "  return sizeof(__kjit_red::__Ops::__Acc);\n}\n";
  return o.str();
}

}  // namespace kjit
