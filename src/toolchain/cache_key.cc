// The cache key, part by part (cache_key.h).
#include "toolchain/cache_key.h"

#include <sys/stat.h>

#include <ctime>
#include <sstream>

#define XXH_INLINE_ALL
#include <tvm/ffi/c_api.h>
#include <xxhash.h>

#include "kjit/errors.h"
#include "kjit/version.h"
#include "toolchain/cache_files.h"

namespace kjit {
namespace cache_detail {
namespace {

std::vector<std::string> counted(const std::vector<std::string>& list) {
  std::vector<std::string> out{std::to_string(list.size())};
  out.insert(out.end(), list.begin(), list.end());
  return out;
}

/// Each field, then a NUL: "ab","c" and "a","bc" hash differently.
void add_fields(XXH3_state_t* st, const std::vector<std::string>& fields) {
  for (const std::string& f : fields) {
    XXH3_128bits_update(st, f.data(), f.size());
    XXH3_128bits_update(st, "\0", 1);
  }
}

std::string part_hash(const KeyPart& part) {
  XXH3_state_t* st = XXH3_createState();
  internal_check(st != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(st);
  add_fields(st, part.fields);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return hex64(h.high64) + hex64(h.low64);
}

/// label -> hash of a `key` file, in file order.
std::vector<std::pair<std::string, std::string>> parse_key_parts(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

std::string age_text(time_t then) {
  const long long s = static_cast<long long>(std::time(nullptr) - then);
  if (s < 120) return std::to_string(s < 0 ? 0 : s) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min";
  if (s < 172800) return std::to_string(s / 3600) + " h";
  return std::to_string(s / 86400) + " days";
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    out += i == 0 ? "" : (i + 1 == words.size() ? " and " : ", ");
    out += words[i];
  }
  return out;
}

}  // namespace

std::vector<KeyPart> key_parts(const BuildRequest& r) {
  std::vector<KeyPart> parts;
  parts.push_back({"kjit version", {"kjit " KJIT_VERSION}});
  parts.push_back({"tvm-ffi version",
                   {"tvm-ffi " + std::to_string(TVM_FFI_VERSION_MAJOR) + "." + std::to_string(TVM_FFI_VERSION_MINOR) +
                    "." + std::to_string(TVM_FFI_VERSION_PATCH)}});
  parts.push_back({"compiler", {find_toolchain().identity}});
  parts.push_back({"extra_cflags", counted(r.extra_cflags)});
  parts.push_back({"extra_ldflags", counted(r.extra_ldflags)});
  parts.push_back({"include paths", counted(r.include_paths)});
  parts.push_back({"name", {r.name}});
  parts.push_back({"source", {r.source}});
  if (r.object_only || !r.objects.empty()) {  // keys of plain builds stay what they were
    KeyPart objects{"linked objects", {r.object_only ? "object" : "library"}};
    for (const BuildRequest& o : r.objects) objects.fields.push_back(build_key(o));
    parts.push_back(objects);
  }
  if (r.relocatable) parts.push_back({"relocatable option", {"relocatable"}});  // other keys stay what they were
  if (!r.machine_cflags.empty()) parts.push_back({"machine flags", counted(r.machine_cflags)});  // portable keys too
  if (!r.cuda_source.empty()) {  // host-only keys stay what they were
    parts.push_back({"CUDA toolkit", {find_cuda_toolchain().identity}});
    parts.push_back({"CUDA source", {r.cuda_source}});
    parts.push_back({"CUDA flags", counted(r.cuda_flags)});
    KeyPart archs{"CUDA architectures", {}};
    for (const CudaArch& a : r.cuda_archs) archs.fields.push_back(a.text());
    parts.push_back(archs);
  }
  return parts;
}

std::string format_key_parts(const std::vector<KeyPart>& parts) {
  std::string out;
  for (const KeyPart& p : parts) out += std::string(p.label) + "\t" + part_hash(p) + "\n";
  return out;
}

std::vector<std::string> changed_key_parts(const std::string& before, const std::string& now) {
  const auto old_parts = parse_key_parts(before), new_parts = parse_key_parts(now);
  auto find = [](const std::vector<std::pair<std::string, std::string>>& parts, const std::string& label) {
    for (const auto& p : parts) {
      if (p.first == label) return &p.second;
    }
    return static_cast<const std::string*>(nullptr);
  };
  std::vector<std::string> out;
  for (const auto& p : new_parts) {
    const std::string* old = find(old_parts, p.first);
    if (old == nullptr || *old != p.second) out.push_back(p.first);
  }
  for (const auto& p : old_parts) {
    if (find(new_parts, p.first) == nullptr) out.push_back(p.first);
  }
  return out;
}

std::string describe_cache_miss(const fs::path& root, const std::string& stem, const std::string& entry,
                                const std::string& now) {
  fs::path newest;
  time_t newest_time = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name == entry || name.size() != stem.size() + 33 || name.compare(0, stem.size() + 1, stem + "-") != 0) {
      continue;
    }
    struct stat st {};
    if (lstat((e.path() / "key").c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (newest.empty() || st.st_mtime > newest_time) {
      newest = e.path();
      newest_time = st.st_mtime;
    }
  }
  if (newest.empty()) return "cache miss: no earlier build of this name in " + root.string();
  std::string before;
  try {
    if (!read_owned_file(newest / "key", &before)) before.clear();
  } catch (const CacheError&) {
    before.clear();  // someone else's file: compare with nothing rather than trust it
  }
  const std::vector<std::string> changed = changed_key_parts(before, now);
  const std::string since = " since the build of " + age_text(newest_time) + " ago (" + newest.string() + ")";
  if (changed.empty()) return "cache miss: no key part changed" + since;
  return "cache miss: the " + joined(changed) + " changed" + since;
}

}  // namespace cache_detail

std::string build_key(const BuildRequest& r) {
  XXH3_state_t* st = XXH3_createState();
  internal_check(st != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(st);
  for (const cache_detail::KeyPart& part : cache_detail::key_parts(r)) cache_detail::add_fields(st, part.fields);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return cache_detail::hex64(h.high64) + cache_detail::hex64(h.low64);
}

}  // namespace kjit
