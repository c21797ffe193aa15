// The cache's file-system layer: every directory it creates is private, every
// file it trusts is ours, every publish is durable, every artifact is checksummed.
#include "toolchain/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kjit/errors.h"

namespace kjit {
namespace cache_detail {
namespace {

constexpr size_t kMaxStem = 64;         // keeps `<stem>-<key>.lock` and `.tmp-...` far below NAME_MAX
constexpr size_t kStemPrefix = 40;      // of a long name, kept readable before its hash
constexpr int64_t kImageTmpAge = 3600;  // s; an NVRTC image is written in milliseconds
constexpr size_t kHashBlock = 1 << 16;  // bytes read per step while hashing a library
constexpr const char* kManifestMagic = "kjit-manifest 1";
constexpr const char* kSealMagic = "kjit-sealed 1";
constexpr const char* kStampPrefix = "// kjit-stamp ";
constexpr uint64_t kMarkerBytes = 4096;                // a lock file or build marker is one short line and its stamp
constexpr uint64_t kManifestBytes = 64 << 20;          // a manifest lists headers: far below this
constexpr uint64_t kSealedBytes = uint64_t{1} << 30;   // NVRTC images and toolchain records
constexpr uint64_t kStampedBytes = uint64_t{1} << 30;  // kept failed sources

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& what, const fs::path& path, int err) {
  throw CacheError("kjit: cannot " + what + " " + path.string() + ": " + errno_text(err));
}

bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string hex128(const XXH128_hash_t& h) { return hex64(h.high64) + hex64(h.low64); }

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool trusted_owner(uid_t owner) { return owner == geteuid() || owner == 0; }

/// A descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Opens a regular file for reading, never through a symlink, and checks it is
/// ours; -1 with errno ENOENT if it does not exist.
int open_owned(const fs::path& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return -1;
    if (errno == ELOOP) throw CacheError("kjit: cache file " + path.string() + " is a symbolic link; refusing it");
    fail("read the cache file", path, errno);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    fail("stat the cache file", path, err);
  }
  try {
    check_owned(path, st, "cache file");
  } catch (...) {
    close(fd);
    throw;
  }
  return fd;
}

/// read() that retries on EINTR; CacheError naming `path` on failure.
size_t read_some(int fd, char* buf, size_t n, const fs::path& path) {
  while (true) {
    ssize_t got = read(fd, buf, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) fail("read the cache file", path, errno);
  }
}

void write_all(int fd, const std::string& bytes, const fs::path& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", path, errno);
    done += static_cast<size_t>(n);
  }
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

/// Hash of a dependency's contents; "" if it cannot be read.
std::string hash_plain_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  Fd guard(fd);
  XXH3_state_t* st = XXH3_createState();
  internal_check(st != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(st);
  std::string buf(kHashBlock, '\0');
  bool ok = true;
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    XXH3_128bits_update(st, buf.data(), static_cast<size_t>(n));
  }
  std::string out = ok ? hex128(XXH3_128bits_digest(st)) : "";
  XXH3_freeState(st);
  return out;
}

bool parse_u64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool older_than(const struct stat& st, int64_t seconds) { return std::time(nullptr) - st.st_mtime > seconds; }

/// Leftover temporary NVRTC images of killed processes (only those carrying kjit's
/// seal: a file kjit did not make never matches).
int remove_stale_images(const fs::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    struct stat st {};
    if (lstat(e.path().c_str(), &st) != 0 || !older_than(st, kImageTmpAge) || !is_sealed_temporary(e.path())) {
      continue;
    }
    removed += unlink(e.path().c_str()) == 0 ? 1 : 0;
  }
  return removed;
}

RemovalResult removal_failed(const std::string& what, const fs::path& path, const std::string& reason) {
  return RemovalResult{Removal::kFailed, "cannot " + what + " " + path.string() + ": " + reason};
}

/// Removes `dir`: an entry is first renamed to a fresh build directory name, so a
/// cache that cannot be written fails before anything in the entry is deleted.
RemovalResult remove_directory(const fs::path& root, const std::string& entry, const fs::path& dir) {
  fs::path doomed = dir;
  if (dir.filename().string().rfind(".tmp-", 0) != 0) {
    std::string pattern = (root / (".tmp-" + entry + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) return removal_failed("remove", dir, errno_text(errno));
    if (rename(dir.c_str(), pattern.c_str()) != 0) {  // onto the empty directory just made
      const int err = errno;
      rmdir(pattern.c_str());
      return removal_failed("remove", dir, errno_text(err));
    }
    doomed = pattern;
  }
  std::error_code ec;
  fs::remove_all(doomed, ec);
  if (ec) return removal_failed("remove", doomed, ec.message());
  return RemovalResult{};
}

}  // namespace

std::string build_dir_entry(const std::string& name) {
  if (name.rfind(".tmp-", 0) != 0) return "";
  std::string s = name.substr(5);  // after ".tmp-"
  if (s.size() > 4 && s.compare(s.size() - 4, 4, ".old") == 0) s.resize(s.size() - 4);
  if (s.size() < 7 + 33 || s[s.size() - 7] != '-') return "";
  s.resize(s.size() - 7);
  if (s[s.size() - 33] != '-' || !is_hex(s.substr(s.size() - 32), 32)) return "";
  return s;
}

/// Removes the directory `dir` of `entry` if no process holds that entry's build
/// lock (so no build owns it); the lock is held while removing.
RemovalResult remove_if_unlocked(const fs::path& root, const std::string& entry, const fs::path& dir) {
  const fs::path lock = root / "locks" / (entry + ".lock");
  const int fd = open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT) return removal_failed("open the lock file", lock, errno_text(errno));
  Fd guard(fd);  // no lock file: no build of this entry ever ran under this kjit
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return RemovalResult{Removal::kBusy, ""};
    return removal_failed("lock", lock, errno_text(errno));
  }
  RemovalResult out = remove_directory(root, entry, dir);
  if (fd >= 0) flock(fd, LOCK_UN);
  return out;
}

std::string stamp(const std::string& text) {
  const std::string body = text.empty() || text.back() == '\n' ? text : text + "\n";
  return body + kStampPrefix + hash_hex(body) + "\n";
}

bool unstamp(const std::string& file, std::string* text) {
  const size_t prefix = std::strlen(kStampPrefix);
  if (file.size() < prefix + 33 || file.back() != '\n') return false;
  const size_t start = file.size() - prefix - 33;
  if (file.compare(start, prefix, kStampPrefix) != 0 || (start > 0 && file[start - 1] != '\n')) return false;
  const std::string body = file.substr(0, start);
  if (file.compare(start + prefix, 32, hash_hex(body)) != 0) return false;
  *text = body;
  return true;
}

bool read_own_small_file(const fs::path& path, uint64_t max_bytes, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  Fd guard(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !trusted_owner(st.st_uid)) return false;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || static_cast<uint64_t>(st.st_size) > max_bytes) return false;
  out->clear();
  char buf[8192];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) return false;
  }
}

std::string lock_file_text(const std::string& entry) { return stamp("kjit-lock " + entry + "\n"); }

std::string build_marker_text(const std::string& entry) { return stamp("kjit-build " + entry + "\n"); }

bool has_build_marker(const fs::path& dir, const std::string& entry) {
  std::string text;
  return read_own_small_file(dir / kBuildMarker, kMarkerBytes, &text) && text == build_marker_text(entry);
}

bool is_kjit_build(const fs::path& dir, const std::string& entry) {
  if (has_build_marker(dir, entry)) return true;
  std::string text;
  Manifest m;
  return read_own_small_file(dir / "manifest", kManifestBytes, &text) && parse_manifest(text, &m);
}

bool starts_sealed(const std::string& file) { return file.rfind(std::string(kSealMagic) + " ", 0) == 0; }

bool is_sealed_file(const fs::path& path) {
  std::string file, bytes;
  return read_own_small_file(path, kSealedBytes, &file) && unseal(file, &bytes);
}

bool is_sealed_temporary(const fs::path& path) {
  const std::string name = path.filename().string();
  const size_t tmp = name.rfind(".tmp-");
  if (tmp == std::string::npos || tmp == 0 || name.size() - tmp != 11) return false;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  Fd guard(fd);
  struct stat st {};
  char head[32] = {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return false;
  const ssize_t n = read(fd, head, sizeof(head));
  return n > 0 && starts_sealed(std::string(head, static_cast<size_t>(n)));
}

bool is_stamped_file(const fs::path& path) {
  std::string file, text;
  return read_own_small_file(path, kStampedBytes, &file) && unstamp(file, &text);
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

std::string file_stem(const std::string& name) {
  bool plain = !name.empty() && name.size() <= kMaxStem;
  for (char c : name) plain = plain && safe_char(c);
  if (plain) return name;
  std::string prefix;
  for (size_t i = 0; i < name.size() && prefix.size() < kStemPrefix; ++i) prefix += safe_char(name[i]) ? name[i] : '_';
  return prefix + "_" + hex64(XXH3_64bits(name.data(), name.size()));
}

std::string hash_hex(const std::string& bytes) { return hex128(XXH3_128bits(bytes.data(), bytes.size())); }

void check_owned(const fs::path& path, const struct stat& st, const std::string& what) {
  if (!trusted_owner(st.st_uid)) {
    throw CacheError("kjit: refusing the " + what + " " + path.string() + ": it is owned by uid " +
                     std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(geteuid()) +
                     "); another user could have put code there. Remove it, or use a cache directory of your own "
                     "(KJIT_CACHE_DIR)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw CacheError("kjit: refusing the " + what + " " + path.string() + ": it is writable by " +
                     ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " + mode_text(st.st_mode) +
                     ", expected no group or other write permission); another user could replace its code. Run "
                     "'chmod go-w " +
                     path.string() + "' or remove it");
  }
}

void ensure_private_dir(const fs::path& dir, const std::string& what) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("create the " + what, dir, errno);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) fail("stat the " + what, dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    throw CacheError("kjit: the " + what + " " + dir.string() +
                     " is not a directory (a file or symbolic link is in its place); remove it");
  }
  check_owned(dir, st, what);
}

fs::path private_cache_root(const fs::path& dir) {
  std::error_code ec;
  if (!dir.parent_path().empty()) fs::create_directories(dir.parent_path(), ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("create the cache directory", dir, errno);
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) fail("stat the cache directory", dir, errno);  // a symlinked root is fine
  if (!S_ISDIR(st.st_mode)) throw CacheError("kjit: the cache directory " + dir.string() + " is not a directory");
  bool shared = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (shared && (st.st_mode & S_ISVTX) != 0) {
    // Like /tmp: others cannot rename or delete what we own there, so a private
    // subdirectory of ours is as safe as a private root.
    fs::path mine = dir / ("kjit-" + std::to_string(geteuid()));
    ensure_private_dir(mine, "cache directory");
    return mine;
  }
  if (shared) {
    throw CacheError("kjit: refusing the cache directory " + dir.string() + ": it is writable by " +
                     ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " + mode_text(st.st_mode) +
                     ") without the sticky bit, so another user could replace cached modules. Run 'chmod go-w " +
                     dir.string() + "' (or 'chmod +t' for a shared directory), or set KJIT_CACHE_DIR to a private one");
  }
  check_owned(dir, st, "cache directory");
  return dir;
}

bool read_owned_file(const fs::path& path, std::string* out) {
  int fd = open_owned(path);
  if (fd < 0) return false;
  Fd guard(fd);
  out->clear();
  char buf[8192];
  while (size_t n = read_some(fd, buf, sizeof(buf), path)) out->append(buf, n);
  return true;
}

bool hash_owned_file(const fs::path& path, uint64_t* size, std::string* hash) {
  int fd = open_owned(path);
  if (fd < 0) return false;
  Fd guard(fd);
  XXH3_state_t* st = XXH3_createState();
  internal_check(st != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(st);
  std::string buf(kHashBlock, '\0');
  uint64_t total = 0;
  try {
    while (size_t n = read_some(fd, buf.data(), buf.size(), path)) {
      XXH3_128bits_update(st, buf.data(), n);
      total += n;
    }
  } catch (...) {
    XXH3_freeState(st);
    throw;
  }
  *size = total;
  *hash = hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return true;
}

void write_private_file(const fs::path& path, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("create", path, errno);
  Fd guard(fd);
  write_all(fd, bytes, path);
  if (fsync(fd) != 0) fail("flush", path, errno);
}

void sync_path(const fs::path& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open", path, errno);
  Fd guard(fd);
  if (fsync(fd) != 0) fail("flush", path, errno);
}

void publish_file(const fs::path& path, const std::string& bytes) {
  std::string pattern = path.string() + ".tmp-XXXXXX";
  int fd = mkstemp(pattern.data());  // created 0600
  if (fd < 0) fail("create a temporary file beside", path, errno);
  Fd guard(fd);
  try {
    write_all(fd, bytes, pattern);
    if (fsync(fd) != 0) fail("flush", pattern, errno);
    if (rename(pattern.c_str(), path.c_str()) != 0) fail("publish", path, errno);
  } catch (...) {
    unlink(pattern.c_str());
    throw;
  }
  sync_path(path.parent_path());
}

std::string format_manifest(const Manifest& m) {
  std::ostringstream out;
  out << kManifestMagic << "\nlibrary " << m.library_size << ' ' << m.library_hash << '\n';
  for (const Dependency& d : m.dependencies) {
    out << "dep " << d.size << ' ' << d.mtime_ns << ' ' << d.hash << ' ' << d.path << '\n';
  }
  std::string body = out.str();
  return body + "end " + hash_hex(body) + "\n";
}

bool parse_manifest(const std::string& text, Manifest* out) {
  size_t end = text.rfind("end ");
  if (end == std::string::npos || text.compare(end + 4, std::string::npos, hash_hex(text.substr(0, end)) + "\n") != 0)
    return false;  // torn or edited: the record checks itself
  std::istringstream in(text.substr(0, end));
  std::string line, word;
  if (!std::getline(in, line) || line != kManifestMagic) return false;
  Manifest m;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string a, b, hash;
    fields >> word >> a;
    if (word == "library") {
      fields >> hash;
      if (!parse_u64(a, &m.library_size) || !is_hex(hash, 32)) return false;
      m.library_hash = hash;
      continue;
    }
    Dependency d;
    uint64_t mtime = 0;
    fields >> b >> d.hash;
    if (word != "dep" || !parse_u64(a, &d.size) || !parse_u64(b, &mtime) || !is_hex(d.hash, 32)) return false;
    d.mtime_ns = static_cast<int64_t>(mtime);
    std::getline(fields >> std::ws, d.path);
    if (d.path.empty()) return false;
    m.dependencies.push_back(std::move(d));
  }
  if (m.library_hash.empty()) return false;
  *out = std::move(m);
  return true;
}

std::vector<std::string> parse_make_dependencies(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  bool after_colon = false;
  auto flush = [&] {
    if (!word.empty() && after_colon) out.push_back(word);
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush();
      ++i;
    } else if ((c == '\\' && i + 1 < text.size() &&
                (text[i + 1] == ' ' || text[i + 1] == '#' || text[i + 1] == '\\')) ||
               (c == '$' && i + 1 < text.size() && text[i + 1] == '$')) {  // escapes: the next character as is
      word += text[++i];
    } else if (c == ':' && !after_colon && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) {
      word.clear();  // the target
      after_colon = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
      if (c == '\n') after_colon = false;  // -MP phony rules after the first line add nothing new
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

bool describe_dependency(const std::string& path, Dependency* out) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  out->path = path;
  out->size = static_cast<uint64_t>(st.st_size);
  out->mtime_ns = mtime_ns(st);
  out->hash = hash_plain_file(path);
  return !out->hash.empty();
}

std::string changed_dependency(const std::vector<Dependency>& deps) {
  for (const Dependency& d : deps) {
    struct stat st {};
    if (stat(d.path.c_str(), &st) != 0) return d.path + " is gone (" + errno_text(errno) + ")";
    if (static_cast<uint64_t>(st.st_size) != d.size) return d.path + " changed (size)";
    // Same size and time: unchanged. A new time alone (a touch, a checkout) is
    // settled by the contents.
    if (mtime_ns(st) != d.mtime_ns && hash_plain_file(d.path) != d.hash) return d.path + " changed";
  }
  return "";
}

std::string seal(const std::string& bytes) {
  return std::string(kSealMagic) + " " + std::to_string(bytes.size()) + " " + hash_hex(bytes) + "\n" + bytes;
}

bool unseal(const std::string& file, std::string* bytes) {
  size_t nl = file.find('\n');
  if (nl == std::string::npos || nl > 80) return false;
  std::istringstream header(file.substr(0, nl));
  std::string magic, version, size, hash;
  header >> magic >> version >> size >> hash;
  uint64_t n = 0;
  if (magic + " " + version != kSealMagic || !parse_u64(size, &n) || !is_hex(hash, 32)) return false;
  if (file.size() - nl - 1 != n) return false;
  std::string body = file.substr(nl + 1);
  if (hash_hex(body) != hash) return false;
  *bytes = std::move(body);
  return true;
}

int remove_stale_builds(const fs::path& root) {
  int removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    struct stat st {};
    if (name.rfind(".tmp-", 0) != 0 || lstat(e.path().c_str(), &st) != 0) continue;
    if (st.st_uid != geteuid() || !S_ISDIR(st.st_mode)) continue;  // only ours
    // Only what kjit made: a directory a person named `.tmp-...` is never touched.
    const std::string entry = build_dir_entry(name);
    if (entry.empty() || !is_kjit_build(e.path(), entry)) continue;
    removed += remove_if_unlocked(root, entry, e.path()).state == Removal::kRemoved ? 1 : 0;
  }
  return removed + remove_stale_images(root / "cuda-kernels");
}

}  // namespace cache_detail
}  // namespace kjit
