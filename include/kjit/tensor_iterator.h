// kjit/tensor_iterator.h — PyTorch's TensorIterator for kernels written in C++:
//
//   auto iter = kjit::TensorIteratorConfig().add_output(c).add_input(a).add_input(b).build();
//
// build() broadcasts the operands, checks their devices, dtypes and memory
// overlap, then lays out one loop nest over them as TensorIterator does: byte
// strides, dims reordered fastest first, adjacent dims coalesced. for_each runs a
// 2-D loop body over it, threaded on kjit's pool above a grain; kjit/cpu_kernel.h
// runs a typed lambda. DLPack, kjit/kernel.h and the standard library only.
#ifndef KJIT_TENSOR_ITERATOR_H_
#define KJIT_TENSOR_ITERATOR_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kjit/detail/loop_layout.h"
#include "kjit/detail/memory_overlap.h"
#include "kjit/kernel.h"
#include "kjit/parallel.h"
#include "kjit/small_vector.h"

namespace kjit {

class TensorIterator;

/// The operands and rules of an iterator; build() makes it. Outputs come first.
class TensorIteratorConfig {
 public:
  /// An output: written, never broadcast, never resized (it must have the
  /// broadcast shape of the operands).
  TensorIteratorConfig& add_output(const TensorView& t);
  /// An input: read, broadcast to the shape of the loop.
  TensorIteratorConfig& add_input(const TensorView& t);
  /// Whether every operand must have one dtype (default true). cpu_kernel checks
  /// each operand against its lambda's types either way.
  TensorIteratorConfig& check_all_same_dtype(bool on) {
    same_dtype_ = on;
    return *this;
  }
  /// Whether an output may not overlap itself or partially overlap another
  /// operand (default true; exactly the same tensor as an input is in-place).
  TensorIteratorConfig& set_check_mem_overlap(bool on) {
    check_overlap_ = on;
    return *this;
  }
  /// A reduction: the output has the inputs' dims, 1 where it reduces (keepdims);
  /// cpu_reduce runs it.
  TensorIteratorConfig& is_reduction(bool on) {
    reduction_ = on;
    return *this;
  }
  /// Throws ValueError (shapes, overlap, devices) or TypeError (dtypes).
  TensorIterator build() const;

 private:
  SmallVector<TensorView, 4> operands_;
  int n_out_ = 0;
  bool same_dtype_ = true;
  bool check_overlap_ = true;
  bool reduction_ = false;
};

/// A loop nest over the operands of a built config (outputs first). Borrows the
/// tensors: they must outlive it.
class TensorIterator {
 public:
  int ntensors() const { return static_cast<int>(nest_.operands.size()); }
  int noutputs() const { return nest_.n_outputs; }
  int ninputs() const { return ntensors() - noutputs(); }
  /// Dims of the loop nest (after coalescing), fastest first.
  int ndim() const { return static_cast<int>(nest_.shape.size()); }
  const DimVector& shape() const { return nest_.shape; }
  int64_t numel() const { return numel_; }
  bool is_reduction() const { return nest_.reduction; }
  /// Operand `arg` (outputs first); IndexError past the last.
  const OperandInfo& operand(int arg) const {
    if (arg < 0 || arg >= ntensors()) {
      throw IndexError("kjit::TensorIterator: operand " + std::to_string(arg) + " of " + std::to_string(ntensors()));
    }
    return nest_.operands[arg];
  }
  const OperandInfo& output(int i = 0) const { return operand(i < noutputs() ? i : -1); }
  const OperandInfo& input(int i = 0) const { return operand(i >= 0 ? noutputs() + i : -1); }
  DataType dtype(int arg = 0) const { return operand(arg).dtype; }
  char* data_ptr(int arg) const { return operand(arg).data; }
  const int64_t* strides(int arg) const { return operand(arg).strides.data(); }
  Device device() const { return nest_.operands[0].view.device(); }
  /// One dim at most, every operand's stride its element size.
  bool is_contiguous() const;

  /// Runs loop(data, strides, size0, size1) over the elements [begin, end) of the
  /// loop nest in iteration order: `data` has one pointer per operand, `strides`
  /// the inner then the outer byte stride of each, and the body covers size0 x
  /// size1 elements (TensorIterator's loop2d).
  template <typename Loop2d>
  void serial_for_each(const Loop2d& loop, int64_t begin, int64_t end) const;
  /// serial_for_each over every element, split across kjit's pool from `grain`.
  template <typename Loop2d>
  void for_each(const Loop2d& loop, int64_t grain = kGrainSize) const {
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { serial_for_each(loop, b, e); });
  }

 private:
  friend class TensorIteratorConfig;

  detail::LoopLayout nest_;  ///< the loop nest: its dims and its operands
  int64_t numel_ = 0;
};

namespace detail {

/// What a message calls operand `arg`: "output 0", "input 1".
inline std::string operand_label(int arg, int n_out) {
  return arg < n_out ? "output " + std::to_string(arg) : "input " + std::to_string(arg - n_out);
}

/// A shape as Python writes a tuple: "(3,)", "(2, 3)".
inline std::string shape_text(const int64_t* shape, size_t ndim) {
  std::string s = "(";
  for (size_t d = 0; d < ndim; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + (ndim == 1 ? ",)" : ")");
}
inline std::string shape_text(const DLTensor* t) { return shape_text(t->shape, static_cast<size_t>(t->ndim)); }
inline std::string shape_text(const DimVector& shape) { return shape_text(shape.data(), shape.size()); }

inline std::string device_text(Device d) {
  return std::string(d.device_type == kDLCPU    ? "cpu"
                     : d.device_type == kDLCUDA ? "cuda"
                                                : "device type " + std::to_string(d.device_type)) +
         ":" + std::to_string(d.device_id);
}

[[noreturn]] inline void iterator_error(const std::string& what) { throw ValueError("kjit::TensorIterator: " + what); }

__extension__ typedef __int128 Int128;  // byte ranges: a size times a stride times a width

/// The lowest and one past the highest byte an operand touches ([0, 0) if empty).
inline std::pair<Int128, Int128> byte_range(const TensorView& t) {
  Int128 lo = 0, hi = 0;
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.size(d) == 0) return {0, 0};
    const Int128 reach = static_cast<Int128>(t.size(d) - 1) * t.stride(d) * t.element_size();
    (reach < 0 ? lo : hi) += reach;
  }
  const auto base = static_cast<Int128>(reinterpret_cast<uintptr_t>(t.data_ptr()));
  return {base + lo, base + hi + t.element_size()};
}

/// Operands i (an output) and j of a laid-out nest, whose byte ranges meet: they
/// must share no byte (the exact test, NumPy's may_share_memory: views that
/// interleave, such as x[::2] and x[1::2] or z.real and z.imag, share none).
inline void check_no_shared_byte(const LoopLayout& nest, int i, int j, int n_out) {
  const std::vector<int64_t> shape(nest.shape.begin(), nest.shape.end());
  const OperandInfo &a = nest.operands[static_cast<size_t>(i)], &b = nest.operands[static_cast<size_t>(j)];
  const Overlap how =
      may_share_memory(shape, {a.data, a.strides.data(), a.element_size}, {b.data, b.strides.data(), b.element_size});
  if (how == Overlap::kNo) return;
  if (how == Overlap::kTooHard) {
    iterator_error(operand_label(i, n_out) + " may overlap " + operand_label(j, n_out) +
                   ": their strides are too irregular to decide within the search bound (" +
                   std::to_string(kOverlapMaxWork) + " steps), so they count as overlapping; pass a copy");
  }
  iterator_error(operand_label(i, n_out) + " partially overlaps " + operand_label(j, n_out) +
                 ": an output may share memory with an input only as the same tensor (in place)");
}

inline bool same_layout(const TensorView& a, const TensorView& b) {
  if (a.data_ptr() != b.data_ptr() || a.ndim() != b.ndim() || a.element_size() != b.element_size()) return false;
  for (int d = 0; d < a.ndim(); ++d) {
    if (a.size(d) != b.size(d) || (a.size(d) > 1 && a.stride(d) != b.stride(d))) return false;
  }
  return true;
}

}  // namespace detail

inline TensorIteratorConfig& TensorIteratorConfig::add_output(const TensorView& t) {
  if (static_cast<int>(operands_.size()) > n_out_) {
    detail::iterator_error("add every output before the first input (output " + std::to_string(n_out_) +
                           " was added after input " + std::to_string(operands_.size() - n_out_ - 1) + ")");
  }
  operands_.push_back(t);
  ++n_out_;
  return *this;
}

inline TensorIteratorConfig& TensorIteratorConfig::add_input(const TensorView& t) {
  operands_.push_back(t);
  return *this;
}

inline TensorIterator TensorIteratorConfig::build() const {
  using detail::iterator_error;
  using detail::operand_label;
  const int n = static_cast<int>(operands_.size());
  if (n == 0) iterator_error("no operands: add_output and add_input come before build()");
  if (reduction_ && (n_out_ != 1 || n < 2)) {
    iterator_error("a reduction has one output and at least one input, got " + std::to_string(n_out_) +
                   " outputs and " + std::to_string(n - n_out_) + " inputs");
  }
  // Operands one by one: defined, sane, whole-byte one-lane dtypes, one device, one dtype.
  int ndim = 0;
  for (int i = 0; i < n; ++i) {
    const TensorView& t = operands_[i];
    const std::string who = operand_label(i, n_out_);
    if (!t.defined()) iterator_error(who + " is undefined (an optional tensor passed as None)");
    for (int d = 0; d < t.ndim(); ++d) {
      if (t.size(d) < 0)
        iterator_error(who + " has a negative size " + std::to_string(t.size(d)) + " at dim " + std::to_string(d));
    }
    const DataType dt = t.dtype();
    if (dt.lanes != 1 || dt.bits == 0 || dt.bits % 8 != 0) {
      throw TypeError("kjit::TensorIterator: " + who + " is " + dtype_name(dt) +
                      ": the iterator takes one-lane dtypes of whole bytes");
    }
    const Device dev = t.device(), first = operands_[0].device();
    if (dev.device_type != first.device_type || dev.device_id != first.device_id) {
      iterator_error(who + " is on " + detail::device_text(dev) + ", output 0 on " + detail::device_text(first) +
                     ": the operands must be on one device");
    }
    if (same_dtype_ && !same_dtype(dt, operands_[0].dtype())) {
      throw TypeError("kjit::TensorIterator: " + who + " is " + dtype_name(dt) + ", " + operand_label(0, n_out_) +
                      " is " + dtype_name(operands_[0].dtype()) +
                      ": the operands must have one dtype (check_all_same_dtype(false) allows several)");
    }
    ndim = std::max(ndim, t.ndim());
  }
  // Shape: the operands broadcast (right-aligned) and each output has that shape;
  // a reduction's shape is its inputs', and its output has 1 where it reduces.
  DimVector shape(ndim, 1);
  SmallVector<int, 6> owner(ndim, -1);  // which operand set shape[d], for messages
  for (int i = reduction_ && n > n_out_ ? n_out_ : 0; i < n; ++i) {
    const TensorView& t = operands_[i];
    for (int d = 0; d < t.ndim(); ++d) {
      const int k = ndim - t.ndim() + d;
      const int64_t s = t.size(d);
      if (s == shape[k] || s == 1) continue;
      if (shape[k] != 1) {
        iterator_error("the shapes of " + operand_label(owner[k], n_out_) + " " +
                       detail::shape_text(operands_[owner[k]].dltensor()) + " and " + operand_label(i, n_out_) + " " +
                       detail::shape_text(t.dltensor()) + " do not broadcast: dim " + std::to_string(k) + " is " +
                       std::to_string(shape[k]) + " in one and " + std::to_string(s) + " in the other");
      }
      shape[k] = s;
      owner[k] = i;
    }
  }
  for (int i = 0; i < n_out_; ++i) {
    const TensorView& t = operands_[i];
    bool fits = t.ndim() == ndim;
    for (int d = 0; fits && d < ndim; ++d) fits = t.size(d) == shape[d] || (reduction_ && t.size(d) == 1);
    if (!fits) {
      iterator_error(operand_label(i, n_out_) + " has shape " + detail::shape_text(t.dltensor()) +
                     (reduction_ ? ", a reduction's output needs the inputs' dims with 1 where it reduces: "
                                 : ", the operands broadcast to ") +
                     detail::shape_text(shape));
    }
  }
  TensorIterator it;
  it.nest_.n_outputs = n_out_;
  it.nest_.reduction = reduction_;
  it.numel_ = 1;
  for (int64_t s : shape) {
    if (__builtin_mul_overflow(it.numel_, s, &it.numel_)) {
      iterator_error("the loop of shape " + detail::shape_text(shape) + " has more than 2^63 elements");
    }
  }
  // Byte strides over the loop's dims, innermost first; a broadcast dim has 0.
  for (int i = 0; i < n; ++i) {
    const TensorView& t = operands_[i];
    OperandInfo op;
    op.view = t;
    op.data = static_cast<char*>(const_cast<void*>(t.data_ptr()));
    op.dtype = t.dtype();
    op.element_size = t.element_size();
    op.is_output = i < n_out_;
    op.strides.resize(ndim, 0);
    for (int d = 0; d < t.ndim(); ++d) {
      const int k = ndim - t.ndim() + d;
      if (t.size(d) == 1) continue;
      if (__builtin_mul_overflow(t.stride(d), op.element_size, &op.strides[ndim - 1 - k])) {
        iterator_error(operand_label(i, n_out_) + "'s stride " + std::to_string(t.stride(d)) + " at dim " +
                       std::to_string(d) + " overflows in bytes");
      }
    }
    it.nest_.operands.push_back(std::move(op));
  }
  for (int d = ndim - 1; d >= 0; --d) it.nest_.shape.push_back(shape[d]);
  // Overlap: an output never writes one location twice, nor part of another operand.
  for (int i = 0; check_overlap_ && i < n_out_ && it.numel_ > 0; ++i) {
    const TensorView& out = operands_[i];
    for (int d = 0; d < out.ndim(); ++d) {
      if (out.size(d) > 1 && out.stride(d) == 0) {
        iterator_error(operand_label(i, n_out_) + " has stride 0 at dim " + std::to_string(d) +
                       ": more than one element of it refers to a single memory location");
      }
    }
    const auto mine = detail::byte_range(out);
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const auto theirs = detail::byte_range(operands_[j]);
      const bool meet = mine.first < theirs.second && theirs.first < mine.second;
      if (!meet || (j >= n_out_ && detail::same_layout(out, operands_[j]))) continue;
      detail::check_no_shared_byte(it.nest_, i, j, n_out_);  // interleaved views may share no element
    }
  }
  detail::lay_out(&it.nest_);
  return it;
}

inline bool TensorIterator::is_contiguous() const {
  if (ndim() > 1) return false;
  for (const OperandInfo& op : nest_.operands) {
    if (ndim() == 1 && nest_.shape[0] > 1 && op.strides[0] != op.element_size) return false;
  }
  return true;
}

template <typename Loop2d>
void TensorIterator::serial_for_each(const Loop2d& loop, int64_t begin, int64_t end) const {
  end = std::min(end, numel_);
  if (begin >= end) return;
  const int nt = ntensors();
  const int nd = std::max(ndim(), 1);
  const SmallVector<OperandInfo, 4>& ops = nest_.operands;
  auto size_of = [&](int d) { return d < ndim() ? nest_.shape[d] : int64_t{1}; };
  auto stride_of = [&](const OperandInfo& op, int d) { return d < ndim() ? op.strides[d] : int64_t{0}; };
  DimVector index(nd), step(2 * nt);
  SmallVector<char*, 8> data(nt);
  for (int a = 0; a < nt; ++a) {
    step[a] = stride_of(ops[a], 0);
    step[nt + a] = stride_of(ops[a], 1);
  }
  int64_t rest = begin;
  for (int d = 0; d < nd; ++d) {
    index[d] = rest % size_of(d);
    rest /= size_of(d);
  }
  for (int64_t at = begin; at < end;) {
    for (int a = 0; a < nt; ++a) {
      char* p = ops[a].data;
      for (int d = 0; d < ndim(); ++d) p += index[d] * ops[a].strides[d];
      data[a] = p;
    }
    const int64_t size0 = std::min(size_of(0) - index[0], end - at);
    int64_t size1 = 1;
    if (index[0] == 0 && size0 == size_of(0) && nd > 1) size1 = std::min(size_of(1) - index[1], (end - at) / size0);
    loop(data.data(), step.data(), size0, size1);
    at += size0 * size1;
    if (size1 > 1 || index[0] + size0 == size_of(0)) {
      index[0] = 0;
      if (nd > 1) index[1] += size1;
      for (int d = 1; d + 1 < nd && index[d] == size_of(d); ++d) {
        index[d] = 0;
        ++index[d + 1];
      }
    } else {
      index[0] += size0;
    }
  }
}

}  // namespace kjit

#endif  // KJIT_TENSOR_ITERATOR_H_
