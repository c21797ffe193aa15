// "Did you mean": the candidate closest to a misspelt name, for messages that name
// what the user probably meant (a dtype, a function of the sources).
#ifndef KJIT_SRC_SUPPORT_CLOSEST_NAME_H_
#define KJIT_SRC_SUPPORT_CLOSEST_NAME_H_

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace kjit {

/// Levenshtein distance.
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// The candidate at most two edits from `name` (the closest; the first of equals),
/// or one equal to it but for case and '_' (rms_norm, RMSNorm and rmsnorm); "" when
/// none is, or `name` is shorter than 3 characters (everything is close to those).
inline std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  auto folded = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
  };
  if (name.size() < 3) return "";
  std::string best;
  size_t best_distance = 3;
  for (const std::string& c : candidates) {
    if (c == name) continue;
    const size_t d = folded(c) == folded(name) ? 0 : edit_distance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace kjit

#endif  // KJIT_SRC_SUPPORT_CLOSEST_NAME_H_
