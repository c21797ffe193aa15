// A reduction kernel's types in messages and as its key.
#include "reduction/reduction_types.h"

#include <string>

namespace kjit {

std::string RedKernelTypes::text() const {
  std::string s;
  for (EwType t : inputs) s += (s.empty() ? "" : ", ") + std::string(ew_type_name(t));
  return "(" + s + ") -> " + ew_type_name(output) + ", accumulating in " + ew_type_name(acc);
}

std::string RedKernelTypes::key() const {
  std::string k;
  for (EwType t : inputs) k += static_cast<char>('A' + static_cast<int>(t));
  k += '|';
  k += static_cast<char>('A' + static_cast<int>(acc));
  k += static_cast<char>('A' + static_cast<int>(output));
  return k;
}

std::string arg_better_expr(const std::string& callee) {
  return "__b != __b ? false : __a != __a ? true : static_cast<bool>(" + callee + "(__a, __b))";
}

}  // namespace kjit
