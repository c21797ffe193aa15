// What `kjit cache` lists and prunes: the entries of a cache directory (module and
// object builds, NVRTC images), when each was last used and what made it, and
// removal under each entry's build lock.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "toolchain/cache_files.h"

namespace kjit {
namespace {

namespace fs = std::filesystem;
namespace cd = cache_detail;

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

/// "<stem>-<32 hex digits>": the name of a build entry; its stem, or "".
std::string entry_stem(const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || name.size() - dash - 1 != 32) return "";
  return is_hex(name.substr(dash + 1)) ? name.substr(0, dash) : "";
}

uint64_t bytes_under(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(path, ec))) return fs::file_size(path, ec);
  uint64_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    struct stat st {};
    if (lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

std::string first_line_of(const fs::path& file) {
  std::string text;
  try {
    if (!cd::read_owned_file(file, &text)) return "";
  } catch (const CacheError&) {
    return "";
  }
  return text.substr(0, text.find('\n'));
}

/// Whether `dir` is a build entry kjit made: named `<stem>-<key>`, ours, and holding
/// kjit's build marker or a whole manifest (a look-alike directory is never touched).
bool is_kjit_entry(const fs::path& dir, struct stat* st) {
  const std::string name = dir.filename().string();
  if (entry_stem(name).empty() || lstat(dir.c_str(), st) != 0 || !S_ISDIR(st->st_mode)) return false;
  return st->st_uid == geteuid() && cd::is_kjit_build(dir, name);
}

/// A build entry's record, or false when `dir` is not one kjit made.
bool describe_build(const fs::path& dir, CacheEntry* out) {
  struct stat st {};
  if (!is_kjit_entry(dir, &st)) return false;
  const std::string stem = entry_stem(dir.filename().string());
  std::error_code ec;
  const bool object = fs::exists(dir / (stem + ".o"), ec);
  out->path = dir.string();
  out->name = stem;
  out->kind = object ? "object" : stem.rfind("kjit_ew_", 0) == 0 ? "elementwise kernel" : "module";
  out->bytes = bytes_under(dir);
  out->last_used = st.st_mtime;  // a cache hit touches the directory (kjit cache's 'last used')
  out->made_by = first_line_of(dir / "origin");
  return true;
}

/// The NVRTC images of `root/cuda-kernels`: files whose seal checks.
void add_cuda_images(const fs::path& root, std::vector<CacheEntry>* out) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root / "cuda-kernels", ec)) {
    const std::string name = e.path().filename().string();
    struct stat st {};
    if (lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !cd::is_sealed_file(e.path())) continue;
    CacheEntry c;
    c.path = e.path().string();
    c.name = name.substr(0, name.find('-'));
    c.kind = "CUDA image";
    c.bytes = static_cast<uint64_t>(st.st_size);
    c.last_used = st.st_mtime;
    out->push_back(std::move(c));
  }
}

/// The cache root of `dir` when it exists (never created by a listing), else "".
fs::path existing_root(const std::string& dir) {
  const fs::path given = absolute_cache_dir(dir.empty() ? default_cache_dir() : dir);
  std::error_code ec;
  if (!fs::exists(given, ec)) return {};
  return cd::private_cache_root(given);
}

std::vector<CacheEntry> entries_of(const fs::path& root) {
  std::vector<CacheEntry> out;
  if (root.empty()) return out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    CacheEntry c;
    if (describe_build(e.path(), &c)) out.push_back(std::move(c));
  }
  add_cuda_images(root, &out);
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) {
    return a.last_used != b.last_used ? a.last_used > b.last_used : a.path < b.path;
  });
  return out;
}

/// Removes one entry under its build lock (an NVRTC image is one atomic unlink).
cd::RemovalResult remove_entry(const fs::path& root, const CacheEntry& e) {
  if (e.kind != "CUDA image") return cd::remove_if_unlocked(root, fs::path(e.path).filename().string(), e.path);
  if (unlink(e.path.c_str()) == 0) return cd::RemovalResult{};
  return cd::RemovalResult{cd::Removal::kFailed, "cannot remove " + e.path + ": " + std::strerror(errno)};
}

/// The entry a lock file `<entry>.lock` is for, when kjit made it (its stamp names
/// that entry); else "".
std::string lock_entry(const fs::path& file) {
  constexpr uint64_t kLockBytes = 4096;
  const std::string name = file.filename().string();
  const size_t suffix = name.rfind(".lock");
  if (suffix == std::string::npos || suffix == 0 || suffix + 5 != name.size()) return "";
  std::string entry = name.substr(0, suffix);
  std::string text;
  if (!cd::read_own_small_file(file, kLockBytes, &text) || text != cd::lock_file_text(entry)) return "";
  return entry;
}

/// Lock files kjit made whose entry is gone and whose lock nobody holds.
int remove_orphan_locks(const fs::path& root) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root / "locks", ec)) {
    const std::string entry = lock_entry(e.path());
    if (entry.empty() || fs::exists(fs::symlink_status(root / entry, ec))) continue;
    const int fd = open(e.path().c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      removed += unlink(e.path().c_str()) == 0 ? 1 : 0;
      flock(fd, LOCK_UN);
    }
    close(fd);
  }
  return removed;
}

/// Whether `path`, a child of the cache root's folder `folder` ("" for the root
/// itself), is something kjit made there.
bool made_by_kjit(const std::string& folder, const fs::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return true;  // gone meanwhile: nothing to report
  if (folder == "locks") return !lock_entry(path).empty();
  if (folder == "cuda-kernels" || folder == "toolchains") {
    return cd::is_sealed_file(path) || cd::is_sealed_temporary(path);
  }
  if (folder == "failed") return cd::is_stamped_file(path);
  const std::string name = path.filename().string();
  if (name == "locks" || name == "cuda-kernels" || name == "toolchains" || name == "failed") {
    return S_ISDIR(st.st_mode);
  }
  const std::string building = cd::build_dir_entry(name);
  if (!building.empty()) return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && cd::is_kjit_build(path, building);
  return is_kjit_entry(path, &st);
}

std::vector<std::string> foreign_under(const fs::path& root) {
  std::vector<std::string> out;
  if (root.empty()) return out;
  for (const char* folder : {"", "locks", "cuda-kernels", "failed", "toolchains"}) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(root / folder, ec)) {
      if (made_by_kjit(folder, e.path())) continue;
      struct stat st {};
      const bool dir = lstat(e.path().c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      out.push_back(e.path().string() + (dir ? "/" : ""));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool chosen(const CacheEntry& e, const PruneOptions& o, int64_t now, uint64_t* kept_bytes) {
  if (o.all) return true;
  if (o.older_than_seconds >= 0 && now - e.last_used > o.older_than_seconds) return true;
  if (o.max_bytes >= 0 && *kept_bytes + e.bytes > static_cast<uint64_t>(o.max_bytes)) return true;
  *kept_bytes += e.bytes;
  return false;
}

}  // namespace

std::vector<CacheEntry> list_cache(const std::string& dir) { return entries_of(existing_root(dir)); }

std::vector<std::string> foreign_cache_files(const std::string& dir) { return foreign_under(existing_root(dir)); }

PruneResult prune_cache(const std::string& dir, const PruneOptions& options) {
  PruneResult result;
  const fs::path root = existing_root(dir);
  if (root.empty()) return result;
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  uint64_t kept_bytes = 0;
  for (const CacheEntry& e : entries_of(root)) {  // most recently used first: they are kept first
    if (e.path == options.keep) {
      kept_bytes += e.bytes;
      continue;
    }
    if (!chosen(e, options, now, &kept_bytes)) continue;
    const cd::RemovalResult done = options.dry_run ? cd::RemovalResult{} : remove_entry(root, e);
    if (done.state == cd::Removal::kRemoved) {
      result.freed_bytes += e.bytes;
      result.removed.push_back(e);
    } else if (done.state == cd::Removal::kBusy) {
      result.busy.push_back(e);
    } else {
      result.failed.push_back(PruneFailure{e, done.reason});
    }
  }
  if (!options.dry_run) {
    cd::remove_stale_builds(root);
    result.lock_files_removed = remove_orphan_locks(root);
  }
  result.skipped = foreign_under(root);
  return result;
}

int64_t parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 18) return -1;
  int64_t value = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.back() == 'B')) unit.pop_back();  // "MB", "MiB" -> "M", "MI"
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();
  const std::string units = "KMGT";
  if (unit.empty() || unit == "B") return value;
  const size_t power = units.find(unit);
  if (unit.size() != 1 || power == std::string::npos) return -1;
  for (size_t p = 0; p <= power; ++p) {
    if (value > (INT64_MAX >> 10)) return -1;
    value <<= 10;
  }
  return value;
}

int64_t cache_max_size_from_env() {
  const char* text = std::getenv("KJIT_CACHE_MAX_SIZE");
  if (text == nullptr || *text == '\0') return -1;
  const int64_t bytes = parse_byte_size(text);
  static bool warned = false;
  if (bytes < 0 && !warned) {
    warned = true;
    std::fprintf(stderr, "[kjit] KJIT_CACHE_MAX_SIZE='%s' is not a size (e.g. 500M, 2G, or bytes); ignored\n", text);
  }
  return bytes;
}

}  // namespace kjit
