// Loop operands for the planners' and CUDA launchers' tests: OperandInfo records
// with given byte strides.
#ifndef KJIT_TESTS_CPP_LOOP_OPERANDS_H_
#define KJIT_TESTS_CPP_LOOP_OPERANDS_H_

#include <cstdint>
#include <vector>

#include "kjit/detail/loop_layout.h"

namespace kjit_test {

inline kjit::DimVector dims(const std::vector<int64_t>& v) {
  kjit::DimVector out;
  for (int64_t x : v) out.push_back(x);
  return out;
}

/// One operand per entry, with these byte strides, fastest dim first.
inline kjit::detail::Operands operands_fastest_first(const std::vector<std::vector<int64_t>>& strides) {
  kjit::detail::Operands ops;
  for (const std::vector<int64_t>& s : strides) {
    kjit::OperandInfo op;
    op.strides = dims(s);
    ops.push_back(op);
  }
  return ops;
}

/// The same with the strides given slowest dim first (as a broadcast shape's).
inline kjit::detail::Operands operands_slowest_first(const std::vector<std::vector<int64_t>>& strides) {
  std::vector<std::vector<int64_t>> reversed;
  for (const std::vector<int64_t>& s : strides) reversed.emplace_back(s.rbegin(), s.rend());
  return operands_fastest_first(reversed);
}

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_LOOP_OPERANDS_H_
