// The stub precompiled header: built at kjit build time, checked before each use.
#include "toolchain/pch.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "kjit/errors.h"

namespace kjit {
namespace fs = std::filesystem;
namespace cd = cache_detail;

namespace pch_detail {
namespace {

constexpr const char* kStampMagic = "kjit-pch 1";

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool read_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

/// "size mtime hash path" (the path to the end of the line); false if malformed.
bool parse_dependency(std::istringstream& fields, cd::Dependency* d) {
  long long mtime = 0;
  if (!(fields >> d->size >> mtime >> d->hash) || d->hash.size() != 32) return false;
  d->mtime_ns = mtime;
  std::getline(fields >> std::ws, d->path);
  return !d->path.empty();
}

std::string format_dependency(const cd::Dependency& d) {
  return std::to_string(d.size) + " " + std::to_string(d.mtime_ns) + " " + d.hash + " " + d.path;
}

/// The directory a header's root names, as this process sees it.
std::string root_dir(const std::string& root) {
  if (root == "kjit") return system_paths().kjit_include;
  if (root == "tvm-ffi") return system_paths().tvm_ffi_include;
  return "";
}

std::string resolve(const Header& h) { return h.root == "/" ? h.dep.path : root_dir(h.root) + "/" + h.dep.path; }

/// `path` relative to `dir` if it lies inside it, else "".
std::string inside(const std::string& path, const std::string& dir) {
  std::string d = fs::path(dir).lexically_normal().string();
  if (!d.empty() && d.back() != '/') d += '/';
  return path.compare(0, d.size(), d) == 0 ? path.substr(d.size()) : "";
}

/// The compiler's `#include <...>` search list (`-v` on an empty input).
std::vector<std::string> system_search_dirs(const std::vector<std::string>& compiler) {
  std::vector<std::string> argv = compiler;
  for (const std::string& f : default_host_cflags()) argv.push_back(f);
  for (const char* a : {"-x", "c++", "-E", "-v", "/dev/null", "-o", "/dev/null"}) argv.push_back(a);
  ProcessResult p = run_process(argv);
  std::istringstream in(p.output);
  std::vector<std::string> dirs;
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#include <...> search starts here:", 0) == 0) {
      in_list = true;
    } else if (line.rfind("End of search list.", 0) == 0) {
      in_list = false;
    } else if (in_list) {
      dirs.push_back(fs::path(line.substr(line.find_first_not_of(' '))).lexically_normal().string());
    }
  }
  return dirs;
}

/// A header from the PCH's make rule, rooted where the JIT will look for it.
Header classify(const std::string& path) {
  Header h;
  std::string abs = fs::absolute(path).lexically_normal().string();
  internal_check(cd::describe_dependency(abs, &h.dep), "a header the PCH was built from cannot be read");
  for (const char* root : {"kjit", "tvm-ffi"}) {
    std::string rel = inside(abs, root_dir(root));
    if (rel.empty()) continue;
    h.root = root;
    h.dep.path = rel;
    return h;
  }
  h.root = "/";
  return h;
}

void write_atomically(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) throw ToolchainError("kjit: cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

/// Why `d` (at `path` now) differs from what was recorded ("" if it does not).
std::string changed(const cd::Dependency& d, const std::string& path) {
  cd::Dependency now = d;
  now.path = path;
  return cd::changed_dependency({now});
}

/// What changes when a file is replaced or rewritten in place: its path, inode,
/// size and times (for caches of what was read from it).
std::string file_version(const std::string& path, const struct stat& st) {
  return path + '\0' + std::to_string(st.st_ino) + ' ' + std::to_string(st.st_size) + ' ' +
         std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec) + ' ' +
         std::to_string(st.st_ctim.tv_sec) + '.' + std::to_string(st.st_ctim.tv_nsec);
}

/// The whole .gch hashed once per process and file version: a flipped byte GCC
/// would load without noticing, even when the file's time was kept.
std::string damaged_gch(const Stamp& s, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "the precompiled header " + path + " is missing";
  if (static_cast<uint64_t>(st.st_size) != s.gch.size) {
    return "the precompiled header " + path + " has " + std::to_string(st.st_size) + " bytes, its stamp says " +
           std::to_string(s.gch.size);
  }
  static std::mutex mu;
  static std::map<std::string, bool> verified;
  std::string key = file_version(path, st) + ' ' + s.gch.hash;
  std::lock_guard<std::mutex> lock(mu);
  auto it = verified.find(key);
  if (it == verified.end()) {
    cd::Dependency now;
    bool ok = cd::describe_dependency(path, &now) && now.size == s.gch.size && now.hash == s.gch.hash;
    it = verified.emplace(key, ok).first;
  }
  return it->second ? "" : "the precompiled header " + path + " does not match the checksum in its stamp";
}

/// A user include path comes before the system directories, so a file there with
/// the name of a system header the PCH holds would be what a plain compile reads.
std::string shadowed(const Stamp& s, const std::vector<std::string>& include_paths) {
  for (const Header& h : s.headers) {
    if (h.root != "/") continue;  // kjit's and tvm-ffi's directories come first anyway
    std::string rel;
    for (const std::string& dir : s.system_dirs) {
      std::string r = inside(h.dep.path, dir);
      if (!r.empty() && (rel.empty() || r.size() < rel.size())) rel = r;
    }
    for (const std::string& inc : include_paths) {
      struct stat st {};
      if (!rel.empty() && stat((inc + "/" + rel).c_str(), &st) == 0) {
        return "the include path " + inc + " has " + rel + ", which would replace the system header " + h.dep.path;
      }
    }
  }
  return "";
}

/// The parsed stamp of `dir`, re-read only when the file changes; "" or why there
/// is none.
std::string load_stamp(const std::string& dir, Stamp* out) {
  std::string path = dir + "/" + kStampName;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "no precompiled header in " + dir + " (" + path + " is missing)";
  std::string key = file_version(path, st);
  static std::mutex mu;
  static std::map<std::string, Stamp> parsed;
  std::lock_guard<std::mutex> lock(mu);
  auto it = parsed.find(key);
  if (it == parsed.end()) {
    std::string text;
    Stamp s;
    if (!read_file(path, &text) || !parse_stamp(text, &s)) return "its stamp " + path + " is damaged";
    it = parsed.emplace(key, std::move(s)).first;
  }
  *out = it->second;
  return "";
}

std::string pch_directory() {
  const char* env = std::getenv("KJIT_PCH_DIR");
  if (env != nullptr && *env != '\0') return env;
  return system_paths().kjit_lib + "/pch";
}

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

std::string format_stamp(const Stamp& s) {
  std::string out = std::string(kStampMagic) + "\nidentity " + s.identity + "\nflags " + join(s.flags) + "\n";
  for (const std::string& d : s.system_dirs) out += "sysdir " + d + "\n";
  out += "gch " + format_dependency(s.gch) + "\n";
  for (const Header& h : s.headers) out += "header " + h.root + " " + format_dependency(h.dep) + "\n";
  return out + "end " + cd::hash_hex(out) + "\n";
}

bool parse_stamp(const std::string& text, Stamp* out) {
  size_t end = text.rfind("end ");
  if (end == std::string::npos ||
      text.compare(end, std::string::npos, "end " + cd::hash_hex(text.substr(0, end)) + "\n"))
    return false;  // torn or edited
  std::istringstream in(text.substr(0, end));
  std::string line;
  if (!std::getline(in, line) || line != kStampMagic) return false;
  Stamp s;
  bool have_gch = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string word, rest;
    fields >> word;
    if (word == "identity") {
      std::getline(fields >> std::ws, s.identity);
    } else if (word == "sysdir") {
      std::getline(fields >> std::ws, rest);
      s.system_dirs.push_back(rest);
    } else if (word == "flags") {
      std::getline(fields >> std::ws, rest);
      s.flags = split(rest);
    } else if (word == "gch") {
      have_gch = parse_dependency(fields, &s.gch);
      if (!have_gch) return false;
    } else if (word == "header") {
      Header h;
      if (!(fields >> h.root) || !parse_dependency(fields, &h.dep)) return false;
      s.headers.push_back(std::move(h));
    } else {
      return false;
    }
  }
  if (!have_gch || s.identity.empty()) return false;
  *out = std::move(s);
  return true;
}

bool is_gcc(const std::vector<std::string>& compiler) {
  std::vector<std::string> argv = compiler;
  for (const char* a : {"-x", "c++", "-dM", "-E", "/dev/null"}) argv.push_back(a);
  ProcessResult p = run_process(argv);
  return p.exit_code == 0 && p.output.find("#define __GNUC__ ") != std::string::npos &&
         p.output.find("#define __clang__ ") == std::string::npos;
}

std::string build_stub_pch(const std::string& dir) {
  const Toolchain& tc = find_toolchain();
  const SystemPaths& paths = system_paths();
  fs::path gch = fs::path(dir) / kGchName;
  fs::path deps = fs::path(dir) / "stub_includes.d";
  fs::create_directories(gch.parent_path());
  fs::remove(fs::path(dir) / kStampName);  // no stamp: no PCH, until this one is whole
  fs::remove(gch);
  if (!is_gcc(tc.compiler)) {
    return "no precompiled stub headers: the JIT's compiler " + tc.identity +
           " is not GCC (only GCC takes a .gch through #include)";
  }
  std::vector<std::string> argv = tc.compiler;
  const std::vector<std::string> flags = jit_host_cflags();
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& a :
       {"-I" + paths.kjit_include, "-I" + paths.tvm_ffi_include, std::string("-x"), std::string("c++-header"),
        paths.kjit_include + "/kjit/detail/stub_includes.h", std::string("-o"), gch.string() + ".tmp",
        std::string("-MD"), std::string("-MF"), deps.string()})
    argv.push_back(a);
  ProcessResult p = run_process(argv);
  if (p.exit_code != 0) {
    throw CompileError(
        "kjit: precompiling stub_includes.h failed (exit status " + std::to_string(p.exit_code) + "):\n" + p.output,
        join(argv), p.output);
  }
  fs::rename(gch.string() + ".tmp", gch);
  Stamp s;
  s.identity = tc.identity;
  s.flags = flags;
  s.system_dirs = system_search_dirs(tc.compiler);
  internal_check(cd::describe_dependency(gch.string(), &s.gch), "the PCH just built cannot be read");
  s.gch.path = kGchName;
  std::string rule;
  internal_check(read_file(deps, &rule), "the PCH's dependency file cannot be read");
  for (const std::string& header : cd::parse_make_dependencies(rule)) s.headers.push_back(classify(header));
  write_atomically(fs::path(dir) / kStampName, format_stamp(s));
  return "precompiled stub headers for " + tc.identity + " (" + join(s.flags) + "): " + gch.string();
}

std::vector<std::string> jit_host_cflags() {
  std::vector<std::string> flags = default_host_cflags();
  flags.insert(flags.end(), jit_machine_cflags().begin(), jit_machine_cflags().end());
  return flags;
}

std::string stamp_mismatch(const Stamp& s, const std::string& dir, const std::vector<std::string>& include_paths,
                           const std::vector<std::string>& machine_cflags) {
  const Toolchain& tc = find_toolchain();
  if (s.identity != tc.identity) return "it was built by " + s.identity + ", this build uses " + tc.identity;
  std::vector<std::string> flags = default_host_cflags();
  flags.insert(flags.end(), machine_cflags.begin(), machine_cflags.end());
  if (s.flags != flags) {
    return "it was built with flags '" + join(s.flags) + "', this build's are '" + join(flags) + "'";
  }
  for (const Header& h : s.headers) {
    std::string why = changed(h.dep, resolve(h));
    if (!why.empty()) return why + " since it was precompiled";
  }
  std::string why = damaged_gch(s, dir + "/" + kGchName);
  return why.empty() ? shadowed(s, include_paths) : why;
}

/// Flags that change neither the macros nor the target the header was precompiled
/// for, so GCC takes the .gch with them: warnings (not -Wp/-Wl/-Wa, which pass
/// options on), -w, -pedantic, -g, the default -O2 and -O3 (which defines nothing
/// more), diagnostics' format.
bool leaves_pch_valid(const std::string& flag) {
  auto starts = [&](const char* prefix) { return flag.rfind(prefix, 0) == 0; };
  if (starts("-Wp,") || starts("-Wl,") || starts("-Wa,")) return false;
  return starts("-W") || flag == "-w" || flag == "-pedantic" || flag == "-pedantic-errors" || flag == "-O2" ||
         flag == "-O3" || starts("-fdiagnostics-") || starts("-fno-diagnostics-") || starts("-fmax-errors=");
}

PchChoice choose_stub_pch(const BuildRequest& r) {
  PchChoice c;
  if (!starts_with(r.source, kStubIncludesLine)) return c;
  const char* env = std::getenv("KJIT_PCH");
  if (env != nullptr && std::string(env) == "0") {
    c.why_not = "KJIT_PCH=0";
    return c;
  }
  for (const std::string& flag : r.extra_cflags) {
    if (!leaves_pch_valid(flag)) {
      c.why_not = "extra_cflags has '" + flag +
                  "' (it is built for the default flags; warnings and -O2/-O3 keep "
                  "it)";
      return c;
    }
  }
  std::string dir = pch_directory();
  Stamp s;
  c.why_not = load_stamp(dir, &s);
  if (c.why_not.empty()) c.why_not = stamp_mismatch(s, dir, r.include_paths, r.machine_cflags);
  if (!c.why_not.empty()) return c;
  c.dir = dir;
  for (const Header& h : s.headers) {
    if (h.root != "/") c.headers.push_back(resolve(h));
  }
  return c;
}

}  // namespace pch_detail

std::string stub_pch_dir(const BuildRequest& request, std::string* why_not) {
  pch_detail::PchChoice c = pch_detail::choose_stub_pch(request);
  if (why_not != nullptr) *why_not = c.why_not;
  return c.dir;
}

}  // namespace kjit
