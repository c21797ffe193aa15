// Whether two strided operands can share a byte: the question NumPy's
// may_share_memory answers exactly. Written as a bounded linear equation in
// non-negative integers (one unknown per dim of either operand, plus the bytes
// within an element) and solved by a bounded depth-first search. Header-only:
// kjit::TensorIterator (in kernels) and the engines (libkjit) share this one copy.
//
// A byte of operand A is a_lo + sum_i |s_i| x_i + u (0 <= x_i < n_i, 0 <= u < item_a),
// a_lo its lowest address; likewise for B with y_j and v. They coincide when
//   sum_i |s_i| x_i + u + sum_j |t_j| (n_j - 1 - y_j) + (item_b - 1 - v)
//     = b_lo - a_lo + sum_j |t_j| (n_j - 1) + item_b - 1,
// a sum of bounded non-negative unknowns with positive coefficients equal to a
// constant: solve_bounded_sum's problem.
#ifndef KJIT_DETAIL_MEMORY_OVERLAP_H_
#define KJIT_DETAIL_MEMORY_OVERLAP_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace kjit {
namespace detail {

/// The answer: no shared byte, a shared byte, or not decided within the work bound.
enum class Overlap { kNo, kYes, kTooHard };

/// Work bound of the overlap check (steps of the search): far above what views of
/// real arrays need (a few steps), and a few milliseconds at most.
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

/// One operand over the loop's `shape`: its first element's address and byte
/// strides (0 where broadcast), and its element size.
struct StridedBytes {
  const char* data = nullptr;
  const int64_t* strides = nullptr;
  int64_t item = 1;
};

namespace overlap {

inline OverlapUInt gcd(OverlapUInt a, OverlapUInt b) {
  while (b != 0) {
    OverlapUInt t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/// x with (a * x) % m == 1, for gcd(a, m) == 1 and m >= 1 (extended Euclid).
inline OverlapUInt inverse_mod(OverlapUInt a, OverlapUInt m) {
  if (m == 1) return 0;
  OverlapInt old_r = static_cast<OverlapInt>(a % m), r = static_cast<OverlapInt>(m), old_s = 1, s = 0;
  while (r != 0) {
    OverlapInt q = old_r / r, t = old_r - q * r;
    old_r = r;
    r = t;
    t = old_s - q * s;
    old_s = s;
    s = t;
  }
  OverlapInt mm = static_cast<OverlapInt>(m);
  return static_cast<OverlapUInt>(((old_s % mm) + mm) % mm);
}

/// Depth-first search over terms sorted by coefficient, largest first. At each
/// term only values that leave a remainder the later terms can reach are tried:
/// within [lo, hi] by the later terms' largest sum, and in the residue class
/// their gcd allows.
class BoundedSum {
 public:
  BoundedSum(std::vector<OverlapTerm> terms, int64_t max_work) : t_(std::move(terms)), work_left_(max_work) {
    const size_t n = t_.size();
    max_rest_.assign(n + 1, 0);
    gcd_rest_.assign(n + 1, 0);
    for (size_t i = n; i-- > 0;) {
      max_rest_[i] = max_rest_[i + 1] + OverlapUInt{t_[i].coef} * t_[i].bound;
      gcd_rest_[i] = gcd(gcd_rest_[i + 1], t_[i].coef);
    }
  }

  Overlap solve(size_t i, OverlapUInt rhs) {
    if (rhs == 0) return Overlap::kYes;  // every later unknown 0
    if (i == t_.size() || rhs > max_rest_[i] || rhs % gcd_rest_[i] != 0) return Overlap::kNo;
    const OverlapUInt c = t_[i].coef, g = gcd_rest_[i + 1];
    if (g == 0) return rhs % c == 0 && rhs / c <= t_[i].bound ? Overlap::kYes : Overlap::kNo;  // the last term
    const OverlapUInt hi = std::min<OverlapUInt>(t_[i].bound, rhs / c);
    const OverlapUInt lo = rhs > max_rest_[i + 1] ? (rhs - max_rest_[i + 1] + c - 1) / c : 0;
    if (lo > hi) return Overlap::kNo;
    // c*x == rhs (mod g): x == x0 (mod m); gcd(c, g) divides rhs (checked above).
    const OverlapUInt d = gcd(c, g), m = g / d;
    const OverlapUInt x0 = (rhs / d % m) * inverse_mod(c / d % m, m) % m;
    OverlapUInt x = hi - (hi % m + m - x0) % m;  // the largest x <= hi in the class
    for (; x >= lo && x <= hi; x -= m) {
      if (--work_left_ < 0) return Overlap::kTooHard;
      Overlap r = solve(i + 1, rhs - c * x);
      if (r != Overlap::kNo) return r;
      if (x < m) break;
    }
    return Overlap::kNo;
  }

 private:
  std::vector<OverlapTerm> t_;
  std::vector<OverlapUInt> max_rest_, gcd_rest_;
  int64_t work_left_;
};

/// Terms of one operand: |stride| per dim of extent > 1 and nonzero stride; returns
/// its lowest address offset (the sum of its negative spans).
inline OverlapInt add_terms(const std::vector<int64_t>& shape, const int64_t* strides, std::vector<OverlapTerm>* terms,
                            OverlapInt* span) {
  OverlapInt low = 0;
  *span = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    const OverlapInt s = strides[d], extent = shape[d] - 1;
    if (s < 0) low += s * extent;
    const OverlapUInt mag = static_cast<OverlapUInt>(s < 0 ? -s : s);
    terms->push_back({static_cast<uint64_t>(mag), static_cast<uint64_t>(extent)});
    *span += static_cast<OverlapInt>(mag) * extent;
  }
  return low;
}

}  // namespace overlap

/// Whether sum(term.coef * x_term) == rhs has a solution with 0 <= x <= bound,
/// searching at most `max_work` steps (kTooHard beyond).
inline Overlap solve_bounded_sum(std::vector<OverlapTerm> terms, OverlapUInt rhs, int64_t max_work) {
  terms.erase(std::remove_if(terms.begin(), terms.end(), [](const OverlapTerm& t) { return t.bound == 0; }),
              terms.end());
  std::sort(terms.begin(), terms.end(), [](const OverlapTerm& a, const OverlapTerm& b) { return a.coef > b.coef; });
  std::vector<OverlapTerm> merged;  // equal coefficients: c*x + c*y spans c*[0, bx + by]
  for (const OverlapTerm& t : terms) {
    if (!merged.empty() && merged.back().coef == t.coef) {
      merged.back().bound += t.bound;
    } else {
      merged.push_back(t);
    }
  }
  return overlap::BoundedSum(std::move(merged), max_work).solve(0, rhs);
}

/// Whether operands `a` and `b`, both laid over `shape`, can share a byte. Empty
/// shapes share nothing.
inline Overlap may_share_memory(const std::vector<int64_t>& shape, const StridedBytes& a, const StridedBytes& b,
                                int64_t max_work = kOverlapMaxWork) {
  for (int64_t n : shape) {
    if (n == 0) return Overlap::kNo;
  }
  std::vector<OverlapTerm> terms;
  OverlapInt span_a = 0, span_b = 0;
  const OverlapInt a_lo = static_cast<OverlapInt>(reinterpret_cast<uintptr_t>(a.data)) +
                          overlap::add_terms(shape, a.strides, &terms, &span_a);
  const OverlapInt b_lo = static_cast<OverlapInt>(reinterpret_cast<uintptr_t>(b.data)) +
                          overlap::add_terms(shape, b.strides, &terms, &span_b);
  if (a_lo + span_a + a.item <= b_lo || b_lo + span_b + b.item <= a_lo) return Overlap::kNo;  // disjoint ranges
  terms.push_back({1, static_cast<uint64_t>(a.item + b.item - 2)});                           // the bytes u and v
  const OverlapInt rhs = b_lo - a_lo + span_b + b.item - 1;
  if (rhs < 0) return Overlap::kNo;
  return solve_bounded_sum(std::move(terms), static_cast<OverlapUInt>(rhs), max_work);
}

}  // namespace detail
}  // namespace kjit

#endif  // KJIT_DETAIL_MEMORY_OVERLAP_H_
