// Making a call's plan from its operands' metadata, and running a plan on one
// call's data.
#include "elementwise/call_plan.h"

#include <tvm/ffi/extra/c_env_api.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "cpu/trap_guard.h"
#include "cuda/cuda_launch.h"
#include "iterator/overlap.h"
#include "iterator/promotion.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"
#include "support/compiler_hints.h"

namespace kjit {
namespace ew {
namespace {

/// Element strides of a tensor allocated contiguously in `layout.order`.
std::vector<int64_t> strides_in_order(const EwOutput& layout) {
  std::vector<int64_t> strides(layout.shape.size());
  int64_t step = 1;
  for (size_t i = layout.order.size(); i-- > 0;) {
    strides[layout.order[i]] = step;
    step *= layout.shape[layout.order[i]];
  }
  return strides;
}

/// An output's loop operand: its dtype and byte strides against the broadcast shape.
OperandInfo output_operand(EwType type, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                           size_t ndim) {
  OperandInfo op;
  op.dtype = ew_dl_type(type);
  op.element_size = iterator::size_of(type);
  op.strides = iterator::loop_strides(shape, strides, op.element_size, ndim);
  op.is_output = true;
  return op;
}

/// The rest of a plan once its outputs are known (`outputs`: their loop operands,
/// and plan->kernel_types.outputs their types): kernel types, loop and lane, and
/// the overlap checks a call runs.
void finish_plan(const std::string& fn, CallPlan* plan, detail::Operands outputs, const std::vector<EwOperand>& inputs,
                 const std::vector<EwOperand>& extra) {
  const iterator::CallTypes& types = plan->types;
  const size_t n_out = outputs.size();
  plan->n_out = n_out;
  plan->kernel_types.inputs = types.inputs;
  plan->kernel_types.compute = iterator::compute_type(types.result);
  for (size_t k = 0; k < n_out && k < types.own.size(); ++k) {
    if (!types.own[k]) continue;  // entries without an own type come out in the compute type
    plan->kernel_types.results.resize(n_out, plan->kernel_types.compute);
    plan->kernel_types.results[k] = *types.own[k];
  }
  for (size_t e = 0; e < extra.size(); ++e) {
    plan->kernel_types.extra.push_back(iterator::extra_travel_type(fn, extra[e], e, plan->kernel_types.compute));
  }
  // float16/bfloat16 results compute in float32 and round to their type (NumPy's
  // and TensorIterator's loops): inputs of other types on load, the result before
  // a store into another type.
  if (plan->kernel_types.compute != types.result) plan->kernel_types.half_result = types.result;
  detail::Operands ops = std::move(outputs);
  for (OperandInfo& op : iterator::input_operands(inputs, types)) ops.push_back(std::move(op));
  const bool cuda = types.device.device_type == kDLCUDA;
  plan->loop = cpu::plan_loop(types.shape, std::move(ops), n_out, cuda);
  const detail::LoopLayout& loop = plan->loop.loop;
  // Python scalars are loaded once, outside the loops (CPU), or travel as kernel
  // parameters (CUDA, JITerator's CPU scalars).
  std::vector<bool> by_value;
  for (size_t i = 0; i < inputs.size(); ++i) by_value.push_back(loop.operands[n_out + i].is_scalar);
  if (std::find(by_value.begin(), by_value.end(), true) != by_value.end()) plan->kernel_types.by_value = by_value;
  // Spans relative to each operand's data pointer (unsigned wrap-around keeps the sums right).
  auto extent = [&](const OperandInfo& op) {
    return iterator::extent_of(nullptr, loop.shape.data(), op.strides.data(), loop.shape.size(), op.element_size);
  };
  for (size_t k = 0; k < n_out; ++k) {
    const iterator::Extent mine = extent(loop.operands[k]);
    if (mine.lo == mine.hi) continue;  // empty: overlaps nothing
    for (size_t j = 0; j < loop.operands.size(); ++j) {
      if (j != k && !loop.operands[j].is_scalar) plan->overlap_pairs.push_back({k, j, mine, extent(loop.operands[j])});
    }
  }
}

/// TensorIterator's rule: an output may share memory with another operand only
/// by being exactly the same elements of an input (in place).
[[noreturn]] KJIT_COLD void throw_partial_overlap(const std::string& fn, size_t k, size_t j, size_t n_out,
                                                  iterator::Overlap how) {
  std::string other = j < n_out ? "out[" + std::to_string(j) + "]" : iterator::operand_name(j - n_out);
  if (how == iterator::Overlap::kTooHard) {
    throw ValueError(fn + ": out[" + std::to_string(k) + "] may overlap " + other +
                     ": their strides are too irregular to decide within kjit's search bound (" +
                     std::to_string(iterator::kOverlapMaxWork) +
                     " steps), so kjit treats them as overlapping; pass a copy");
  }
  throw ValueError(fn + ": out[" + std::to_string(k) + "] partially overlaps " + other +
                   ": some elements of the written-to tensor and " + other +
                   " refer to a single memory location (exact in-place use is allowed; else pass a copy)");
}

bool same_strides(const OperandInfo& a, const OperandInfo& b) {
  return std::equal(a.strides.begin(), a.strides.end(), b.strides.begin(), b.strides.end());
}

/// Output k and operand j, whose byte ranges intersect: exactly the same elements
/// of an input pass (in place); else they must share no byte (the exact test,
/// NumPy's may_share_memory). Out of line: the common call has no overlap.
KJIT_NOINLINE void check_intersecting(const std::string& fn, const CallPlan& p, char* const* data, size_t k, size_t j) {
  const OperandInfo &a = p.operand(j), &b = p.operand(k);
  if (j >= p.n_out && data[j] == data[k] && same_strides(a, b) && same_dtype(a.dtype, b.dtype)) return;
  const std::vector<int64_t> shape(p.loop.loop.shape.begin(), p.loop.loop.shape.end());
  const iterator::Overlap how = iterator::may_share_memory(shape, {data[j], a.strides.data(), a.element_size},
                                                           {data[k], b.strides.data(), b.element_size});
  if (how != iterator::Overlap::kNo) throw_partial_overlap(fn, k, j, p.n_out, how);
}

void check_data_overlap(const std::string& fn, const CallPlan& p, char* const* data) {
  for (const OverlapPair& pair : p.overlap_pairs) {
    const size_t k = pair.output, j = pair.other;
    const uintptr_t k_lo = reinterpret_cast<uintptr_t>(data[k]) + pair.output_extent.lo;
    const uintptr_t k_hi = reinterpret_cast<uintptr_t>(data[k]) + pair.output_extent.hi;
    const uintptr_t j_lo = reinterpret_cast<uintptr_t>(data[j]) + pair.other_extent.lo;
    const uintptr_t j_hi = reinterpret_cast<uintptr_t>(data[j]) + pair.other_extent.hi;
    if (j_hi > k_lo && k_hi > j_lo) check_intersecting(fn, p, data, k, j);
  }
}

/// A call's operand pointers, scalar inputs and extra scalars (one 16-byte slot
/// each): on the stack up to 16 operands and 8 extras, so a small call allocates
/// nothing.
class CallData {
 public:
  CallData(size_t n_ops, size_t n_in, size_t n_extra) {
    if (n_ops > kInline || n_in > kInline || n_extra > kInlineExtras) on_heap(n_ops, n_in, n_extra);
  }
  CallData(const CallData&) = delete;
  CallData& operator=(const CallData&) = delete;

  char** ptrs = ptr_inline_;
  iterator::ScalarSlot* slots = slot_inline_;
  unsigned char* extra = extra_inline_[0].bytes;

 private:
  static constexpr size_t kInline = 16;
  static constexpr size_t kInlineExtras = 8;
  KJIT_COLD void on_heap(size_t n_ops, size_t n_in, size_t n_extra) {
    // One block of slots: the extras, then the scalar inputs, then the pointers.
    const size_t ptr_slots = (n_ops * sizeof(char*) + sizeof(iterator::ScalarSlot) - 1) / sizeof(iterator::ScalarSlot);
    heap_.reset(new iterator::ScalarSlot[n_extra + n_in + ptr_slots]);
    extra = heap_[0].bytes;
    slots = heap_.get() + n_extra;
    ptrs = reinterpret_cast<char**>(slots + n_in);
  }
  char* ptr_inline_[kInline];
  iterator::ScalarSlot slot_inline_[kInline];
  iterator::ScalarSlot extra_inline_[kInlineExtras];
  std::unique_ptr<iterator::ScalarSlot[]> heap_;  // one allocation when a call outgrows the inline buffers
};

/// Runs a CPU lane. What the user's code throws, on this thread or on a pool worker
/// (the pool hands it back here), becomes the kjit::Error of its kind, named by the
/// function (cpu::rethrow_user_error).
void run_kernel(const std::string& fn, const CallPlan& plan, char** ptrs, const void* extra) {
  try {
    cpu::execute(cpu::Kernel{plan.kernel, plan.guard_traps}, plan.loop, ptrs, extra);
  } catch (...) {
    cpu::rethrow_user_error(fn);
  }
}

/// Lane::kCuda: the loop with this call's device pointers; scalar inputs go by value.
KJIT_NOINLINE void launch_on_device(const CallPlan& plan, const CallData& data, size_t n_out, size_t n_in,
                                    const std::vector<EwOperand>& extra) {
  detail::LoopLayout loop = plan.loop.loop;
  for (size_t k = 0; k < n_out + n_in; ++k) loop.operands[k].data = data.ptrs[k];
  std::vector<const void*> values(n_in, nullptr);
  for (size_t i = 0; i < n_in; ++i) {
    if (loop.operands[n_out + i].is_scalar) {
      values[i] = data.slots[i].bytes;
      loop.operands[n_out + i].data = nullptr;  // host memory: the kernel takes the value itself
    }
  }
  const int device = plan.types.device.device_id;
  cuda::launch_elementwise_cuda(*plan.cuda, loop, extra, cuda::pack_scalars(plan.cuda->types(), values), device,
                                TVMFFIEnvGetStream(kDLCUDA, device));
}

}  // namespace

std::vector<EwOutput> output_layouts(const iterator::CallTypes& types, const std::vector<EwOperand>& inputs,
                                     int num_outputs) {
  EwOutput out;
  out.shape = types.shape;
  out.order = iterator::output_order(types.shape, iterator::input_operands(inputs, types));
  std::vector<EwOutput> outs(num_outputs, out);
  for (int k = 0; k < num_outputs; ++k) outs[k].type = types.output(k);
  return outs;
}

std::unique_ptr<CallPlan> plan_call(const std::string& fn, const std::vector<EwOperand>& inputs,
                                    const DLTensor* const* outputs, size_t n_out, const std::vector<EwOperand>& extra,
                                    Promotion p, const EwCompute& compute) {
  auto plan = std::make_unique<CallPlan>();
  plan->types = iterator::resolve_types(fn, inputs, p, compute);
  iterator::broadcast_to_outputs(outputs, n_out, &plan->types, p);
  for (size_t k = 0; k < n_out; ++k) iterator::check_output(fn, k, outputs[k], plan->types, p);
  iterator::check_self_overlap(fn, outputs, n_out);
  detail::Operands ops;
  for (size_t k = 0; k < n_out; ++k) {
    const DLTensor* o = outputs[k];
    const EwType t = *iterator::from_dl(o->dtype);
    plan->kernel_types.outputs.push_back(t);
    ops.push_back(output_operand(t, iterator::shape_of(o), iterator::strides_of(o), plan->types.shape.size()));
  }
  finish_plan(fn, plan.get(), std::move(ops), inputs, extra);
  return plan;
}

std::unique_ptr<CallPlan> plan_allocating_call(const std::string& fn, const std::vector<EwOperand>& inputs,
                                               int num_outputs, const std::vector<EwOperand>& extra, Promotion p,
                                               const EwCompute& compute) {
  auto plan = std::make_unique<CallPlan>();
  plan->types = iterator::resolve_types(fn, inputs, p, compute);
  detail::Operands ops;
  for (EwOutput& layout : output_layouts(plan->types, inputs, num_outputs)) {
    NewOutput out{std::move(layout), {}, {}};
    out.strides = strides_in_order(out.layout);
    out.dtype = ew_dl_type(out.layout.type);
    plan->kernel_types.outputs.push_back(out.layout.type);
    ops.push_back(output_operand(out.layout.type, out.layout.shape, out.strides, out.layout.shape.size()));
    plan->outputs.push_back(std::move(out));
  }
  finish_plan(fn, plan.get(), std::move(ops), inputs, extra);
  return plan;
}

bool allocated_as_planned(const CallPlan& plan, const DLTensor* const* outputs) {
  const DLDevice want_device = plan.types.device;
  for (size_t k = 0; k < plan.outputs.size(); ++k) {
    const DLTensor* t = outputs[k];
    const EwOutput& layout = plan.outputs[k].layout;
    const DLDataType want = plan.outputs[k].dtype;
    const bool host = t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost;
    const DLDevice device = host ? DLDevice{kDLCPU, 0} : t->device;
    if (t->dtype.code != want.code || t->dtype.bits != want.bits || t->dtype.lanes != want.lanes ||
        device.device_type != want_device.device_type || device.device_id != want_device.device_id ||
        static_cast<size_t>(t->ndim) != layout.shape.size()) {
      return false;
    }
    int64_t contiguous = 1;  // the stride of dim d when the tensor has none
    for (int d = t->ndim - 1; d >= 0; --d) {
      const int64_t stride = t->strides != nullptr ? t->strides[d] : contiguous;
      if (t->shape[d] != layout.shape[d] || (t->shape[d] > 1 && stride != plan.outputs[k].strides[d])) return false;
      contiguous *= t->shape[d];
    }
  }
  return true;
}

void run_plan(const std::string& fn, const CallPlan& plan, const std::vector<EwOperand>& inputs,
              const DLTensor* const* outputs, const std::vector<EwOperand>& extra, Promotion p, bool fresh_outputs) {
  const size_t n_in = inputs.size(), n_out = plan.n_out, n_ops = n_out + n_in;
  CallData data(n_ops, n_in, extra.size());
  for (size_t k = 0; k < n_out; ++k) data.ptrs[k] = static_cast<char*>(outputs[k]->data) + outputs[k]->byte_offset;
  for (size_t i = 0; i < n_in; ++i) {
    if (const DLTensor* t = inputs[i].tensor) {
      data.ptrs[n_out + i] = static_cast<char*>(t->data) + t->byte_offset;
    } else {
      iterator::bind_scalar_input(fn, inputs[i], plan.types, i, p, &data.slots[i]);
      data.ptrs[n_out + i] = reinterpret_cast<char*>(data.slots[i].bytes);
    }
  }
  if (!fresh_outputs) check_data_overlap(fn, plan, data.ptrs);
  if (plan.loop.lane == cpu::Lane::kCuda) {
    launch_on_device(plan, data, n_out, n_in, extra);
    return;
  }
  for (size_t e = 0; e < extra.size(); ++e) {  // one 16-byte slot each, in its travel type
    iterator::write_scalar(extra[e], plan.kernel_types.extra[e],
                           reinterpret_cast<iterator::ScalarSlot*>(data.extra) + e);
  }
  run_kernel(fn, plan, data.ptrs, extra.empty() ? nullptr : data.extra);
}

}  // namespace ew
}  // namespace kjit
