// Whether two strided operands can share a byte: the question NumPy's
// may_share_memory answers exactly. Written as a bounded linear equation in
// non-negative integers (one unknown per dim of either operand, plus the bytes
// within an element) and solved by a bounded depth-first search.
#ifndef KJIT_SRC_ITERATOR_OVERLAP_H_
#define KJIT_SRC_ITERATOR_OVERLAP_H_

#include <cstdint>
#include <vector>

namespace kjit {
namespace iterator {

/// The answer: no shared byte, a shared byte, or not decided within the work bound.
enum class Overlap { kNo, kYes, kTooHard };

/// Work bound of the elementwise overlap check (steps of the search): far above
/// what views of real arrays need (a few steps), and a few milliseconds at most.
constexpr int64_t kOverlapMaxWork = int64_t{1} << 16;

/// 128 bits: sums of products of 64-bit strides and extents (a GCC/Clang
/// extension; __extension__ keeps -Wpedantic quiet).
__extension__ typedef unsigned __int128 OverlapUInt;
__extension__ typedef __int128 OverlapInt;

/// One unknown of sum(coef * x) == rhs: 0 <= x <= bound, coef > 0.
struct OverlapTerm {
  uint64_t coef = 0;
  uint64_t bound = 0;
};

/// Whether sum(term.coef * x_term) == rhs has a solution with 0 <= x <= bound,
/// searching at most `max_work` steps (kTooHard beyond).
Overlap solve_bounded_sum(std::vector<OverlapTerm> terms, OverlapUInt rhs, int64_t max_work);

/// One operand over the loop's `shape`: its first element's address and byte
/// strides (0 where broadcast), and its element size.
struct StridedBytes {
  const char* data = nullptr;
  const int64_t* strides = nullptr;
  int64_t item = 1;
};

/// Whether operands `a` and `b`, both laid over `shape`, can share a byte. Empty
/// shapes share nothing.
Overlap may_share_memory(const std::vector<int64_t>& shape, const StridedBytes& a, const StridedBytes& b,
                         int64_t max_work = kOverlapMaxWork);

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_OVERLAP_H_
