// probe_version: a compiler's `--version`, recorded per installed binary.
#include "toolchain/version_probe.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kjit/errors.h"
#include "toolchain/cache_files.h"

namespace kjit {
namespace build_detail {
namespace {

namespace fs = std::filesystem;
namespace cd = cache_detail;

/// The file that records `command`'s result while its binary is `real` with
/// status `st`: the key covers everything that changes when the binary does.
fs::path record_path(const std::vector<std::string>& command, const std::string& real, const struct stat& st) {
  std::string key = "kjit-version-probe 1";
  for (const std::string& word : command) key += '\0' + word;
  char stat_text[200];
  std::snprintf(stat_text, sizeof stat_text, "%llu %llu %lld %lld.%ld %lld.%ld",
                static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec), st.st_mtim.tv_nsec,
                static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
  key += '\0' + real + '\0' + stat_text;
  return fs::path("toolchains") / (cd::hash_hex(key) + ".version");
}

/// The recorded output at `path` under the default cache root; false when there
/// is none or it is damaged (its seal does not match).
bool read_record(const fs::path& root, const fs::path& path, std::string* output) {
  std::string sealed;
  return cd::read_owned_file(root / path, &sealed) && cd::unseal(sealed, output);
}

void write_record(const fs::path& root, const fs::path& path, const std::string& output) {
  cd::ensure_private_dir(root / path.parent_path(), "toolchain record directory");
  cd::publish_file(root / path, cd::seal(output));
}

}  // namespace

bool is_compiler_wrapper(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  for (const char* wrapper : {"ccache", "sccache", "distcc", "icecc", "buildcache"}) {
    if (name.find(wrapper) != std::string::npos) return true;
  }
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  in.read(magic, 2);
  return magic[0] == '#' && magic[1] == '!';  // a script: whatever it runs may change
}

ProcessResult probe_version(const std::vector<std::string>& command) {
  std::error_code ec;
  const fs::path real = command.empty() ? fs::path() : fs::canonical(command[0], ec);
  struct stat st {};
  if (command.empty() || ec || stat(real.c_str(), &st) != 0 || is_compiler_wrapper(real.string())) {
    return run_process(command);
  }
  const fs::path record = record_path(command, real.string(), st);
  fs::path root;
  try {
    root = cd::private_cache_root(default_cache_dir());
    ProcessResult recorded{0, ""};
    if (read_record(root, record, &recorded.output)) return recorded;
  } catch (const CacheError&) {
    root.clear();  // an unusable cache root: probe, and record nothing
  }
  ProcessResult result = run_process(command);
  if (result.exit_code != 0 || root.empty()) return result;
  try {
    write_record(root, record, result.output);
  } catch (const CacheError&) {
    // The record only saves time: a full disk or a read-only cache costs a probe.
  }
  return result;
}

}  // namespace build_detail
}  // namespace kjit
