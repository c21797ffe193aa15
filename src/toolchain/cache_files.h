// The file-system layer of the module cache: private directories, ownership
// checks, durable writes, checksums and the integrity record of an entry. Shared
// by the build cache (cache.cc) and the NVRTC image cache (elementwise/cuda_cache.cc).
#ifndef KJIT_SRC_TOOLCHAIN_CACHE_FILES_H_
#define KJIT_SRC_TOOLCHAIN_CACHE_FILES_H_

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kjit {
namespace cache_detail {

namespace fs = std::filesystem;

/// `name` as a file-name stem: itself when short and made of [A-Za-z0-9_], else
/// a sanitised prefix and a hash of the whole name (so long or odd names never hit
/// NAME_MAX and two names never share a stem).
std::string file_stem(const std::string& name);

/// XXH3-128 of `bytes` as 32 hex digits.
std::string hash_hex(const std::string& bytes);
/// `v` as 16 lower-case hex digits: the one hex spelling of the cache's hashes.
std::string hex64(uint64_t v);

/// The directory the cache really uses for `dir`: `dir` itself when it is ours and
/// not writable by group or others (created 0700 if missing), or `dir/kjit-<uid>`
/// when `dir` is a shared sticky directory (like /tmp). Throws CacheError for a
/// root others could write without the sticky bit, or one owned by another user.
fs::path private_cache_root(const fs::path& dir);

/// Creates `dir` (0700) if missing, then requires it to be a real directory owned
/// by us and not writable by group or others; CacheError naming `what` otherwise.
void ensure_private_dir(const fs::path& dir, const std::string& what);

/// Throws CacheError unless `st` (of `path`) is owned by the current user (or
/// root) and not writable by group or others.
void check_owned(const fs::path& path, const struct stat& st, const std::string& what);

/// Reads the regular file at `path` (never through a symlink) after check_owned.
/// false if it does not exist; CacheError naming the path and errno if it cannot
/// be read.
bool read_owned_file(const fs::path& path, std::string* out);

/// Size and XXH3-128 of the regular file at `path`, read in blocks, after
/// check_owned; false if it does not exist, CacheError if it cannot be read.
bool hash_owned_file(const fs::path& path, uint64_t* size, std::string* hash);

/// Writes `bytes` to a new file created 0600 and flushes it to disk.
void write_private_file(const fs::path& path, const std::string& bytes);

/// fsync of a file or directory; CacheError naming it on failure.
void sync_path(const fs::path& path);

/// Publishes `bytes` at `path` atomically and durably: a private temporary file
/// in the same directory, fsync, rename, fsync of the directory.
void publish_file(const fs::path& path, const std::string& bytes);

/// A header the compiler read, as it was when the entry was built.
struct Dependency {
  std::string path;  ///< absolute
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string hash;  ///< XXH3-128 of the contents
};

/// The integrity record of a cache entry, written at publish.
struct Manifest {
  uint64_t library_size = 0;
  std::string library_hash;
  std::vector<Dependency> dependencies;
};

std::string format_manifest(const Manifest& m);
/// false if `text` is not a whole, self-consistent manifest.
bool parse_manifest(const std::string& text, Manifest* out);

/// The prerequisites of a make rule written by `-MMD -MF` (escapes undone).
std::vector<std::string> parse_make_dependencies(const std::string& text);

/// Records `path` (absolute) as it is now; false if it cannot be read.
bool describe_dependency(const std::string& path, Dependency* out);

/// Why the first changed dependency no longer matches ("" if none did): a
/// different size, or a different mtime and different contents.
std::string changed_dependency(const std::vector<Dependency>& deps);

/// A single-file artifact with its checksum in front ("kjit-sealed 1 SIZE HASH\n"
/// then the bytes), for caches whose entries are one file (NVRTC images).
std::string seal(const std::string& bytes);
/// The bytes of a sealed file; false if the header or the checksum does not match.
bool unseal(const std::string& file, std::string* bytes);

/// `text` (ending in a newline) followed by the line `// kjit-stamp <XXH3-128 of
/// text>`: how kjit marks the small files it makes (lock files, build markers, kept
/// failed sources) as its own. The `//` keeps a stamped C++ source compilable.
std::string stamp(const std::string& text);
/// The text before a valid stamp line; false when `file` carries none.
bool unstamp(const std::string& file, std::string* text);

/// Reads the regular file `path` (never through a symlink) if it is ours and at most
/// `max_bytes` long; false otherwise (missing, foreign, too long, unreadable). For
/// the checks of cache maintenance, which must never fail on a file kjit did not make.
bool read_own_small_file(const fs::path& path, uint64_t max_bytes, std::string* out);

/// The contents of the lock file of `entry` ("<stem>-<key>"): its name, stamped.
std::string lock_file_text(const std::string& entry);
/// The marker every build directory gets first (and keeps once published as the
/// entry): file name and contents naming `entry`, stamped.
constexpr const char* kBuildMarker = "kjit-build";
std::string build_marker_text(const std::string& entry);
/// Whether `dir` holds kjit's build marker for `entry`.
bool has_build_marker(const fs::path& dir, const std::string& entry);
/// Whether `file` starts as kjit's sealed files do (seal's header).
bool starts_sealed(const std::string& file);
/// Whether the file at `path` is ours and a whole sealed file (NVRTC images,
/// toolchain records).
bool is_sealed_file(const fs::path& path);
/// Whether the file at `path` is a temporary publish_file left of a sealed file:
/// `<name>.tmp-XXXXXX`, ours, starting with the seal's header.
bool is_sealed_temporary(const fs::path& path);
/// Whether the file at `path` is ours and stamped (stamp).
bool is_stamped_file(const fs::path& path);

/// What removing a directory of the cache came to.
enum class Removal { kRemoved, kBusy, kFailed };
struct RemovalResult {
  Removal state = Removal::kRemoved;
  std::string reason;  ///< kFailed: what the system said, naming the path
};

/// Removes `dir` (an entry `entry` of the cache at `root`, or its build directory)
/// unless a process holds that entry's build lock; the lock is held while removing.
RemovalResult remove_if_unlocked(const fs::path& root, const std::string& entry, const fs::path& dir);

/// Whether `dir` is a directory kjit built for `entry`: it holds kjit's build marker
/// for that entry, or (an entry of a kjit before the markers) a whole manifest.
bool is_kjit_build(const fs::path& dir, const std::string& entry);

/// "<stem>-<key>" of a build directory name `.tmp-<stem>-<key>-XXXXXX[.old]`; "" if
/// the name is not one.
std::string build_dir_entry(const std::string& name);

/// Removes build directories (`.tmp-<entry>-XXXXXX`) in `root` left by killed builds:
/// only ours, only those kjit built (is_kjit_build), and only when that entry's
/// build lock is free; also stale temporary NVRTC images that carry kjit's seal.
/// Returns how many it removed.
int remove_stale_builds(const fs::path& root);

}  // namespace cache_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_CACHE_FILES_H_
