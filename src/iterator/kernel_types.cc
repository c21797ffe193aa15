// EwKernelTypes (kernel_types.h).
#include "iterator/kernel_types.h"

#include <string>
#include <vector>

namespace kjit {

std::string EwKernelTypes::text() const {
  auto list = [](const std::vector<EwType>& v) {
    std::string s;
    for (EwType t : v) s += (s.empty() ? "" : ", ") + std::string(ew_type_name(t));
    return s;
  };
  return "(" + list(inputs) + ") -> " + (outputs.size() == 1 ? list(outputs) : "(" + list(outputs) + ")") +
         ", computing in " + ew_type_name(compute) +
         (half_result ? std::string(" rounded to ") + ew_type_name(*half_result) : std::string());
}

}  // namespace kjit
