// An online logsumexp as a kjit.reduction accumulator: the running max and the sum
// of exp(x - max). Read as reduce_code by the tests and bench/bench_expressions.py.
#include <cmath>
#include <limits>
template <typename T>
struct Lse {
  T max, sum;
};
template <typename T>
Lse<T> merge(Lse<T> a, Lse<T> b) {
  if (a.sum == T(0)) return b;
  if (b.sum == T(0)) return a;
  const T m = a.max > b.max ? a.max : b.max;
  return {m, a.sum * std::exp(a.max - m) + b.sum * std::exp(b.max - m)};
}
