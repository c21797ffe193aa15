// The exact overlap test of elementwise outputs (src/iterator/overlap.h)
// against brute force, in the manner of NumPy's test_mem_overlap.py: random
// bounded equations and random strided views of one buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "iterator/overlap.h"

namespace {

using kjit::iterator::may_share_memory;
using kjit::iterator::Overlap;
using kjit::iterator::OverlapTerm;
using kjit::iterator::solve_bounded_sum;
using kjit::iterator::StridedBytes;

/// Whether sum(coef * x) == rhs has a bounded solution, by enumerating every x.
bool brute_force_sum(const std::vector<OverlapTerm>& terms, int64_t rhs) {
  std::vector<uint64_t> x(terms.size(), 0);
  while (true) {
    int64_t sum = 0;
    for (size_t i = 0; i < terms.size(); ++i) sum += static_cast<int64_t>(terms[i].coef * x[i]);
    if (sum == rhs) return true;
    size_t i = 0;
    for (; i < terms.size(); ++i) {
      if (++x[i] <= terms[i].bound) break;
      x[i] = 0;
    }
    if (i == terms.size()) return false;
  }
}

TEST(ElementwiseOverlap, BoundedSumMatchesBruteForce) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<OverlapTerm> terms(1 + rng() % 4);
    int64_t most = 0;
    for (OverlapTerm& t : terms) {
      t.coef = 1 + rng() % 40;
      t.bound = rng() % 7;
      most += static_cast<int64_t>(t.coef * t.bound);
    }
    const int64_t rhs = static_cast<int64_t>(rng() % (most + 3));
    const Overlap got = solve_bounded_sum(terms, static_cast<kjit::iterator::OverlapUInt>(rhs), 1 << 20);
    ASSERT_NE(got, Overlap::kTooHard);
    EXPECT_EQ(got == Overlap::kYes, brute_force_sum(terms, rhs)) << "trial " << trial << " rhs " << rhs;
  }
}

TEST(ElementwiseOverlap, BoundExceededIsTooHard) {
  // 2^40 values of the big term and no solution: the residue classes cannot all be skipped in one step.
  std::vector<OverlapTerm> terms = {{1000003, 1u << 20}, {999983, 1u << 20}, {7, 3}};
  EXPECT_EQ(solve_bounded_sum(terms, 1000003ull * 5 + 999983ull * 9 + 2, 1), Overlap::kTooHard);
  EXPECT_EQ(solve_bounded_sum(terms, 1000003ull * 5 + 999983ull * 9 + 14, 1 << 20), Overlap::kYes);
}

/// The bytes a strided operand covers.
std::set<int64_t> bytes_of(const std::vector<int64_t>& shape, int64_t base, const std::vector<int64_t>& strides,
                           int64_t item) {
  std::set<int64_t> out;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t n : shape) {
    if (n == 0) return out;
  }
  while (true) {
    int64_t at = base;
    for (size_t d = 0; d < shape.size(); ++d) at += idx[d] * strides[d];
    for (int64_t b = 0; b < item; ++b) out.insert(at + b);
    size_t d = 0;
    for (; d < shape.size(); ++d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d == shape.size()) return out;
  }
}

TEST(ElementwiseOverlap, StridedViewsMatchBruteForce) {
  std::mt19937 rng(99);
  static char buffer[4096];
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int64_t> shape(1 + rng() % 3);
    for (int64_t& n : shape) n = rng() % 5;
    auto strides = [&] {
      std::vector<int64_t> s(shape.size());
      for (int64_t& v : s) v = static_cast<int64_t>(rng() % 49) - 24;
      return s;
    };
    std::vector<int64_t> sa = strides(), sb = strides();
    const int64_t item_a = 1 << (rng() % 4), item_b = 1 << (rng() % 4);
    const int64_t base_a = 1000 + rng() % 64, base_b = 1000 + rng() % 64;
    std::set<int64_t> a = bytes_of(shape, base_a, sa, item_a), b = bytes_of(shape, base_b, sb, item_b);
    const bool shared = std::any_of(a.begin(), a.end(), [&](int64_t x) { return b.count(x) != 0; });
    const Overlap got =
        may_share_memory(shape, {buffer + base_a, sa.data(), item_a}, {buffer + base_b, sb.data(), item_b});
    ASSERT_NE(got, Overlap::kTooHard);
    EXPECT_EQ(got == Overlap::kYes, shared) << "trial " << trial;
  }
}

TEST(ElementwiseOverlap, InterleavedViewsAndColumnBlocksShareNothing) {
  static char x[160];
  const std::vector<int64_t> five = {5};
  const std::vector<int64_t> s16 = {16};
  // x[1::2] and x[::2] of 10 float64.
  EXPECT_EQ(may_share_memory(five, {x + 8, s16.data(), 8}, {x, s16.data(), 8}), Overlap::kNo);
  // z.real and z.imag of 5 complex128: the same, 8 bytes apart.
  EXPECT_EQ(may_share_memory(five, {x, s16.data(), 8}, {x + 8, s16.data(), 8}), Overlap::kNo);
  // Columns 0..1 and 2..3 of a 4x4 float64 matrix (row stride 32 bytes).
  const std::vector<int64_t> shape = {4, 2}, s = {32, 8};
  EXPECT_EQ(may_share_memory(shape, {x, s.data(), 8}, {x + 16, s.data(), 8}), Overlap::kNo);
  EXPECT_EQ(may_share_memory(shape, {x, s.data(), 8}, {x + 8, s.data(), 8}), Overlap::kYes);
  // A float64 view and an overlapping float32 view one element in.
  EXPECT_EQ(may_share_memory(five, {x, s16.data(), 8}, {x + 4, s16.data(), 4}), Overlap::kYes);
}

}  // namespace
