// An online logsumexp as a kjit.reduction accumulator: the running max and the sum
// of exp(x - max). Read as reduce_code by the tests and bench/bench_expressions.py.
#include <cmath>
#include <limits>
template <typename T>
struct Lse {
  T max, sum;
};
// The larger max stays and the other sum is scaled down to it: one exp per merge,
// and no branch, so the loop vectorises (an empty side has max -inf and adds 0).
template <typename T>
Lse<T> merge(Lse<T> a, Lse<T> b) {
  const bool a_big = a.max >= b.max;
  const T hi = a_big ? a.max : b.max, lo = a_big ? b.max : a.max;
  const T big_sum = a_big ? a.sum : b.sum, small_sum = a_big ? b.sum : a.sum;
  const T scale = lo == -std::numeric_limits<T>::infinity() ? T(0) : std::exp(lo - hi);
  return {hi, big_sum + small_sum * scale};
}
