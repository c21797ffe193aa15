// The cache key of a build, part by part: what decides whether two builds are the
// same (build_key, kjit/build.h), and, on a miss, which part differs from the
// newest earlier build of the same name (said when verbose).
#ifndef KJIT_SRC_TOOLCHAIN_CACHE_KEY_H_
#define KJIT_SRC_TOOLCHAIN_CACHE_KEY_H_

#include <filesystem>
#include <string>
#include <vector>

#include "kjit/build.h"

namespace kjit {
namespace cache_detail {

/// One named part of the key ("source", "extra_cflags", ...) and the fields hashed
/// for it, in key order; parts a request does not use are left out.
struct KeyPart {
  const char* label;
  std::vector<std::string> fields;
};
std::vector<KeyPart> key_parts(const BuildRequest& r);

/// An entry's `key` file: a line "<label>\t<hash of the part>" per part.
std::string format_key_parts(const std::vector<KeyPart>& parts);

/// The labels whose hashes differ between two `key` files, or that only one of
/// them has, in the order of `now`, then `before`'s own.
std::vector<std::string> changed_key_parts(const std::string& before, const std::string& now);

/// Why `entry` ("<stem>-<key>") is not in the cache at `root`: which key parts
/// differ from the newest other entry of the same stem and how old that one is,
/// or that there is none. `now` is this build's `key` file.
std::string describe_cache_miss(const std::filesystem::path& root, const std::string& stem, const std::string& entry,
                                const std::string& now);

}  // namespace cache_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_CACHE_KEY_H_
