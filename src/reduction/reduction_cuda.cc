// Loads convert each input from its stored type to the accumulator type, and the
// store converts the finished value to the output's type, as the CPU kernels do;
// the conversions are the elementwise CUDA kernels' (cuda/codegen_cuda.h).
#include "reduction/reduction_cuda.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "cuda/codegen_cuda.h"
#include "cuda/cuda_launch.h"
#include "cuda/nvrtc.h"
#include "iterator/entry_call.h"
#include "iterator/promotion.h"
#include "support/embedded_headers.h"

namespace kjit {
namespace {

using cuda::cuda_cast_value;
using cuda::cuda_device_type;
using cuda::cuda_narrow;
using cuda::cuda_widen;
using cuda::cuda_widened;

/// Input `i` (operand i + 1) at `__in[i + 1]` as the accumulator type `acc`.
std::string load_input(EwType t, size_t i, EwType acc) {
  const std::string raw = "*reinterpret_cast<const " + cuda_device_type(t) + "*>(__in[" + std::to_string(i + 1) + "])";
  return cuda_cast_value(cuda_widened(t), acc, cuda_widen(t, raw));
}

/// Stores `v` (a value of type `from`) into the output of type `out` at `__p`.
std::string store_output(EwType out, EwType from, const std::string& v) {
  return "*reinterpret_cast<" + cuda_device_type(out) +
         "*>(__p) = " + cuda_narrow(out, cuda_cast_value(from, cuda_widened(out), v)) + ";";
}

constexpr const char* kDevice = "  __device__ static __forceinline__ ";

std::string arg_ops_struct(const std::string& code, const RedEntries& e, const RedKernelTypes& t) {
  const EwType c = t.acc;
  const std::string cs = cuda_device_type(c);
  std::ostringstream o;
  o << "struct __Best {\n  " << cs << " __v;\n  int64_t __i;\n};\n"
    << "struct __Ops {\n  using __Acc = __Best;\n"
    << kDevice << "bool __better(" << cs << " __a, " << cs << " __b) { return "
    << arg_better_expr(iterator::entry_callee(code, e.reduce, cs)) << "; }\n"
    << kDevice << "__Best __map(char* const* __in, int64_t __i) { return __Best{" << load_input(t.inputs[0], 0, c)
    << ", __i}; }\n"
    << kDevice << "__Best __combine(__Best __a, __Best __b) {\n"
    << "    if (__better(__b.__v, __a.__v)) return __b;\n    if (__better(__a.__v, __b.__v)) return __a;\n"
    << "    return __a.__i <= __b.__i ? __a : __b;\n  }\n"
    << kDevice << "__Best __identity(const unsigned char*) { return __Best{" << cs << "(), -1}; }\n"
    << kDevice << "void __store(char* __p, __Best __acc, int64_t) { "
    << store_output(t.output, EwType::kInt64, "__acc.__i") << " }\n};\n";
  return o.str();
}

std::string ops_struct(const std::string& code, const RedEntries& e, const RedKernelTypes& t) {
  if (e.arg) return arg_ops_struct(code, e, t);
  const std::string acc = cuda_device_type(t.acc);  // the code's T
  const std::string user = std::string("::") + iterator::kUserNamespace + "::";
  // The accumulator: T, or the code's own type of it (a user accumulator).
  const std::string acc_type = e.user_accumulator ? user + kUserAccumulator + "<" + acc + ">" : acc;
  const std::string identity = !e.user_accumulator ? "*reinterpret_cast<const __Acc*>(__p)"
                               : e.user_identity   ? user + kUserIdentity + "<" + acc + ">()"
                                                   : "__Acc{}";  // unused: a call with nothing to reduce is refused
  std::string loads;
  for (size_t i = 0; i < t.inputs.size(); ++i) loads += (i ? ", " : "") + load_input(t.inputs[i], i, t.acc);
  const std::string mapped = e.map.empty() ? loads : iterator::entry_callee(code, e.map, acc) + "(" + loads + ")";
  std::ostringstream o;
  o << "struct __Ops {\n  using __Acc = " << acc_type << ";\n"
    << kDevice << "__Acc __map(char* const* __in, int64_t) { return static_cast<__Acc>(" << mapped << "); }\n"
    << kDevice << "__Acc __combine(__Acc __a, __Acc __b) { return static_cast<__Acc>("
    << iterator::entry_callee(code, e.reduce, acc) << "(__a, __b)); }\n"
    << kDevice << "__Acc __identity(const unsigned char* __p) { (void)__p; return " << identity << "; }\n"
    << kDevice << "void __store(char* __p, __Acc __acc, int64_t __n) {\n";
  if (e.post.empty()) {
    o << "    (void)__n;\n    " << store_output(t.output, t.acc, "__acc") << "\n";
  } else {
    o << "    " << store_output(t.output, t.acc, iterator::entry_callee(code, e.post, acc) + "(__acc, __n)") << "\n";
  }
  o << "  }\n};\n";
  return o.str();
}

/// The kernel parameter's field offsets, as the device struct lays them out.
struct ProblemLayout {
  size_t kept_shape = 40, reduced_shape = 40 + 8 * red::kCudaMaxDims, kept_strides = 40 + 16 * red::kCudaMaxDims;
  size_t reduced_strides, data, partials, identity, scalars, bytes;
  explicit ProblemLayout(int n_ops) {
    const size_t strides = 8 * static_cast<size_t>(red::kCudaMaxDims) * n_ops;
    reduced_strides = kept_strides + strides;
    data = reduced_strides + strides;
    partials = data + 8 * static_cast<size_t>(n_ops);
    identity = (partials + 8 + 15) / 16 * 16;
    scalars = identity + 16;
    bytes = scalars + 16 * static_cast<size_t>(n_ops);
  }
};

template <typename T>
void put(std::vector<unsigned char>* out, size_t at, T v) {
  std::memcpy(out->data() + at, &v, sizeof(v));
}

}  // namespace

std::string emit_reduction_cuda(const std::string& code, const RedEntries& entries, const RedKernelTypes& types) {
  internal_check(!iterator::is_half(types.acc), "a half accumulator in a CUDA reduction (halves accumulate in float)");
  const int n_ops = static_cast<int>(types.inputs.size()) + 1;
  std::ostringstream o;
  o << "// Generated by kjit: CUDA reduction '" << entries.reduce << "' " << types.text() << "\n"
    << "#line 1 \"kjit_cuda_prelude\"\n"
    << detail::elementwise_cuda_prelude_text() << "#line 1 \"kjit_reduction_cuda\"\n"
    << "#define KJIT_RED_OPS " << n_ops << "\n"
    << detail::reduction_cuda_text() << iterator::wrap_user_code(code)  // kjit's headers before the user's macros
    << "#line 1 \"kjit_reduction_cuda\"\n"
    << "namespace __kjit_red {\n"
    << ops_struct(code, entries, types) << "}  // namespace __kjit_red\n"
    << "static_assert(sizeof(kjit_red_cuda_problem) == " << ProblemLayout(n_ops).bytes
    << ", \"the host packs this layout (reduction_cuda.cc)\");\n"
    << "static_assert(sizeof(__kjit_red::__Ops::__Acc) " << (entries.user_accumulator ? "<= " : "== ")
    << red::cuda_acc_bytes(entries, types)
    << (entries.user_accumulator
            ? ", \"kjit.reduction: a CUDA reduction's accumulator= type takes at most " +
                  std::to_string(red::kCudaUserAccumulatorBytes) + " bytes (the host sizes the partials so)\");\n"
            : ", \"the host sizes the partials so\");\n")
    << "extern \"C\" __global__ void kjit_red_partial(kjit_red_cuda_problem __p) {\n"
    << "  kjit_red_cuda_partial<__kjit_red::__Ops>(\n"
    << "      __p, static_cast<int64_t>(kjit_block_index()) * KJIT_RED_CUDA_THREADS + "
       "static_cast<int64_t>(kjit_thread_index()));\n"
    << "}\n"
    << "extern \"C\" __global__ void kjit_red_finish(kjit_red_cuda_problem __p) {\n"
    << "  kjit_red_cuda_finish<__kjit_red::__Ops>(\n"
    << "      __p, static_cast<int64_t>(kjit_block_index()) * KJIT_RED_CUDA_THREADS + "
       "static_cast<int64_t>(kjit_thread_index()));\n"
    << "}\n";
  return o.str();
}

namespace red {

int64_t cuda_acc_bytes(const RedEntries& entries, const RedKernelTypes& types) {
  if (entries.arg) return 16;                                      // {value of at most 8 bytes, int64 index}
  if (entries.user_accumulator) return kCudaUserAccumulatorBytes;  // an upper bound the kernel asserts
  return iterator::size_of(types.acc);
}

CudaSplit cuda_split(int64_t outputs, int64_t count, bool outer, bool partials_allowed) {
  CudaSplit s;
  s.outputs_fastest = outer;
  constexpr int64_t kFillThreads = int64_t{1} << 17;  // ~ what a large GPU keeps resident
  constexpr int64_t kLeastPerPart = 32;
  if (!partials_allowed || outputs <= 0 || outputs >= kFillThreads || count <= kLeastPerPart) return s;
  s.parts = std::min(
      {kCudaMaxParts, (count + kLeastPerPart - 1) / kLeastPerPart, std::max<int64_t>(1, kFillThreads / outputs)});
  return s;
}

size_t cuda_problem_bytes(int n_operands) { return ProblemLayout(n_operands).bytes; }

std::vector<unsigned char> pack_cuda_problem(const CudaProblem& p) {
  const RedDims& d = *p.dims;
  const int n_ops = static_cast<int>(p.data.size());
  const int n_kept = static_cast<int>(d.kept_shape.size()), n_reduced = static_cast<int>(d.reduced_shape.size());
  if (n_kept > kCudaMaxDims || n_reduced > kCudaMaxDims) {
    throw NotImplementedError("kjit.reduction: a CUDA reduction takes at most " + std::to_string(kCudaMaxDims) +
                              " kept and " + std::to_string(kCudaMaxDims) +
                              " reduced dims after coalescing; this call has " + std::to_string(n_kept) + " and " +
                              std::to_string(n_reduced));
  }
  const ProblemLayout l(n_ops);
  std::vector<unsigned char> out(l.bytes, 0);
  put(&out, 0, d.outputs);
  put(&out, 8, p.count);
  put(&out, 16, p.split.parts);
  put(&out, 24, static_cast<int32_t>(n_kept));
  put(&out, 28, static_cast<int32_t>(n_reduced));
  put(&out, 32, static_cast<int32_t>(p.split.outputs_fastest ? 1 : 0));
  // Each group's shape, then its strides [dim][operand]; the layout has room for kCudaMaxDims dims.
  auto put_group = [&](size_t shape_at, size_t strides_at, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides) {
    const size_t ops = static_cast<size_t>(n_ops);
    for (size_t k = 0; k < shape.size(); ++k) {
      put(&out, shape_at + 8 * k, shape[k]);
      for (size_t op = 0; op < ops; ++op) put(&out, strides_at + 8 * (k * ops + op), strides[k * ops + op]);
    }
  };
  put_group(l.kept_shape, l.kept_strides, d.kept_shape, d.kept_strides);
  put_group(l.reduced_shape, l.reduced_strides, d.reduced_shape, d.reduced_strides);
  internal_check(p.scalars.size() == p.data.size(), "a CUDA problem without a scalar entry per operand");
  for (size_t op = 0; op < p.data.size(); ++op) {
    put(&out, l.data + 8 * op, p.scalars[op] != nullptr ? nullptr : p.data[op]);
    if (p.scalars[op] != nullptr) std::memcpy(out.data() + l.scalars + 16 * op, p.scalars[op], 16);
  }
  put(&out, l.partials, p.partials);
  if (p.identity != nullptr) std::memcpy(out.data() + l.identity, p.identity, 16);
  return out;
}

CudaReductionKernel::CudaReductionKernel(std::string code, RedEntries entries, RedKernelTypes types)
    : code_(std::move(code)), entries_(std::move(entries)), types_(std::move(types)) {}

void* CudaReductionKernel::function(const std::string& name, int cc) {
  const cuda::CudaDriver& d = cuda::cuda_driver();
  std::lock_guard<std::mutex> lock(mu_);
  void* ctx = nullptr;
  cuda::check_cuda(d.ctx_get_current(&ctx), "cuCtxGetCurrent");
  auto found = functions_.find({ctx, name});
  if (found != functions_.end()) return found->second;
  void*& module = modules_[ctx];
  if (module == nullptr) {
    const std::string arch = cuda::nvrtc_arch_for(cc, cuda::nvrtc_supported_archs());
    auto failed = failed_.find(arch);
    if (failed != failed_.end()) throw failed->second;  // a failing call does not recompile
    std::string& image = images_[arch];
    try {
      if (image.empty()) image = cuda::compile_cuda(emit_reduction_cuda(code_, entries_, types_), arch).binary;
    } catch (const CompileError& e) {
      failed_.emplace(arch, e);
      throw;
    }
    cuda::check_cuda(d.module_load_data(&module, image.c_str()), "cuModuleLoadData");
  }
  void* fn = nullptr;
  cuda::check_cuda(d.module_get_function(&fn, module, name.c_str()), "cuModuleGetFunction");
  return functions_[{ctx, name}] = fn;
}

void launch_reduction_cuda(CudaReductionKernel& kernel, const RedDims& dims, int64_t count, bool outer,
                           const std::vector<char*>& data, const std::vector<const unsigned char*>& scalars,
                           const unsigned char* identity, int device, void* stream,
                           const std::function<char*(size_t)>& scratch) {
  const cuda::CudaDriver& d = cuda::cuda_driver();  // first: no driver, no compile
  if (dims.outputs == 0) return;
  CudaProblem p;
  p.dims = &dims;
  p.count = count;
  p.data = data;
  p.scalars = scalars;
  p.identity = identity;
  p.split = cuda_split(dims.outputs, count, outer, true);
  if (p.split.parts > 1) {
    p.partials = scratch(static_cast<size_t>(dims.outputs * p.split.parts * kernel.acc_bytes()));
    if (p.partials == nullptr) p.split = cuda_split(dims.outputs, count, outer, false);
  }
  std::vector<unsigned char> packed = pack_cuda_problem(p);
  cuda::CudaContextGuard guard(device);
  const int cc = cuda::cuda_compute_capability(device);
  void* params[] = {packed.data()};
  auto launch = [&](const char* name, int64_t threads) {
    const int64_t blocks = (threads + kCudaThreads - 1) / kCudaThreads;
    if (blocks > INT32_MAX) {  // cuLaunchKernel's grid.x limit
      throw NotImplementedError("kjit.reduction: a CUDA reduction of " + std::to_string(dims.outputs) +
                                " outputs needs more than 2^31 - 1 blocks of " + std::to_string(kCudaThreads) +
                                " threads");
    }
    const auto grid = static_cast<unsigned>(blocks);
    cuda::check_cuda(
        d.launch_kernel(kernel.function(name, cc), grid, 1, 1, kCudaThreads, 1, 1, 0, stream, params, nullptr),
        "cuLaunchKernel");
  };
  launch("kjit_red_partial", dims.outputs * p.split.parts);
  if (p.split.parts > 1) launch("kjit_red_finish", dims.outputs);
}

}  // namespace red
}  // namespace kjit
