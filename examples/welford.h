// Welford's running mean and M2 as a kjit.reduction accumulator (docs/reductions.md,
// "Accumulators of several values"): merge combines two partial results (Chan's
// formula). Read as reduce_code by the tests and bench/bench_expressions.py.
#include <cstdint>

template <typename T>
struct Welford {
  T mean, m2;
  int64_t n;
};
template <typename T>
Welford<T> merge(Welford<T> a, Welford<T> b) {
  if (a.n == 0) return b;
  if (b.n == 0) return a;
  const int64_t n = a.n + b.n;
  const T delta = b.mean - a.mean;
  return {a.mean + delta * T(b.n) / T(n), a.m2 + b.m2 + delta * delta * T(a.n) * T(b.n) / T(n), n};
}
