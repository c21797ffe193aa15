// load_inline: the pipeline spec -> codegen -> build -> load, read top to bottom.
#include <dlfcn.h>
#include <sys/stat.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "kjit/version.h"
#include "runtime/xla_builds.h"
#include "signature/lexer.h"
#include "signature/validate.h"
#include "toolchain/library_exports.h"

namespace kjit {

struct Module::State {
  std::string name;
  BuildResult build;
  std::vector<FunctionSpec> specs;
  std::vector<std::string> host_sources;
  std::string full_source;
  std::optional<tvm::ffi::Module> ffi_module;  // set right after construction
  std::vector<tvm::ffi::Function> functions;
  bool xla_handlers = false;
  bool tvm_ffi_bridge = false;
};

namespace {

/// Modules loaded by this process, by cache key: a repeated load is a lookup.
std::mutex g_loaded_mu;
std::map<std::string, std::shared_ptr<const Module::State>> g_loaded;

/// The CUDA part of a build request: device TU, flags, architectures.
void add_cuda_build(const ModuleSource& source, const InlineOptions& options, BuildRequest* request) {
  if (source.cuda_text.empty()) return;
  request->cuda_source = source.cuda_text;
  request->cuda_flags = options.extra_cuda_cflags;
  std::string how;
  request->cuda_archs = select_cuda_archs(options.cuda_arch, &how);
  if (options.verbose) {
    std::string archs;
    for (const CudaArch& a : request->cuda_archs) archs += (archs.empty() ? "" : ", ") + a.text();
    std::fprintf(stderr, "[kjit] module '%s': CUDA architectures %s (%s), nvcc %s\n", request->name.c_str(),
                 archs.c_str(), how.c_str(), find_cuda_toolchain().version.c_str());
  }
}

void check_module_request(const std::string& name, const std::vector<FunctionSpec>& specs) {
  if (!is_c_identifier(name)) {
    throw SpecError("module name '" + spec_detail::printable(name) +
                    "' is not a C identifier (letters, digits and '_', not starting with a digit)" +
                    first_bad_char(name));
  }
  if (is_cpp_keyword(name)) throw SpecError("module name '" + name + "' is a C++ keyword");
  if (specs.empty()) {
    throw SpecError("module '" + name +
                    "': no functions given; pass functions={name: signature or arg_spec tokens}, a list of names, "
                    "or annotate the sources with '// @kjit NAME [tokens...]'");
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (specs[i].name == specs[j].name)
        throw SpecError("module '" + name + "': function '" + specs[i].name + "' is given twice");
    }
  }
}

std::shared_ptr<Module::State> load_built(const std::string& name, const BuildResult& build,
                                          const std::vector<FunctionSpec>& specs) {
  auto state = std::make_shared<Module::State>();
  state->name = name;
  state->build = build;
  state->ffi_module = tvm::ffi::Module::LoadFromFile(build.library_path);
  for (const FunctionSpec& spec : specs) {
    auto f = (*state->ffi_module)->GetFunction(spec.name);
    internal_check(f.has_value(), "a generated stub is missing from the built library");
    state->functions.push_back(*f);
  }
  return state;
}

}  // namespace

/// -O3 and instruction-set level `isa`'s flags (none for baseline: the portable
/// defaults alone); for native, jit_machine_cflags(), which the stub PCH fits.
std::vector<std::string> machine_cflags(const std::string& isa) {
  if (isa == "native") return jit_machine_cflags();
  std::vector<std::string> flags = isa_cflags(isa);
  if (!flags.empty()) flags.insert(flags.begin(), "-O3");
  return flags;
}

/// The XLA handlers' helpers (kjit/detail/xla_helpers.h) as an object build: the
/// same for every module with the module's flags and XLA headers, so it is
/// compiled once per cache and linked into each (the helpers took most of the time
/// the handlers add to a compile).
BuildRequest xla_helpers_request(const BuildRequest& module, const std::string& xla_include_dir) {
  BuildRequest r;
  r.name = "kjit_xla_helpers";
  r.source = emit_xla_helpers_source();
  r.extra_cflags = module.extra_cflags;
  r.machine_cflags = module.machine_cflags;
  r.include_paths = {xla_include_dir};
  r.cache_dir = module.cache_dir;
  r.verbose = module.verbose;
  r.object_only = true;
  return r;
}

Module load_inline(const std::string& name, const Sources& cpp_sources, const std::vector<FunctionSpec>& specs,
                   const InlineOptions& options) {
  // 1. spec: already parsed and validated by the front door; check the module as a whole
  check_module_request(name, specs);
  // 2. codegen
  std::vector<SourceText> sources = label_sources(cpp_sources, "cpp_sources", false, options.source_files.cpp);
  std::vector<SourceText> cuda = label_sources(options.cuda_sources, "cuda_sources", true, options.source_files.cuda);
  ModuleSourceOptions source_options;
  source_options.xla_handlers = !options.xla_include_dir.empty();
  source_options.brainevent_alias = uses_brainevent_spelling(sources) || uses_brainevent_spelling(cuda);
  source_options.brainevent_headers = !options.brainevent_include_dir.empty();
  source_options.cuda_sources = cuda;
  // A module built for this machine only (load_inline) is optimised for it; one to
  // ship (kjit.build, relocatable) stays portable unless asked for a level.
  const std::string isa = !options.isa.empty() ? options.isa : options.relocatable ? "baseline" : "native";
  source_options.isa_level = isa_level_name(isa);
  ModuleSource source = emit_module_source(sources, specs, name + ".cc", source_options);
  // 3. build (or find in the cache)
  BuildRequest request;
  request.name = name;
  request.source = source.text;
  request.extra_cflags = options.extra_cflags;
  request.extra_ldflags = options.extra_ldflags;
  request.machine_cflags = machine_cflags(isa);
  request.include_paths = options.extra_include_paths;
  if (source_options.xla_handlers) request.include_paths.push_back(options.xla_include_dir);
  if (source_options.brainevent_alias) {
    // brainevent's own headers when given, else kjit's compatibility header: never both.
    request.include_paths.push_back(source_options.brainevent_headers ? options.brainevent_include_dir
                                                                      : system_paths().kjit_include + "/kjit/compat");
  }
  request.cache_dir = options.build_directory;
  request.verbose = options.verbose;
  request.force_rebuild = options.force_rebuild;
  request.relocatable = options.relocatable;
  request.exports.push_back(std::string("__tvm_ffi_") + kManifestFunction);
  if (source_options.xla_handlers) request.objects.push_back(xla_helpers_request(request, options.xla_include_dir));
  for (const FunctionSpec& spec : specs) {
    request.exports.push_back("__tvm_ffi_" + spec.name);
    if (source_options.xla_handlers) request.exports.push_back(xla_handler_symbol(spec.name));
  }
  add_cuda_build(source, options, &request);
  std::string key = build_key(request);
  if (!options.force_rebuild) {
    std::lock_guard<std::mutex> lock(g_loaded_mu);
    auto it = g_loaded.find(request.cache_dir + '\0' + key);
    if (it != g_loaded.end()) {
      if (options.verbose) std::fprintf(stderr, "[kjit] module '%s': already loaded in this process\n", name.c_str());
      return Module(it->second, true);
    }
  }
  BuildResult build = build_shared_library(request, key);
  // 4. load. build_shared_library verified a cached library (owner, mode, checksum,
  // headers) before returning it; one that still fails to load (a library it
  // links moved, say) is evicted and rebuilt once.
  std::shared_ptr<Module::State> state;
  try {
    state = load_built(name, build, specs);
  } catch (const tvm::ffi::Error& e) {
    if (!build.cache_hit) throw;
    std::fprintf(stderr, "[kjit] cached '%s' failed to load (%s); rebuilding it\n", build.library_path.c_str(),
                 e.what());
    evict(build);
    build = build_shared_library(request, key);
    state = load_built(name, build, specs);
  }
  state->specs = specs;
  state->host_sources = source.stubs;
  state->full_source = source.text;
  state->xla_handlers = source_options.xla_handlers;
  state->tvm_ffi_bridge = source.tvm_ffi_bridge;
  std::lock_guard<std::mutex> lock(g_loaded_mu);
  auto& slot = g_loaded[request.cache_dir + '\0' + key];
  if (!slot || options.force_rebuild) slot = state;
  return Module(slot, build.cache_hit);
}

Module load_inline(const std::string& name, const Sources& cpp_sources, const SignatureList& functions,
                   const InlineOptions& options) {
  std::vector<FunctionDecl> decls;
  for (const auto& [fn, signature] : functions) {
    FunctionDecl d;
    d.name = fn;
    d.form = FunctionDecl::Form::kSignature;
    d.signature = signature;
    d.origin = "functions['" + fn + "']";
    decls.push_back(std::move(d));
  }
  if (decls.empty()) return load_inline(name, cpp_sources, std::vector<FunctionSpec>{}, options);
  return load_inline(name, cpp_sources, decls, options);
}

Module load_inline(const std::string& name, const Sources& cpp_sources, const std::vector<FunctionDecl>& functions,
                   const InlineOptions& options) {
  return load_inline(name, cpp_sources,
                     resolve_module_functions(cpp_sources, options.cuda_sources, functions, options.source_files),
                     options);
}

namespace {

using tvm::ffi::Any;
using tvm::ffi::Map;
using tvm::ffi::String;
using JsonObject = Map<String, Any>;

/// The one way kjit.load refuses a library: a ValueError naming the file, then
/// what is wrong, what was expected and what it holds (`what` says all three).
[[noreturn]] void refuse_library(const std::string& path, const std::string& what) {
  throw ValueError("kjit.load: " + path + " " + what);
}

[[noreturn]] void broken_manifest(const std::string& path, const std::string& what) {
  refuse_library(path, std::string("has a broken manifest (its ") + kManifestFunction + "): " + what +
                           "; rebuild it with kjit.build");
}

/// A field of a manifest object, or the broken-manifest error naming it.
template <typename T>
T manifest_field(const JsonObject& m, const char* key, const char* type, const std::string& where,
                 const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) broken_manifest(path, where + " has no field '" + key + "'");
  std::optional<T> v = (*it).second.as<T>();
  if (!v) broken_manifest(path, where + "'s field '" + key + "' is not " + type);
  return *v;
}

/// The manifest the library exports, parsed.
JsonObject read_manifest(const tvm::ffi::Function& manifest, const std::string& path) {
  std::optional<String> text = manifest().as<String>();
  if (!text) broken_manifest(path, "it returns no text");
  Any parsed;
  try {
    parsed = tvm::ffi::json::Parse(*text);
  } catch (const tvm::ffi::Error& e) {
    broken_manifest(path, "it is not JSON (" + e.message() + ")");
  }
  std::optional<JsonObject> m = parsed.as<JsonObject>();
  if (!m) broken_manifest(path, "it is not a JSON object");
  return *m;
}

/// Major, minor and patch of "0.1.16" (anything after them ignored); false when
/// `text` does not start with such a version.
bool version_numbers(const std::string& text, long long out[3]) {
  return std::sscanf(text.c_str(), "%lld.%lld.%lld", &out[0], &out[1], &out[2]) == 3 && out[0] >= 0 && out[1] >= 0 &&
         out[2] >= 0;
}

/// Semantic versioning's rule: the same major version, and for 0.x the same minor.
bool compatible_versions(const std::string& built, const std::string& here) {
  long long a[3] = {}, b[3] = {};
  if (!version_numbers(built, a) || !version_numbers(here, b)) return false;
  return a[0] == b[0] && (a[0] != 0 || a[1] == b[1]);
}

/// The library was built by a kjit and for a tvm-ffi ABI that this process can run.
void check_versions(const JsonObject& m, const std::string& path) {
  const int64_t format = manifest_field<int64_t>(m, "kjit_manifest", "an integer", "it", path);
  if (format != kManifestVersion) {
    refuse_library(path,
                   "has a manifest of format " + std::to_string(format) +
                       ", but this kjit (" KJIT_VERSION ") reads format " + std::to_string(kManifestVersion) +
                       " (which records the kjit and tvm-ffi versions a library needs); rebuild it with this kjit");
  }
  const std::string kjit(manifest_field<String>(m, "kjit_version", "a string", "it", path));
  const std::string abi(manifest_field<String>(m, "tvm_ffi_abi", "a string", "it", path));
  const std::string here_abi = tvm_ffi_version();
  if (!compatible_versions(kjit, KJIT_VERSION) || !compatible_versions(abi, here_abi)) {
    refuse_library(path, "was built by kjit " + kjit + " for the tvm-ffi ABI " + abi + ", but this is kjit " +
                             KJIT_VERSION + " with tvm-ffi " + here_abi +
                             " (a library needs the same major version of each, and the same minor one below 1.0); "
                             "rebuild it with this kjit");
  }
}

/// What the stub of `fn` checks, from its own metadata (the stub emitter writes
/// kjit_signature and kjit_device): the truth a manifest is held against.
std::pair<std::string, std::string> stub_checks(const tvm::ffi::Module& mod, const std::string& fn,
                                                const std::string& path) {
  const std::string symbol = std::string("__tvm_ffi__metadata_") + fn;
  tvm::ffi::Optional<String> text = mod->GetFunctionMetadata(fn, false);
  std::optional<JsonObject> meta;
  if (text.has_value()) {
    try {
      meta = tvm::ffi::json::Parse(*text).as<JsonObject>();
    } catch (const tvm::ffi::Error&) {
      meta = std::nullopt;
    }
  }
  auto signature = meta ? meta->find("kjit_signature") : JsonObject().end();
  auto device = meta ? meta->find("kjit_device") : JsonObject().end();
  if (!meta || signature == meta->end() || device == meta->end() || !(*signature).second.as<String>() ||
      !(*device).second.as<String>()) {
    refuse_library(path, "exports '" + fn + "' without the metadata kjit's stubs carry (" + symbol +
                             " with kjit_signature and kjit_device): it is not a kjit stub, or the library is "
                             "damaged; rebuild it with kjit.build");
  }
  return {std::string(*(*signature).second.as<String>()), std::string(*(*device).second.as<String>())};
}

/// The spec of one manifest function, held against its stub's own metadata: a
/// manifest that says anything else (a default, a dtype, a device) is refused.
FunctionSpec checked_spec(const tvm::ffi::Module& mod, const JsonObject& f, size_t index, const std::string& path) {
  const std::string where = "function #" + std::to_string(index);
  const std::string fn(manifest_field<String>(f, "name", "a string", where, path));
  const std::string signature(manifest_field<String>(f, "signature", "a string", where, path));
  const std::string device(manifest_field<String>(f, "device", "a string", where, path));
  if (!mod->GetFunction(fn, false).has_value()) {
    refuse_library(path, "lists '" + spec_detail::printable(fn) + "' in its manifest but does not export it");
  }
  if (device != "cpu" && device != "cuda" && device != "none") {
    broken_manifest(path, where + " ('" + fn + "') has the device '" + spec_detail::printable(device) +
                              "', expected cpu, cuda or none");
  }
  const auto [stub_signature, stub_device] = stub_checks(mod, fn, path);
  FunctionSpec spec;
  try {
    spec = parse_signature(fn, signature, device == "cuda" ? DeviceKind::kCUDA : DeviceKind::kCPU);
  } catch (const Error& e) {
    broken_manifest(path, "the signature of '" + fn + "' does not parse (" + e.what() + ")");
  }
  if (f.find("backward") != f.end())
    spec.backward = std::string(manifest_field<String>(f, "backward", "a string", where, path));
  const std::string says = to_string(spec), means = device_of(spec);
  if (says != stub_signature || means != stub_device) {
    refuse_library(path, "has a manifest that disagrees with its stub of '" + fn + "': the manifest says '" + says +
                             "' (" + means + "), the stub checks '" + stub_signature + "' (" + stub_device +
                             "); the library was edited or damaged, rebuild it with kjit.build");
  }
  return spec;
}

/// Each function's XLA handler must be there when the manifest says the library has them.
void check_xla_handlers(const std::vector<FunctionSpec>& specs, const std::string& path) {
  void* self = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  for (const FunctionSpec& spec : specs) {
    const std::string symbol = xla_handler_symbol(spec.name);
    if (self == nullptr || dlsym(self, symbol.c_str()) == nullptr) {
      if (self != nullptr) dlclose(self);
      refuse_library(path, "has a manifest that says it has XLA handlers, but it does not export " + symbol +
                               "; rebuild it with kjit.build(..., jax=True)");
    }
  }
  if (self != nullptr) dlclose(self);
}

/// The instruction-set level a library was built for (its `KJIT_ISA=<level>`
/// text), read from the file without loading it: its code, static initialisers
/// included, may use instructions this CPU lacks. Libraries without it are baseline.
std::string library_isa(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string marker = std::string(kIsaMarker) + "=";
  const size_t at = bytes.find(marker);
  if (at == std::string::npos) return "baseline";
  const size_t begin = at + marker.size();
  const size_t end = bytes.find('\0', begin);
  return bytes.substr(begin, std::min<size_t>(end == std::string::npos ? 32 : end - begin, 32));
}

void check_isa(const std::string& path) {
  const std::string needs = library_isa(path);
  if (cpu_runs_isa(needs)) return;
  const std::string here = cpu_isa_level_name();
  refuse_library(path, "was built for the instruction set " + needs + ", which this CPU does not run (it runs " + here +
                           "): it would stop at its first such instruction (SIGILL); rebuild it with kjit.build(..., "
                           "isa='" +
                           here + "')" + (here == "baseline" ? "" : " or isa='baseline'"));
}

}  // namespace

Module load_module(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    refuse_library(path, "is not a file (kjit.build writes the library there)");
  }
  // Before dlopen: a truncated file is mapped as it claims to be, and its missing
  // pages raise SIGBUS when touched.
  const std::string problem = build_detail::library_file_problem(path);
  if (!problem.empty()) refuse_library(path, "does not load as a shared library: " + problem);
  check_isa(path);
  auto state = std::make_shared<Module::State>();
  try {
    state->ffi_module = tvm::ffi::Module::LoadFromFile(path);
  } catch (const tvm::ffi::Error& e) {
    refuse_library(path, "does not load as a shared library: " + e.message());
  }
  const tvm::ffi::Module& mod = *state->ffi_module;
  auto manifest = mod->GetFunction(kManifestFunction, false);
  if (!manifest) {
    refuse_library(path, std::string("is not a kjit module: it exports no ") + kManifestFunction +
                             " (kjit.build and kjit.load_inline libraries do)");
  }
  const JsonObject m = read_manifest(*manifest, path);
  check_versions(m, path);
  state->name = std::string(manifest_field<String>(m, "name", "a string", "it", path));
  if (!is_c_identifier(state->name)) {
    broken_manifest(path, "the module name '" + spec_detail::printable(state->name) + "' is not a C identifier");
  }
  state->build.library_path = path;
  state->xla_handlers = manifest_field<bool>(m, "xla_handlers", "true or false", "it", path);
  state->tvm_ffi_bridge = manifest_field<bool>(m, "tvm_ffi_bridge", "true or false", "it", path);
  const auto functions = manifest_field<tvm::ffi::Array<Any>>(m, "functions", "a list", "it", path);
  for (size_t i = 0; i < functions.size(); ++i) {
    std::optional<JsonObject> f = functions[static_cast<int64_t>(i)].as<JsonObject>();
    if (!f) broken_manifest(path, "function #" + std::to_string(i) + " is not a JSON object");
    FunctionSpec spec = checked_spec(mod, *f, i, path);
    for (const FunctionSpec& earlier : state->specs) {
      if (earlier.name == spec.name) broken_manifest(path, "it lists the function '" + spec.name + "' twice");
    }
    state->functions.push_back(*mod->GetFunction(spec.name, false));
    state->specs.push_back(std::move(spec));
    state->host_sources.emplace_back();
  }
  if (state->specs.empty()) broken_manifest(path, "it lists no functions");
  if (state->xla_handlers) check_xla_handlers(state->specs, path);
  return Module(state, true);
}

const std::string& Module::name() const { return state_->name; }
const std::string& Module::path() const { return state_->build.library_path; }
const std::vector<FunctionSpec>& Module::specs() const { return state_->specs; }
const std::string& Module::full_source() const { return state_->full_source; }
bool Module::cache_hit() const { return cache_hit_; }
const std::string& Module::key() const { return state_->build.key; }
bool Module::has_xla_handlers() const { return state_->xla_handlers; }
bool Module::has_tvm_ffi_bridge() const { return state_->tvm_ffi_bridge; }
tvm::ffi::Module Module::ffi_module() const { return *state_->ffi_module; }

size_t Module::index_of(const std::string& fn) const {
  std::string known;
  for (size_t i = 0; i < state_->specs.size(); ++i) {
    if (state_->specs[i].name == fn) return i;
    known += (known.empty() ? "" : ", ") + state_->specs[i].name;
  }
  throw SpecError("module '" + state_->name + "' has no function '" + fn + "' (it has: " + known + ")");
}

tvm::ffi::Function Module::function(const std::string& fn) const { return state_->functions[index_of(fn)]; }
const std::string& Module::host_source(const std::string& fn) const { return state_->host_sources[index_of(fn)]; }

}  // namespace kjit
