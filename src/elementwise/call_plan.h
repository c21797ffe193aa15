// A call's plan: everything its operands' metadata decides (types, output
// layouts, loop layout and lane, kernel types), made once per metadata and then
// run with each call's data pointers and scalar values.
#ifndef KJIT_SRC_ELEMENTWISE_CALL_PLAN_H_
#define KJIT_SRC_ELEMENTWISE_CALL_PLAN_H_

#include <memory>
#include <string>
#include <vector>

#include "cpu/codegen_cpu.h"
#include "cpu/loop_driver.h"
#include "iterator/call_types.h"
#include "kjit/elementwise.h"

namespace kjit {
namespace cuda {
class CudaElementwiseKernel;
}  // namespace cuda

namespace ew {

/// Operands whose memory a call must check for overlap: a non-empty output and
/// another output or a tensor input, with the bytes each spans relative to its
/// data pointer.
struct OverlapPair {
  size_t output;
  size_t other;
  iterator::Extent output_extent, other_extent;
};

/// An output an allocating call makes: its layout, and its element strides and
/// dtype when allocated as laid out (what the call's loop was planned for).
struct NewOutput {
  EwOutput layout;
  std::vector<int64_t> strides;
  DLDataType dtype{};
};

/// A call's plan. Its operands (outputs, then inputs: their types, element sizes,
/// strides and which inputs are scalars) are its loop's.
struct CallPlan {
  // What every call reads comes first, so that a 1-element call touches few cache lines.
  size_t n_out = 0;
  KernelFn kernel = nullptr;  ///< CPU lanes
  bool guard_traps = false;   ///< the kernel runs under trap_guard.h's guard
  std::vector<OverlapPair> overlap_pairs;
  cpu::LoopPlan loop;
  iterator::CallTypes types;
  std::vector<NewOutput> outputs;  ///< an allocating call's
  EwKernelTypes kernel_types;
  std::shared_ptr<cuda::CudaElementwiseKernel> cuda;  ///< Lane::kCuda

  const OperandInfo& operand(size_t k) const { return loop.loop.operands[k]; }
};

/// The plan of a call into `outputs` (a caller's tensors): checks them against the
/// call (device, dtype, shape, safe cast, stride 0); under NumPy's rules the inputs
/// broadcast to a larger out=. Attach the kernel after.
std::unique_ptr<CallPlan> plan_call(const std::string& fn, const std::vector<EwOperand>& inputs,
                                    const DLTensor* const* outputs, size_t n_out, const std::vector<EwOperand>& extra,
                                    Promotion p, const EwCompute& compute = {});

/// The plan of a call into `num_outputs` new outputs laid out as the inputs
/// (TensorIterator's rule), planned for outputs allocated exactly so.
std::unique_ptr<CallPlan> plan_allocating_call(const std::string& fn, const std::vector<EwOperand>& inputs,
                                               int num_outputs, const std::vector<EwOperand>& extra, Promotion p,
                                               const EwCompute& compute = {});

/// The layouts of a call's outputs (outputs_for).
std::vector<EwOutput> output_layouts(const iterator::CallTypes& types, const std::vector<EwOperand>& inputs,
                                     int num_outputs);

/// Whether an allocator made `outputs` as the plan laid them out (any strides
/// of size-1 dims), so the plan's loop fits them.
bool allocated_as_planned(const CallPlan& plan, const DLTensor* const* outputs);

/// Runs the plan on a call's operands: binds data pointers, scalar inputs and
/// extra scalars, checks that no output partially overlaps another operand
/// (unless `fresh_outputs`: new memory overlaps nothing), then runs its lane.
void run_plan(const std::string& fn, const CallPlan& plan, const std::vector<EwOperand>& inputs,
              const DLTensor* const* outputs, const std::vector<EwOperand>& extra, Promotion p, bool fresh_outputs);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ELEMENTWISE_CALL_PLAN_H_
