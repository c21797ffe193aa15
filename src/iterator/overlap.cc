// The overlap equation and its bounded search.
//
// A byte of operand A is a_lo + sum_i |s_i| x_i + u (0 <= x_i < n_i, 0 <= u < item_a),
// a_lo its lowest address; likewise for B with y_j and v. They coincide when
//   sum_i |s_i| x_i + u + sum_j |t_j| (n_j - 1 - y_j) + (item_b - 1 - v)
//     = b_lo - a_lo + sum_j |t_j| (n_j - 1) + item_b - 1,
// a sum of bounded non-negative unknowns with positive coefficients equal to a
// constant: solve_bounded_sum's problem.
#include "iterator/overlap.h"

#include <algorithm>

namespace kjit {
namespace iterator {
namespace {

using u128 = OverlapUInt;
using i128 = OverlapInt;

u128 gcd(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/// x with (a * x) % m == 1, for gcd(a, m) == 1 and m >= 1 (extended Euclid).
u128 inverse_mod(u128 a, u128 m) {
  if (m == 1) return 0;
  i128 old_r = static_cast<i128>(a % m), r = static_cast<i128>(m), old_s = 1, s = 0;
  while (r != 0) {
    i128 q = old_r / r, t = old_r - q * r;
    old_r = r;
    r = t;
    t = old_s - q * s;
    old_s = s;
    s = t;
  }
  i128 mm = static_cast<i128>(m);
  return static_cast<u128>(((old_s % mm) + mm) % mm);
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
      max_rest_[i] = max_rest_[i + 1] + u128{t_[i].coef} * t_[i].bound;
      gcd_rest_[i] = gcd(gcd_rest_[i + 1], t_[i].coef);
    }
  }

  Overlap solve(size_t i, u128 rhs) {
    if (rhs == 0) return Overlap::kYes;  // every later unknown 0
    if (i == t_.size() || rhs > max_rest_[i] || rhs % gcd_rest_[i] != 0) return Overlap::kNo;
    const u128 c = t_[i].coef, g = gcd_rest_[i + 1];
    if (g == 0) return rhs % c == 0 && rhs / c <= t_[i].bound ? Overlap::kYes : Overlap::kNo;  // the last term
    const u128 hi = std::min<u128>(t_[i].bound, rhs / c);
    const u128 lo = rhs > max_rest_[i + 1] ? (rhs - max_rest_[i + 1] + c - 1) / c : 0;
    if (lo > hi) return Overlap::kNo;
    // c*x == rhs (mod g): x == x0 (mod m); gcd(c, g) divides rhs (checked above).
    const u128 d = gcd(c, g), m = g / d;
    const u128 x0 = (rhs / d % m) * inverse_mod(c / d % m, m) % m;
    u128 x = hi - (hi % m + m - x0) % m;  // the largest x <= hi in the class
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
  std::vector<u128> max_rest_, gcd_rest_;
  int64_t work_left_;
};

/// Terms of one operand: |stride| per dim of extent > 1 and nonzero stride; returns
/// its lowest address offset (the sum of its negative spans).
i128 add_terms(const std::vector<int64_t>& shape, const int64_t* strides, std::vector<OverlapTerm>* terms, i128* span) {
  i128 low = 0;
  *span = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    const i128 s = strides[d], extent = shape[d] - 1;
    if (s < 0) low += s * extent;
    const u128 mag = static_cast<u128>(s < 0 ? -s : s);
    terms->push_back({static_cast<uint64_t>(mag), static_cast<uint64_t>(extent)});
    *span += static_cast<i128>(mag) * extent;
  }
  return low;
}

}  // namespace

Overlap solve_bounded_sum(std::vector<OverlapTerm> terms, u128 rhs, int64_t max_work) {
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
  return BoundedSum(std::move(merged), max_work).solve(0, rhs);
}

Overlap may_share_memory(const std::vector<int64_t>& shape, const StridedBytes& a, const StridedBytes& b,
                         int64_t max_work) {
  for (int64_t n : shape) {
    if (n == 0) return Overlap::kNo;
  }
  std::vector<OverlapTerm> terms;
  i128 span_a = 0, span_b = 0;
  const i128 a_lo =
      static_cast<i128>(reinterpret_cast<uintptr_t>(a.data)) + add_terms(shape, a.strides, &terms, &span_a);
  const i128 b_lo =
      static_cast<i128>(reinterpret_cast<uintptr_t>(b.data)) + add_terms(shape, b.strides, &terms, &span_b);
  if (a_lo + span_a + a.item <= b_lo || b_lo + span_b + b.item <= a_lo) return Overlap::kNo;  // disjoint ranges
  terms.push_back({1, static_cast<uint64_t>(a.item + b.item - 2)});                           // the bytes u and v
  const i128 rhs = b_lo - a_lo + span_b + b.item - 1;
  if (rhs < 0) return Overlap::kNo;
  return solve_bounded_sum(std::move(terms), static_cast<u128>(rhs), max_work);
}

}  // namespace iterator
}  // namespace kjit
