#include "signature/describe.h"

#include <numeric>

namespace kjit {

std::string param_type_text(const Param& p) {
  std::string full = to_string(p);
  return full.substr(p.name.size() + 2);
}

std::string packed_values(const TensorSpec& t) {
  std::string out;
  for (const DTypeInfo& d : t.dtypes) out += (out.empty() ? "" : "|") + std::string(d.name);
  return out;
}

int packed_bits(const TensorSpec& t) { return t.dtypes[0].dl.bits * t.dtypes[0].dl.lanes; }

std::string expected_dtype_text(const TensorSpec& t) {
  std::string out;
  if (t.dtypes.size() == 1) {
    out = t.dtypes[0].name;
  } else {
    out = "one of ";
    for (size_t i = 0; i < t.dtypes.size(); ++i) out += (i ? ", " : "") + std::string(t.dtypes[i].name);
  }
  if (!is_packed(t)) return out;
  int bits = packed_bits(t);
  int group = std::lcm(8, bits);  // bits of the fewest whole bytes holding whole values
  std::string per = 8 % bits == 0 ? std::to_string(8 / bits) + " per byte"
                                  : std::to_string(group / bits) + " per " + std::to_string(group / 8) + " bytes";
  return out + " (or int8/uint8 bytes packing its values, " + per + ")";
}

}  // namespace kjit
