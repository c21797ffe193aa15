// The CUDA source of one elementwise kernel (PyTorch JITerator's variants): the
// user's computation string plus a self-contained prelude (no system headers),
// compiled by NVRTC. Launch layout: 128 threads per block; element j of thread t
// at block_start + t + j * 128; 32-bit indexing (the host splits larger loops).
#ifndef KJIT_SRC_CUDA_CODEGEN_CUDA_H_
#define KJIT_SRC_CUDA_CODEGEN_CUDA_H_

#include <cstddef>
#include <string>

#include "iterator/kernel_types.h"

namespace kjit {

/// Which loop a kernel runs.
enum class EwCudaVariant {
  kVectorized,      ///< contiguous, no casts: aligned vector loads of width 4/2/1
  kStrided,         ///< any strides, no casts: offsets by magic-number division
  kCastContiguous,  ///< contiguous, load-with-cast / store-with-cast
  kCastStrided,     ///< any strides, load-with-cast / store-with-cast
};
const char* ew_cuda_variant_name(EwCudaVariant v);

constexpr int kEwCudaThreads = 128;       ///< threads per block
constexpr int kEwCudaMaxDims = 16;        ///< dims the offset calculator handles
constexpr int kEwCudaMaxVecBytes = 16;    ///< widest vector access
constexpr size_t kEwExtraSlotBytes = 16;  ///< each extra scalar's slot in kjit_extra (and on the CPU)

/// The extern "C" kernel: "kjit_ew_vectorized4" (vec_width 4, 2 or 1 for
/// kVectorized), "kjit_ew_strided", "kjit_ew_cast_contiguous", "kjit_ew_cast_strided".
std::string ew_cuda_kernel_name(EwCudaVariant v, int vec_width = 1);

/// Elements per thread: 16 when every operand is 1 byte wide, else 8.
int ew_cuda_work_per_thread(const EwKernelTypes& types);

/// Whether an operand's type differs from the compute type (the cast variants).
bool ew_cuda_needs_cast(const EwKernelTypes& types);

/// Element bytes of operand `op` (outputs first, then inputs).
int ew_cuda_operand_size(const EwKernelTypes& types, size_t op);

/// Widest element of the operands, in bytes.
int ew_cuda_max_operand_size(const EwKernelTypes& types);

/// Whether `vec_width` (4, 2 or 1) elements of `element_size` bytes fit in kEwCudaMaxVecBytes.
bool ew_cuda_vec_width_allowed(int vec_width, int element_size);

/// Bytes of the kernel's offset-calculator argument for `num_operands` operands:
/// int ndim; {u32 divisor, magic, shift}[kEwCudaMaxDims]; int strides[kEwCudaMaxDims][num_operands].
size_t ew_cuda_offsets_bytes(size_t num_operands);

/// Whether input `i` of `types` is passed by value.
bool ew_cuda_by_value(const EwKernelTypes& types, size_t i);

/// Byte offset of each by-value input in the kernel's kjit_scalars (in input
/// order, natural alignment: every type aligns to its size); the last entry is the
/// struct's size. The entries of tensor inputs are unused.
std::vector<size_t> ew_cuda_scalars_layout(const EwKernelTypes& types);

namespace cuda {

/// The device spelling of a type's storage (float16/bfloat16 are uint16_t bits).
std::string cuda_device_type(EwType t);
/// The type a stored value is widened to before any other conversion (float for halves).
EwType cuda_widened(EwType t);
/// A stored value (`raw`) of `t` widened; a widened value narrowed back to `t`'s storage.
std::string cuda_widen(EwType t, const std::string& raw);
std::string cuda_narrow(EwType t, const std::string& value);
/// A float `v` rounded to float16 or bfloat16 and widened back.
std::string cuda_round_to_half(EwType half, const std::string& v);
/// Converts between two non-half types; complex -> real keeps the real part
/// (PyTorch's rule), complex -> bool tests both parts.
std::string cuda_cast_value(EwType from, EwType to, const std::string& v);

}  // namespace cuda

/// The NVRTC source. Kernel parameters, in order: `int n` (elements), a struct of
/// `char*` per operand (outputs first; unused for by-value inputs), for the
/// strided variants the offset calculator (ew_cuda_offsets_bytes), with by-value
/// inputs their kjit_scalars (ew_cuda_scalars_layout), and with num_extra > 0 a
/// struct of num_extra compute-type scalars. Complex types use a small std::complex-like
/// struct (arithmetic, real/imag/conj/norm/abs/arg/exp/log/sqrt). Throws
/// InternalError when a non-cast variant is asked for types that need casts.
std::string emit_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                  EwCudaVariant variant);

}  // namespace kjit

#endif  // KJIT_SRC_CUDA_CODEGEN_CUDA_H_
