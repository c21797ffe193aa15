// kjit::Elementwise: one call path for every kind of call. A call finds its plan
// in the engine's plan cache (made on a miss, with the kernel for its types
// compiled or loaded), allocates new outputs from the plan's layouts if it has
// none, then runs the plan on its data.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "cpu/codegen_cpu.h"
#include "cpu/kernel_library.h"
#include "cpu/returned_type.h"
#include "cpu/trap_guard.h"
#include "cuda/cuda_launch.h"
#include "declare/cpp_signature.h"
#include "elementwise/call_plan.h"
#include "iterator/entry_call.h"
#include "iterator/plan_cache.h"
#include "iterator/promotion.h"
#include "kjit/build.h"
#include "kjit/elementwise.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"
#include "signature/lexer.h"
#include "signature/validate.h"
#include "support/closest_name.h"

namespace kjit {
namespace {

/// Per output, the dtype the entry's definition declares for it: its return type
/// (one output returned), or its trailing `T&` parameters' types (outputs written
/// through references). nullopt where it declares none (the template parameter).
/// Overloads that disagree declare none.
std::vector<std::optional<EwType>> declared_output_types(const std::string& code, const std::string& entry,
                                                         int num_outputs) {
  std::vector<std::optional<EwType>> out(num_outputs);
  bool first = true;
  for (const CppFunction& f : find_cpp_functions(code, entry)) {
    if (!f.is_definition) continue;
    std::vector<std::optional<EwType>> these(num_outputs);
    if (f.return_type != "void") {
      if (num_outputs == 1) these[0] = cpu::dtype_of_cpp_type(f.return_type);
    } else if (f.params.size() >= static_cast<size_t>(num_outputs)) {
      for (int k = 0; k < num_outputs; ++k) {
        const CppParam& p = f.params[f.params.size() - num_outputs + k];
        if (p.is_reference && !p.is_const) these[k] = cpu::dtype_of_cpp_type(p.base);
      }
    }
    if (!first && these != out) return std::vector<std::optional<EwType>>(num_outputs);
    out = these;
    first = false;
  }
  return out;
}

std::string count_of(size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

/// Throws TypeError naming the counts when a call passes more or fewer arguments
/// than the entry takes (before its kernel is compiled).
void check_arity(const std::string& fn, const iterator::EntryArity& arity, size_t n_in, size_t n_extra, size_t n_out) {
  if (!arity.known) return;
  const size_t passed = n_in + n_extra + (arity.outputs_by_reference ? n_out : 0);
  if (passed >= arity.least && passed <= arity.most) return;
  const std::string takes = arity.least == arity.most
                                ? count_of(arity.most, "argument")
                                : std::to_string(arity.least) + " to " + std::to_string(arity.most) + " arguments";
  std::string message = fn + ": the entry function " + fn + "(" + arity.params + ") takes " + takes +
                        ": the call's inputs, then its extra arguments (keywords, in order)";
  if (arity.outputs_by_reference) message += ", then its " + count_of(n_out, "output") + " by reference";
  message += "; this call passes " + count_of(n_in, "input") + " and " + count_of(n_extra, "extra argument");
  throw TypeError(message);
}

}  // namespace

struct Elementwise::Impl {
  std::string code;
  std::string entry;  // the entry function's name
  int num_outputs = 1;
  ElementwiseOptions options;
  EwCompute compute;           // options.compute, raised to kFloat for an entry declared to return float
  iterator::EntryArity arity;  // what a call must pass (inputs, extras, outputs by reference)
  bool deduces = false;        // one output, whose type the compiler deduces (an `auto` entry)
  cpu::KernelTable<std::optional<EwType>> own_returned;  // deduces: the output's own type, by compute type
  cpu::KernelTable<KernelFn> kernels;                    // by kernel types: a failing call does not recompile
  std::mutex mu;                                         // guards cuda_kernels
  std::map<std::string, std::shared_ptr<cuda::CudaElementwiseKernel>> cuda_kernels;  // by kernel types
  iterator::PlanCache<ew::CallPlan> plans;

  KernelFn kernel_for(const EwKernelTypes& types);
  /// The compute rule of a call: for an entry whose return type the compiler
  /// deduces, with its output's own type for the call's compute type.
  EwCompute compute_for(const std::vector<EwOperand>& inputs, Promotion promotion);
  std::shared_ptr<cuda::CudaElementwiseKernel> cuda_kernel_for(const EwKernelTypes& types);
  /// A new plan with its kernel attached, ready for the cache.
  std::shared_ptr<const ew::CallPlan> with_kernel(std::unique_ptr<ew::CallPlan> plan);
  /// run's path: into the caller's outputs, which the plan's key includes.
  void run_into(const std::vector<EwOperand>& inputs, const DLTensor* const* outputs, size_t n_out,
                const std::vector<EwOperand>& extra, Promotion promotion);
};

namespace {

/// One byte per type, then counts: short enough for the small-string buffer.
std::string types_key(const EwKernelTypes& types) {
  std::string key;
  for (EwType t : types.outputs) key += static_cast<char>('A' + static_cast<int>(t));
  key += '|';
  for (EwType t : types.inputs) key += static_cast<char>('A' + static_cast<int>(t));
  key += static_cast<char>('A' + static_cast<int>(types.compute));
  key += '|';
  for (EwType t : types.extra) key += static_cast<char>('A' + static_cast<int>(t));
  if (types.half_result) key += static_cast<char>('a' + static_cast<int>(*types.half_result));
  for (bool v : types.by_value) key += v ? 'v' : 't';  // which inputs are Python scalars
  if (!types.results.empty()) key += '>';
  for (EwType t : types.results) key += static_cast<char>('A' + static_cast<int>(t));
  return key;
}

/// `name=` that the code does not define: a SpecError naming what it does define
/// (with a did-you-mean) rather than a compile error in the generated loop. Code
/// with macros may define functions the scanner cannot see: the compiler decides.
void check_entry_defined(const std::string& code, const std::string& name) {
  if (!find_cpp_functions(code, name).empty() || code.find("#define") != std::string::npos) return;
  std::vector<std::string> defined;
  for (const CppFunction& fn : find_all_cpp_functions(code)) {
    if (fn.is_definition && std::find(defined.begin(), defined.end(), fn.name) == defined.end()) {
      defined.push_back(fn.name);
    }
  }
  std::string listed;
  for (const std::string& d : defined) listed += (listed.empty() ? "" : ", ") + d;
  const std::string best = closest_name(name, defined);
  throw SpecError("kjit.elementwise: name='" + name + "' is not a function the code defines (" +
                  (defined.empty() ? std::string("it defines none") : "it defines " + listed) +
                  (best.empty() ? "" : "; did you mean '" + best + "'?") + ")");
}

std::string entry_of(const std::string& code, const std::string& name) {
  if (!name.empty()) {
    // It names the entry in generated code and the kernel's cache files.
    if (!is_c_identifier(name)) {
      throw SpecError("kjit.elementwise: name '" + spec_detail::printable(name) +
                      "' is not a C identifier (letters, digits and '_', not starting with a digit): it names the "
                      "entry function of the code");
    }
    check_entry_defined(code, name);
    return name;
  }
  std::string last = iterator::last_definition(code);
  if (last.empty()) {
    throw SpecError(
        "kjit.elementwise: no function definition found in the code string; write e.g. "
        "'template <typename T> T add(T a, T b) { return a + b; }' or pass name=");
  }
  return last;
}

/// Whether a declared return type is a real floating type: an entry that returns
/// one for integer inputs would have its result truncated.
bool is_floating_return(std::string t) {
  const std::string prefix = "const ";
  if (t.compare(0, prefix.size(), prefix) == 0) t = t.substr(prefix.size());
  return t == "float" || t == "double" || t == "long double";
}

/// The compute rule: as given, but an entry declared to return float or double
/// computes integer inputs in a floating type (kFloat) instead of truncating.
EwCompute compute_rule(const std::string& code, const std::string& entry, EwCompute given) {
  if (given.rule != EwCompute::Rule::kPromoted) return given;
  for (const CppFunction& f : find_cpp_functions(code, entry)) {
    if (f.is_definition && is_floating_return(f.return_type)) given.rule = EwCompute::Rule::kFloat;
  }
  return given;
}

void check_extra_are_scalars(const std::string& fn, const std::vector<EwOperand>& extra) {
  for (size_t e = 0; e < extra.size(); ++e) {
    if (extra[e].tensor != nullptr)
      throw TypeError(fn + ": extra argument #" + std::to_string(e) + " must be a scalar");
  }
}

/// An allocating call's outputs: on the stack for up to four.
class NewOutputs {
 public:
  explicit NewOutputs(size_t n) : data_(n <= 4 ? inline_ : (heap_.resize(n), heap_.data())) {}
  const DLTensor** data() { return data_; }

 private:
  const DLTensor* inline_[4];
  std::vector<const DLTensor*> heap_;
  const DLTensor** data_;
};

}  // namespace

std::shared_ptr<cuda::CudaElementwiseKernel> Elementwise::Impl::cuda_kernel_for(const EwKernelTypes& types) {
  std::string key = types_key(types);
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cuda_kernels[key];
  if (!slot) slot = std::make_shared<cuda::CudaElementwiseKernel>(code, entry, types);  // compiled at first launch
  return slot;
}

KernelFn Elementwise::Impl::kernel_for(const EwKernelTypes& types) {
  return kernels.get(types_key(types), [&] {
    cpu::CpuKernelBuild build;
    build.name = "kjit_ew_" + entry;
    build.source = emit_elementwise_cpu(code, entry, types);
    build.cflags = {"-O3", "-fno-math-errno"};
    build.cache_dir = options.build_directory;
    build.verbose = options.verbose;
    build.exports = {"kjit_ew_kernel"};
    build.what = "kjit.elementwise '" + entry + "' " + types.text();
    build.lines = "(lines of 'code' are lines of the computation string)";
    auto fn = reinterpret_cast<KernelFn>(dlsym(cpu::open_cpu_kernel(build), "kjit_ew_kernel"));
    internal_check(fn != nullptr, "an elementwise library without kjit_ew_kernel");
    return fn;
  });
}

EwCompute Elementwise::Impl::compute_for(const std::vector<EwOperand>& inputs, Promotion promotion) {
  if (!deduces) return compute;
  const EwType c = iterator::compute_type(iterator::resolve_types(entry, inputs, promotion, compute).result);
  const std::optional<EwType> own = own_returned.get(std::string(1, static_cast<char>('A' + static_cast<int>(c))), [&] {
    cpu::ReturnedTypeQuery q;
    q.code = code;
    q.entry = entry;
    q.compute = c;
    q.args.assign(arity.known ? std::min<size_t>(inputs.size(), arity.most) : inputs.size(), "__C");
    q.max_extras = arity.known ? static_cast<int>(arity.most - q.args.size()) : 8;
    q.cache_dir = options.build_directory;
    q.verbose = options.verbose;
    q.what = "kjit.elementwise '" + entry + "'";
    q.lines = "(lines of 'code' are lines of the computation string)";
    return cpu::own_type_of_returned(c, cpu::returned_type(q));
  });
  if (!own) return compute;
  EwCompute with = compute;
  with.own_outputs[0] = own;
  return with;
}

std::shared_ptr<const ew::CallPlan> Elementwise::Impl::with_kernel(std::unique_ptr<ew::CallPlan> plan) {
  check_arity(entry, arity, plan->kernel_types.inputs.size(), plan->kernel_types.extra.size(),
              plan->kernel_types.outputs.size());
  if (plan->loop.lane == cpu::Lane::kCuda) {
    plan->cuda = cuda_kernel_for(plan->kernel_types);
  } else {
    plan->kernel = kernel_for(plan->kernel_types);
    plan->guard_traps = cpu::needs_trap_guard(plan->kernel_types);
  }
  return std::shared_ptr<const ew::CallPlan>(std::move(plan));
}

void Elementwise::Impl::run_into(const std::vector<EwOperand>& inputs, const DLTensor* const* outputs, size_t n_out,
                                 const std::vector<EwOperand>& extra, Promotion promotion) {
  const iterator::PlanLease<ew::CallPlan> plan =
      plans.lease([&](auto* sink) { iterator::encode_call(sink, inputs, outputs, n_out, extra, promotion); },
                  [&] {
                    return with_kernel(
                        ew::plan_call(entry, inputs, outputs, n_out, extra, promotion, compute_for(inputs, promotion)));
                  });
  ew::run_plan(entry, *plan, inputs, outputs, extra, promotion, /*fresh_outputs=*/false);
}

Elementwise::Elementwise(std::string code, const std::string& name, int num_outputs, ElementwiseOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (num_outputs < 1)
    throw SpecError("kjit.elementwise: num_outputs must be at least 1, got " + std::to_string(num_outputs));
  impl_->entry = entry_of(code, name);
  impl_->compute = compute_rule(code, impl_->entry, options.compute);
  impl_->arity = iterator::entry_arity(code, impl_->entry);
  impl_->compute.own_outputs = declared_output_types(code, impl_->entry, num_outputs);
  impl_->deduces = num_outputs == 1 && cpu::entry_return(code, impl_->entry).deduced;
  impl_->code = std::move(code);
  impl_->num_outputs = num_outputs;
  impl_->options = std::move(options);
}
Elementwise::~Elementwise() = default;
Elementwise::Elementwise(Elementwise&&) noexcept = default;
Elementwise& Elementwise::operator=(Elementwise&&) noexcept = default;

const std::string& Elementwise::name() const { return impl_->entry; }
int Elementwise::num_outputs() const { return impl_->num_outputs; }

std::vector<EwOutput> Elementwise::outputs_for(const std::vector<EwOperand>& inputs, Promotion promotion) const {
  return ew::output_layouts(
      iterator::resolve_types(impl_->entry, inputs, promotion, impl_->compute_for(inputs, promotion)), inputs,
      impl_->num_outputs);
}

void Elementwise::run(const std::vector<EwOperand>& inputs, const std::vector<const DLTensor*>& outputs,
                      const std::vector<EwOperand>& extra, Promotion promotion) {
  if (outputs.size() != static_cast<size_t>(impl_->num_outputs)) {
    throw TypeError(impl_->entry + ": expected " + std::to_string(impl_->num_outputs) + " output tensor(s), got " +
                    std::to_string(outputs.size()));
  }
  check_extra_are_scalars(impl_->entry, extra);
  impl_->run_into(inputs, outputs.data(), outputs.size(), extra, promotion);
}

void Elementwise::run_allocating(const std::vector<EwOperand>& inputs, const EwAllocate& allocate,
                                 const std::vector<EwOperand>& extra, Promotion promotion, EwAllocation allocation) {
  Impl& impl = *impl_;
  check_extra_are_scalars(impl.entry, extra);
  const iterator::PlanLease<ew::CallPlan> plan = impl.plans.lease(
      [&](auto* sink) { iterator::encode_call(sink, inputs, nullptr, 0, extra, promotion); },
      [&] {
        return impl.with_kernel(ew::plan_allocating_call(impl.entry, inputs, impl.num_outputs, extra, promotion,
                                                         impl.compute_for(inputs, promotion)));
      });
  const size_t n_out = plan->outputs.size();
  NewOutputs outputs(n_out);
  for (size_t k = 0; k < n_out; ++k) {
    outputs.data()[k] = allocate(k, plan->outputs[k].layout, plan->types.device);
    internal_check(outputs.data()[k] != nullptr, "an elementwise output allocator returned no tensor");
  }
  if (allocation == EwAllocation::kFreshContiguous) {
    ew::run_plan(impl.entry, *plan, inputs, outputs.data(), extra, promotion, /*fresh_outputs=*/true);
  } else if (ew::allocated_as_planned(*plan, outputs.data())) {
    ew::run_plan(impl.entry, *plan, inputs, outputs.data(), extra, promotion, /*fresh_outputs=*/false);
  } else {  // an allocator that chose other strides: plan for the outputs it made
    impl.run_into(inputs, outputs.data(), n_out, extra, promotion);
  }
}

}  // namespace kjit
