// kjit::Reduction: a call is planned (reduction_plan), its kernel compiled or
// loaded once per types, then run on the thread pool: across outputs when there
// are many, else across the outermost reduced dim into per-thread partials that
// one thread combines, as TensorIterator's reductions split.
#include "kjit/reduction.h"

#include <dlfcn.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <map>
#include <mutex>

#include "cpu/codegen_reduction.h"
#include "cpu/kernel_library.h"
#include "cpu/loop_driver.h"
#include "cpu/returned_type.h"
#include "cpu/thread_pool.h"
#include "cpu/trap_guard.h"
#include "iterator/entry_call.h"
#include "iterator/overlap.h"
#include "iterator/plan.h"
#include "iterator/plan_cache.h"
#include "iterator/promotion.h"
#include "kjit/build.h"
#include "kjit/detail/reduction_loop.h"
#include "kjit/errors.h"
#include "reduction/reduction_cuda.h"
#include "reduction/reduction_plan.h"
#include "signature/lexer.h"
#include "signature/validate.h"

namespace kjit {
namespace {

using RedLoopFn = void (*)(char**, const int64_t*, int64_t, const void*);

/// A compiled reduction kernel: its loops, and its accumulator's size (the
/// partials' element, which the value-and-index reductions make a struct).
struct RedKernelFn {
  RedLoopFn loops = nullptr;
  int64_t acc_bytes = 0;
  explicit operator bool() const { return loops != nullptr; }
};

/// A part's entry: its last function definition and what it takes.
struct PartEntry {
  std::string name;
  iterator::EntryArity arity;
};

PartEntry entry_of(const std::string& code, const char* part, bool required) {
  PartEntry e{iterator::last_definition(code), {}};
  if (e.name.empty()) {
    if (!required && code.empty()) return e;
    throw SpecError(std::string("kjit.reduction: ") + part +
                    " defines no function; write e.g. 'template <typename T> T add(T a, T b) { return a + b; }'");
  }
  e.arity = iterator::entry_arity(code, e.name);
  return e;
}

/// Whether the entry can take `n` arguments (true when the code does not say).
bool takes(const PartEntry& e, size_t n) { return !e.arity.known || (n >= e.arity.least && n <= e.arity.most); }

/// Throws SpecError when a part's function cannot take `n` arguments.
void check_takes(const PartEntry& e, const char* part, size_t n, const char* what) {
  if (takes(e, n)) return;
  throw SpecError(std::string("kjit.reduction: ") + part + "'s function " + e.name + "(" + e.arity.params +
                  ") must take " + std::to_string(n) + " arguments (" + what + "), it takes " +
                  std::to_string(e.arity.most));
}

/// The identity written as the accumulator: ValueError where it is not a value of
/// it (it would wrap, round or overflow).
void write_identity(const std::string& fn, const EwOperand& identity, EwType acc, iterator::ScalarSlot* slot) {
  const iterator::Kind kind = iterator::kind_of(acc);
  if (identity.scalar == EwOperand::Scalar::kComplex && kind != iterator::Kind::kComplex && identity.imag != 0) {
    throw TypeError(fn + ": the identity is complex but the reduction accumulates in " + ew_type_name(acc));
  }
  if (!iterator::scalar_fits(identity, acc)) {
    const bool whole = identity.scalar == EwOperand::Scalar::kInt || identity.scalar == EwOperand::Scalar::kBool;
    char value[64] = {};  // the shortest text that reads back as the value, as Python's repr
    if (whole) {
      std::to_chars(value, value + sizeof(value) - 1, identity.int_value);
    } else {
      std::to_chars(value, value + sizeof(value) - 1, identity.real);
    }
    throw ValueError(
        fn + ": the identity " + std::string(value) + " is not a value of " + ew_type_name(acc) +
        ", which this call accumulates in (it would " +
        (kind == iterator::Kind::kFloat || kind == iterator::Kind::kComplex ? "overflow" : "wrap or round") +
        "); pass identity=None for a reduction without one (max, min), an identity of the "
        "accumulator's range, or dtype= a type that holds it");
  }
  iterator::write_scalar(identity, acc, slot);
}

/// Partial accumulators a split across rows may hold: beyond this, outer
/// reductions with many outputs split across outputs instead.
constexpr int64_t kMaxPartialBytes = int64_t{8} << 20;

/// Runs a planned problem: on the calling thread below a grain per thread; across
/// outputs when there are many and each reduces along memory; else across the
/// outermost reduced dim into per-part accumulators (an outer reduction: each
/// thread then reads whole rows, along memory), which are combined across outputs.
template <class Call>
void run_split(kjit_red_problem* problem, const red::RedDims& dims, int64_t count, int64_t acc_size, bool outer,
               Call call) {
  const int64_t outputs = dims.outputs;
  const int64_t total = outputs * (count > 0 ? count : 1);
  const int threads =
      static_cast<int>(std::min<int64_t>(get_num_threads(), (total + cpu::kGrainSize - 1) / cpu::kGrainSize));
  const int64_t rows = dims.reduced_shape[0];
  const int64_t many = int64_t{16} * threads, per_thread = int64_t{4} * threads;
  const int parts = static_cast<int>(std::min<int64_t>(rows, per_thread));
  const bool by_rows = parts >= 2 && (outputs < many || (outer && parts * outputs * acc_size <= kMaxPartialBytes));
  if (threads <= 1 || count == 0 || (outputs < many && !by_rows)) {
    const int64_t range[6] = {0, outputs, 0, 0, 0, 0};
    call(range, kRedStore);
    return;
  }
  const int chunks = static_cast<int>(std::min<int64_t>(outputs, per_thread));
  if (!by_rows) {
    cpu::parallel_for(chunks, threads, [&](int k) {
      const int64_t range[6] = {outputs * k / chunks, outputs * (k + 1) / chunks, 0, 0, 0, 0};
      call(range, kRedStore);
    });
    return;
  }
  const size_t bytes = static_cast<size_t>(parts) * static_cast<size_t>(outputs) * static_cast<size_t>(acc_size);
  std::vector<std::max_align_t> partials(bytes / sizeof(std::max_align_t) + 1);
  problem->partials = partials.data();
  cpu::parallel_for(parts, threads, [&](int k) {
    const int64_t range[6] = {0, 0, rows * k / parts, rows * (k + 1) / parts, k, 0};
    call(range, kRedPartial);
  });
  const int finish_chunks = outputs >= many ? chunks : 1;
  cpu::parallel_for(finish_chunks, finish_chunks > 1 ? threads : 1, [&](int k) {
    const int64_t range[6] = {outputs * k / finish_chunks, outputs * (k + 1) / finish_chunks, 0, 0, 0, parts};
    call(range, kRedFinish);
  });
}

}  // namespace

/// What a call's metadata decides, kept in the plan cache: its types and shapes,
/// its loop dims, its kernel, and the byte extents the overlap check needs.
struct RedPlan {
  red::RedCall call;
  EwOutput output;  ///< the output's layout, C-contiguous (what run_allocating allocates)
  red::RedDims dims;
  RedKernelTypes types;
  RedKernelFn kernel;                              ///< CPU: none when the output is empty
  std::shared_ptr<red::CudaReductionKernel> cuda;  ///< CUDA: compiled and loaded at the first launch
  bool guard = false;                              ///< some type holds integers: the kernel may trap
  bool outer = false;               ///< one reduced dim, under an output dim the first input is contiguous along
  iterator::ScalarSlot identity{};  ///< the identity as the accumulator
  /// Per operand (the output first), the bytes it spans relative to its data
  /// pointer (iterator::extent_of); empty for a scalar or an empty tensor.
  std::vector<iterator::Extent> extents;
};

/// What a reduction call's plan depends on: the axes, keepdims, dtype= and the
/// operands' metadata (iterator::encode_call's words); `out` null for a new output.
template <class Sink>
KJIT_INLINE void encode_reduction(Sink* sink, const std::vector<EwOperand>& inputs, const DLTensor* out,
                                  const ReduceAxes& axes, bool keepdims, std::optional<EwType> dtype, Promotion p) {
  static const std::vector<EwOperand> kNoExtra;
  sink->word(axes.all ? ~uint64_t{0} : uint64_t{axes.axes.size()});
  for (int64_t a : axes.axes) sink->word(static_cast<uint64_t>(a));
  sink->word(uint64_t{keepdims} | uint64_t{dtype.has_value()} << 1 |
             (dtype ? static_cast<uint64_t>(*dtype) : uint64_t{0}) << 8);
  iterator::encode_call(sink, inputs, &out, out != nullptr ? 1 : 0, kNoExtra, p);
}

namespace {

/// The output and input `i`, whose byte ranges meet: they may share no byte (the
/// exact test, NumPy's may_share_memory, over the plan's loop dims: interleaved
/// views such as out=x[1::2] beside an input x[::2], or z.imag beside z.real,
/// share none). Out of line: the common call's ranges do not meet.
KJIT_NOINLINE void check_no_shared_byte(const std::string& fn, const RedPlan& plan, char* const* data, size_t i) {
  const red::RedDims& dims = plan.dims;
  const size_t n_ops = plan.types.inputs.size() + 1;
  std::vector<int64_t> shape, out_strides, in_strides;
  auto add = [&](const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
    for (size_t d = 0; d < sizes.size(); ++d) {
      shape.push_back(sizes[d]);
      out_strides.push_back(strides[d * n_ops]);
      in_strides.push_back(strides[d * n_ops + i + 1]);
    }
  };
  add(dims.kept_shape, dims.kept_strides);
  add(dims.reduced_shape, dims.reduced_strides);
  const iterator::Overlap how =
      iterator::may_share_memory(shape, {data[0], out_strides.data(), iterator::size_of(plan.types.output)},
                                 {data[i + 1], in_strides.data(), iterator::size_of(plan.types.inputs[i])});
  if (how == iterator::Overlap::kNo) return;
  if (how == iterator::Overlap::kTooHard) {
    throw ValueError(fn + ": out may overlap input #" + std::to_string(i) +
                     ": their strides are too irregular to decide within kjit's search bound (" +
                     std::to_string(iterator::kOverlapMaxWork) +
                     " steps), so kjit treats them as overlapping; pass "
                     "a separate out");
  }
  throw ValueError(fn + ": out overlaps input #" + std::to_string(i) +
                   " in memory; the reduction would read what it wrote; pass a separate out");
}

/// An out= of a wider floating (or complex) type than the accumulator: the call
/// accumulates in out's type, as NumPy's reductions take their dtype from out and
/// torch's sum(out=) computes in out's. (A narrower out only rounds the result.)
void accumulate_as_out(red::RedCall* c, const DLTensor* out) {
  const std::optional<EwType> t = iterator::from_dl(out->dtype);
  if (!t) return;  // check_out names it
  const iterator::Kind acc = iterator::kind_of(c->acc), kind = iterator::kind_of(*t);
  const bool floating = acc == iterator::Kind::kFloat || acc == iterator::Kind::kComplex;
  if (floating && kind == acc && iterator::size_of(*t) > iterator::size_of(c->acc)) c->acc = *t;
}

/// A call's output: its shape and dtype, C-contiguous.
EwOutput output_layout(const red::RedCall& c) {
  EwOutput out;
  out.shape = c.output_shape;
  out.type = c.result;
  for (size_t d = 0; d < out.shape.size(); ++d) out.order.push_back(static_cast<int>(d));
  return out;
}

}  // namespace

struct Reduction::Impl {
  std::string code;  // every part's definitions, in order reduce, map, post
  RedEntries entries;
  PartEntry map_entry;
  std::optional<EwOperand> identity;
  std::string name;
  ReductionOptions options;
  cpu::KernelTable<RedKernelFn> kernels;  // by kernel types
  std::mutex cuda_mu;
  std::map<std::string, std::shared_ptr<red::CudaReductionKernel>> cuda_kernels;  // by kernel types
  iterator::PlanCache<RedPlan> plans;
  cpu::EntryReturn post_return;                                  // what post_code's function declares it returns
  mutable cpu::KernelTable<std::optional<EwType>> post_deduced;  // its auto result, by accumulator type

  std::shared_ptr<red::CudaReductionKernel> cuda_kernel_for(const RedKernelTypes& types);
  /// Launches on the output's device, on tvm-ffi's current stream for it (torch's).
  void execute_cuda(const RedPlan& plan, const std::vector<EwOperand>& inputs, const std::vector<char*>& data,
                    const DLTensor* out) const;

  RedKernelFn kernel_for(const RedKernelTypes& types);
  /// The result type post_code's function gives from accumulator type `acc`, when
  /// it is not the accumulator's: the type it declares, or for an auto one the
  /// type it returns (asked of the compiler once per accumulator type).
  std::optional<EwType> post_result(EwType acc) const;
  red::RedCall plan(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                    std::optional<EwType> dtype, Promotion p) const;
  /// An arg reduction's types (the input's, an int64 result); ValueError for more than one axis.
  void plan_arg(red::RedCall* c) const;
  void check_out(const red::RedCall& c, const DLTensor* out, Promotion p) const;
  /// An arg reduction's out: an integer type that holds every index of the call.
  void check_index_out(const red::RedCall& c, const DLTensor* out) const;
  std::shared_ptr<const RedPlan> make_plan(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                                           std::optional<EwType> dtype, const DLTensor* out, Promotion p);
  void execute(const RedPlan& plan, const std::vector<EwOperand>& inputs, const DLTensor* out, Promotion p) const;
};

RedKernelFn Reduction::Impl::kernel_for(const RedKernelTypes& types) {
  return kernels.get(types.key(), [&] {
    cpu::CpuKernelBuild build;
    build.name = "kjit_red_" + name;
    build.source = emit_reduction_cpu(code, entries, types);
    // -O2 with the vectoriser: as fast as -O3 on these loops, which -O3 takes seconds to unroll and version.
    build.cflags = {"-ftree-vectorize", "-fvect-cost-model=dynamic", "-fno-math-errno"};
    build.cache_dir = options.build_directory;
    build.verbose = options.verbose;
    build.exports = {"kjit_red_kernel", "kjit_red_acc_bytes"};
    build.what = "kjit.reduction '" + name + "' " + types.text();
    build.lines = "(lines of 'code' are lines of reduce_code, map_code and post_code, one after another)";
    void* lib = cpu::open_cpu_kernel(build);
    RedKernelFn fn;
    fn.loops = reinterpret_cast<RedLoopFn>(dlsym(lib, "kjit_red_kernel"));
    auto acc_bytes = reinterpret_cast<int64_t (*)()>(dlsym(lib, "kjit_red_acc_bytes"));
    internal_check(fn.loops != nullptr && acc_bytes != nullptr, "a reduction library without its exports");
    fn.acc_bytes = acc_bytes();
    return fn;
  });
}

std::shared_ptr<red::CudaReductionKernel> Reduction::Impl::cuda_kernel_for(const RedKernelTypes& types) {
  std::lock_guard<std::mutex> lock(cuda_mu);
  std::shared_ptr<red::CudaReductionKernel>& k = cuda_kernels[types.key()];
  if (!k) k = std::make_shared<red::CudaReductionKernel>(code, entries, types);
  return k;
}

std::optional<EwType> Reduction::Impl::post_result(EwType acc) const {
  if (post_return.declared) return *post_return.declared == acc ? std::nullopt : post_return.declared;
  if (!post_return.deduced) return std::nullopt;
  return post_deduced.get(std::string(1, static_cast<char>('A' + static_cast<int>(acc))), [&] {
    cpu::ReturnedTypeQuery q;
    q.code = code;
    q.entry = entries.post;
    q.compute = acc;
    q.args = {entries.user_accumulator
                  ? std::string("::") + iterator::kUserNamespace + "::" + kUserAccumulator + "<__C>"
                  : std::string("__C"),
              "int64_t"};
    q.cache_dir = options.build_directory;
    q.verbose = options.verbose;
    q.what = "kjit.reduction '" + name + "' post_code";
    q.lines = "(lines of 'code' are lines of reduce_code, map_code and post_code, one after another)";
    return cpu::own_type_of_returned(acc, cpu::returned_type(q));
  });
}

red::RedCall Reduction::Impl::plan(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                                   std::optional<EwType> dtype, Promotion p) const {
  if (inputs.empty()) throw TypeError(name + ": expected at least one input");
  if (entries.map.empty() && inputs.size() != 1) {
    throw TypeError(name + ": a reduction without map_code takes one input, got " + std::to_string(inputs.size()) +
                    "; pass map_code to combine several inputs into one value per element");
  }
  if (!entries.map.empty() && !takes(map_entry, inputs.size())) {
    throw TypeError(name + ": map_code's function " + map_entry.name + "(" + map_entry.arity.params + ") takes " +
                    std::to_string(map_entry.arity.most) + " argument(s), one per input; this call passes " +
                    std::to_string(inputs.size()) + " input(s)");
  }
  if (entries.arg && dtype) {
    throw TypeError(name + ": dtype= does not apply to an arg reduction (its result is an int64 index)");
  }
  red::RedCall c = red::plan_call(name, inputs, axes, keepdims, dtype, options.upcast_integers && !entries.arg, p);
  if (entries.arg) plan_arg(&c);
  if (!dtype && !entries.post.empty()) {
    if (const std::optional<EwType> own = post_result(c.acc)) c.result = *own;
  }
  if (!is_complex(c.acc)) {
    for (size_t i = 0; i < c.call.inputs.size(); ++i) {
      if (is_complex(c.call.inputs[i])) {
        throw TypeError(name + ": input #" + std::to_string(i) + " is complex but the reduction accumulates in " +
                        ew_type_name(c.acc) + " (dtype=): its imaginary part would be lost; pass a complex dtype");
      }
    }
  }
  if (c.count == 0 && entries.arg) {
    throw ValueError(name + ": attempt to get the index of an empty sequence (the reduced axis has no elements)");
  }
  if (c.count == 0 && !identity && !entries.user_identity) {
    throw ValueError(name + ": zero-size array to reduction operation " + name +
                     " which has no identity (the reduced dimensions have no elements; pass identity= to "
                     "kjit.reduction for one)");
  }
  return c;
}

void Reduction::Impl::plan_arg(red::RedCall* c) const {
  size_t reduced = 0;
  for (bool r : c->reduced) reduced += r ? 1 : 0;
  if (reduced > 1) {
    throw ValueError(name + ": an arg reduction takes one axis, this call reduces " + std::to_string(reduced) +
                     " (kjit.arg_reduction's axis=None reduces the flattened input)");
  }
  c->acc = iterator::compute_type(c->call.result);
  c->result = EwType::kInt64;
}

void Reduction::Impl::check_out(const red::RedCall& c, const DLTensor* out, Promotion p) const {
  internal_check(out != nullptr, "a reduction run without an output");
  if (iterator::shape_of(out) != c.output_shape) {
    throw ValueError(name + ": out has shape " + iterator::shape_text(iterator::shape_of(out)) +
                     " but the reduction gives " + iterator::shape_text(c.output_shape) +
                     " (kjit.reduction does not resize outputs)");
  }
  iterator::CallTypes as_output = c.call;
  as_output.shape = c.output_shape;
  as_output.result = c.result;
  as_output.own.clear();
  iterator::check_output(name, 0, out, as_output, p);
  iterator::check_self_overlap(name, &out, 1);
  if (entries.arg) check_index_out(c, out);
}

void Reduction::Impl::check_index_out(const red::RedCall& c, const DLTensor* out) const {
  const std::optional<EwType> t = iterator::from_dl(out->dtype);
  const iterator::Kind kind = t ? iterator::kind_of(*t) : iterator::Kind::kFloat;
  if (kind != iterator::Kind::kInt && kind != iterator::Kind::kUInt) {
    throw TypeError(name + ": out has dtype " + (t ? ew_type_name(*t) : std::string("?")) +
                    ", but an arg reduction writes int64 indices: pass an integer out (int64)");
  }
  const int64_t largest = c.count - 1;
  if (!iterator::scalar_fits(EwOperand::of_int(largest), *t)) {
    throw TypeError(name + ": out has dtype " + ew_type_name(*t) + ", which cannot hold the index " +
                    std::to_string(largest) + " this call may return (" + std::to_string(c.count) +
                    " elements reduced): pass an int64 out");
  }
}

std::shared_ptr<const RedPlan> Reduction::Impl::make_plan(const std::vector<EwOperand>& inputs, const ReduceAxes& axes,
                                                          bool keepdims, std::optional<EwType> dtype,
                                                          const DLTensor* out, Promotion p) {
  auto made = std::make_shared<RedPlan>();
  RedPlan& plan = *made;
  plan.call = this->plan(inputs, axes, keepdims, dtype, p);
  if (out != nullptr && !dtype && !entries.arg) accumulate_as_out(&plan.call, out);
  const red::RedCall& c = plan.call;
  plan.output = output_layout(c);
  if (out != nullptr) check_out(c, out, p);
  const EwType out_type = out != nullptr ? *iterator::from_dl(out->dtype) : c.result;
  plan.types = RedKernelTypes{c.call.inputs, c.acc, out_type};
  const size_t n_ops = inputs.size() + 1;
  const std::vector<int64_t>& shape = c.call.shape;
  // The output's byte strides over the broadcast dims: 0 along reduced ones.
  const std::vector<int64_t> out_strides =
      out != nullptr ? iterator::strides_of(out) : iterator::contiguous_strides(c.output_shape);
  OperandInfo output;
  output.dtype = ew_dl_type(out_type);
  output.element_size = iterator::size_of(out_type);
  output.is_output = true;
  output.strides = DimVector(shape.size(), 0);
  for (size_t d = 0, k = 0; d < shape.size(); ++d) {
    if (!c.reduced[d]) output.strides[shape.size() - 1 - d] = out_strides[k] * output.element_size;
    if (!c.reduced[d] || keepdims) ++k;
  }
  plan.extents.assign(n_ops, iterator::Extent{});
  auto extent_in_bytes = [](const std::vector<int64_t>& shape, std::vector<int64_t> strides, int element_size) {
    for (int64_t& b : strides) b *= element_size;
    return iterator::extent_of(nullptr, shape.data(), strides.data(), shape.size(), element_size);
  };
  plan.extents[0] = extent_in_bytes(c.output_shape, out_strides, iterator::size_of(out_type));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const DLTensor* t = inputs[i].tensor)
      plan.extents[i + 1] = extent_in_bytes(iterator::shape_of(t), iterator::strides_of(t),
                                            iterator::size_of(*iterator::from_dl(t->dtype)));
  }
  detail::Operands operands;
  operands.push_back(std::move(output));
  for (OperandInfo& in : iterator::input_operands(inputs, c.call)) operands.push_back(std::move(in));
  plan.dims = red::plan_dims(shape, c.reduced, std::move(operands));
  if (identity) write_identity(name, *identity, c.acc, &plan.identity);
  const red::RedDims& dims = plan.dims;
  plan.outer = !dims.kept_shape.empty() && dims.reduced_shape.size() == 1 &&
               dims.kept_strides[(dims.kept_shape.size() - 1) * n_ops + 1] == iterator::size_of(plan.types.inputs[0]);
  if (c.call.device.device_type == kDLCUDA) {
    plan.cuda = cuda_kernel_for(plan.types);
  } else if (plan.dims.outputs > 0) {
    plan.kernel = kernel_for(plan.types);
  }
  for (EwType t : plan.types.inputs) plan.guard = plan.guard || is_integer(t) || t == EwType::kBool;
  plan.guard = plan.guard || is_integer(plan.types.acc) || is_integer(plan.types.output);
  return made;
}

void Reduction::Impl::execute_cuda(const RedPlan& plan, const std::vector<EwOperand>& inputs,
                                   const std::vector<char*>& data, const DLTensor* out) const {
  const int device = out->device.device_id;
  std::vector<const unsigned char*> scalars(data.size(), nullptr);  // their bytes travel in the launch's parameter
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].tensor == nullptr) scalars[i + 1] = reinterpret_cast<const unsigned char*>(data[i + 1]);
  }
  std::vector<tvm::ffi::Tensor> scratch;  // alive until the launches are queued; the allocator orders reuse
  auto allocate = [&](size_t bytes) -> char* {
    if (TVMFFIEnvGetDLPackManagedTensorAllocator() == nullptr) return nullptr;
    const int64_t n = static_cast<int64_t>(bytes);
    scratch.push_back(tvm::ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, tvm::ffi::ShapeView(&n, 1),
                                                     DLDataType{kDLUInt, 8, 1}, out->device));
    return static_cast<char*>(scratch.back().data_ptr());
  };
  red::launch_reduction_cuda(*plan.cuda, plan.dims, plan.call.count, plan.outer, data, scalars, plan.identity.bytes,
                             device, TVMFFIEnvGetStream(kDLCUDA, device), allocate);
}

void Reduction::Impl::execute(const RedPlan& plan, const std::vector<EwOperand>& inputs, const DLTensor* out,
                              Promotion p) const {
  if (!plan.kernel && !plan.cuda) return;  // an empty output
  const size_t n_ops = inputs.size() + 1;
  std::vector<char*> data(n_ops);
  std::vector<iterator::ScalarSlot> slots(inputs.size());
  data[0] = static_cast<char*>(out->data) + out->byte_offset;
  // Unsigned sums: an extent below its data pointer wraps around to the right address.
  const uintptr_t o = reinterpret_cast<uintptr_t>(data[0]);
  const iterator::Extent& mine = plan.extents[0];
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const DLTensor* t = inputs[i].tensor) {
      data[i + 1] = static_cast<char*>(t->data) + t->byte_offset;
      const uintptr_t at = reinterpret_cast<uintptr_t>(data[i + 1]);
      const iterator::Extent& theirs = plan.extents[i + 1];
      if (theirs.lo != theirs.hi && at + theirs.lo < o + mine.hi && o + mine.lo < at + theirs.hi) {
        check_no_shared_byte(name, plan, data.data(), i);
      }
    } else {
      iterator::bind_scalar_input(name, inputs[i], plan.call.call, i, p, &slots[i]);
      data[i + 1] = reinterpret_cast<char*>(slots[i].bytes);
    }
  }
  if (plan.cuda) {
    execute_cuda(plan, inputs, data, out);
    return;
  }
  const red::RedDims& dims = plan.dims;
  kjit_red_problem problem{};
  problem.n_operands = static_cast<int32_t>(n_ops);
  problem.n_kept = static_cast<int32_t>(dims.kept_shape.size());
  problem.n_reduced = static_cast<int32_t>(dims.reduced_shape.size());
  problem.kept_shape = dims.kept_shape.data();
  problem.kept_strides = dims.kept_strides.data();
  problem.reduced_shape = dims.reduced_shape.data();
  problem.reduced_strides = dims.reduced_strides.data();
  problem.data = data.data();
  problem.count = plan.call.count;
  problem.identity = plan.identity.bytes;
  auto call = [&](const int64_t* range, int64_t mode) {
    if (plan.guard) {
      cpu::call_trap_guarded([&] { plan.kernel.loops(nullptr, range, mode, &problem); });
    } else {
      plan.kernel.loops(nullptr, range, mode, &problem);
    }
  };
  try {
    run_split(&problem, dims, plan.call.count, plan.kernel.acc_bytes, plan.outer, call);
  } catch (...) {
    cpu::rethrow_user_error(name);
  }
}

namespace {

/// A user accumulator needs map_code (one per element) and post_code (the value
/// from one), and takes its identity as code, not as a number.
void check_user_accumulator(const ReductionCode& code, const std::optional<EwOperand>& identity,
                            const PartEntry& post) {
  const std::string what = "kjit.reduction: accumulator='" + spec_detail::printable(code.accumulator) + "' ";
  if (code.arg) throw SpecError(what + "does not apply to an arg reduction");
  if (code.map.empty()) {
    throw SpecError(what +
                    "needs map_code, whose function makes an accumulator from each element ("
                    "template <typename T> " +
                    code.accumulator + " f(T x) { ... })");
  }
  if (post.name.empty()) {
    throw SpecError(what +
                    "needs post_code, whose function makes the result from one (template <typename T> T "
                    "f(" +
                    code.accumulator + " acc, int64_t n) { ... })");
  }
  if (identity) {
    throw SpecError(what + "takes its identity as a C++ expression of T (identity='" + code.accumulator +
                    "{...}'), or None for none; got a number");
  }
}

/// The alias and identity templates a user accumulator adds to the code.
std::string user_accumulator_code(const ReductionCode& code) {
  if (code.accumulator.empty()) return "";
  std::string out = "\ntemplate <typename T> using " + std::string(kUserAccumulator) + " = " + code.accumulator + ";\n";
  if (!code.identity_code.empty()) {
    out += "template <typename T> inline " + std::string(kUserAccumulator) + "<T> " + kUserIdentity + "() { return " +
           code.identity_code + "; }\n";
  }
  return out;
}

}  // namespace

Reduction::Reduction(const ReductionCode& code, std::optional<EwOperand> identity, const std::string& name,
                     ReductionOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  const PartEntry reduce = entry_of(code.reduce, "reduce_code", true);
  check_takes(reduce, "reduce_code", 2, code.arg ? "the two values it compares" : "the accumulator and a value");
  if (code.arg && (!code.map.empty() || !code.post.empty() || identity)) {
    throw SpecError("kjit.reduction: an arg reduction takes only its comparison (no map_code, post_code or identity)");
  }
  impl.map_entry = entry_of(code.map, "map_code", false);
  const PartEntry post = entry_of(code.post, "post_code", false);
  if (!post.name.empty()) check_takes(post, "post_code", 2, "the accumulator and the count");
  if (!code.accumulator.empty()) check_user_accumulator(code, identity, post);
  if (identity && identity->tensor != nullptr) throw TypeError("kjit.reduction: identity must be a scalar");
  if (!name.empty() && !is_c_identifier(name)) {
    throw SpecError("kjit.reduction: name '" + spec_detail::printable(name) +
                    "' is not a C identifier (letters, digits and '_', not starting with a digit): it names the "
                    "reduction's kernels");
  }
  impl.entries = {reduce.name, impl.map_entry.name,       post.name,
                  code.arg,    !code.accumulator.empty(), !code.identity_code.empty()};
  impl.name = name.empty() ? reduce.name : name;
  impl.identity = identity;
  impl.options = std::move(options);
  impl.code = code.reduce + "\n" + code.map + "\n" + code.post + user_accumulator_code(code);
  if (!post.name.empty()) impl.post_return = cpu::entry_return(code.post, post.name);
}
Reduction::~Reduction() = default;
Reduction::Reduction(Reduction&&) noexcept = default;
Reduction& Reduction::operator=(Reduction&&) noexcept = default;

const std::string& Reduction::name() const { return impl_->name; }

EwOutput Reduction::output_for(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                               std::optional<EwType> dtype, Promotion promotion) const {
  return output_layout(impl_->plan(inputs, axes, keepdims, dtype, promotion));
}

void Reduction::run(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                    std::optional<EwType> dtype, const DLTensor* out, Promotion promotion) {
  internal_check(out != nullptr, "a reduction run without an output");
  Impl& impl = *impl_;
  const iterator::PlanLease<RedPlan> plan =
      impl.plans.lease([&](auto* sink) { encode_reduction(sink, inputs, out, axes, keepdims, dtype, promotion); },
                       [&] { return impl.make_plan(inputs, axes, keepdims, dtype, out, promotion); });
  impl.execute(*plan, inputs, out, promotion);
}

void Reduction::run_allocating(const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                               std::optional<EwType> dtype, const EwAllocate& allocate, Promotion promotion) {
  Impl& impl = *impl_;
  const iterator::PlanLease<RedPlan> plan =
      impl.plans.lease([&](auto* sink) { encode_reduction(sink, inputs, nullptr, axes, keepdims, dtype, promotion); },
                       [&] { return impl.make_plan(inputs, axes, keepdims, dtype, nullptr, promotion); });
  const DLTensor* out = allocate(0, plan->output, plan->call.call.device);
  internal_check(out != nullptr, "a reduction's allocator returned no tensor");
  impl.execute(*plan, inputs, out, promotion);
}

}  // namespace kjit
