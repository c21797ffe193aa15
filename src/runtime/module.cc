// load_inline: the pipeline spec -> codegen -> build -> load, read top to bottom.
#include <sys/stat.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/string.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "runtime/xla_builds.h"
#include "signature/lexer.h"
#include "signature/validate.h"

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

/// The XLA handlers' helpers (kjit/detail/xla_helpers.h) as an object build: the
/// same for every module with the module's flags and XLA headers, so it is
/// compiled once per cache and linked into each (the helpers took most of the time
/// the handlers add to a compile).
BuildRequest xla_helpers_request(const BuildRequest& module, const std::string& xla_include_dir) {
  BuildRequest r;
  r.name = "kjit_xla_helpers";
  r.source = emit_xla_helpers_source();
  r.extra_cflags = module.extra_cflags;
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
  ModuleSource source = emit_module_source(sources, specs, name + ".cc", source_options);
  // 3. build (or find in the cache)
  BuildRequest request;
  request.name = name;
  request.source = source.text;
  request.extra_cflags = options.extra_cflags;
  request.extra_ldflags = options.extra_ldflags;
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

/// A manifest field, or a ValueError naming the library.
template <typename T>
T manifest_field(const tvm::ffi::Map<tvm::ffi::String, tvm::ffi::Any>& m, const char* key, const std::string& path) {
  auto it = m.find(key);
  std::optional<T> v = it == m.end() ? std::nullopt : (*it).second.as<T>();
  if (!v) throw ValueError("kjit.load: the manifest of " + path + " has no valid '" + key + "'");
  return *v;
}

}  // namespace

Module load_module(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw ValueError("kjit.load: " + path + " is not a file (kjit.build writes the library there)");
  }
  auto state = std::make_shared<Module::State>();
  try {
    state->ffi_module = tvm::ffi::Module::LoadFromFile(path);
  } catch (const tvm::ffi::Error& e) {
    throw ValueError("kjit.load: " + path + " does not load as a shared library: " + e.message());
  }
  auto manifest = (*state->ffi_module)->GetFunction(kManifestFunction);
  if (!manifest) {
    throw ValueError("kjit.load: " + path + " is not a kjit module: it exports no " + kManifestFunction +
                     " (kjit.build and kjit.load_inline libraries do)");
  }
  using tvm::ffi::Any;
  using tvm::ffi::Map;
  using tvm::ffi::String;
  const auto m = tvm::ffi::json::Parse((*manifest)().cast<String>()).cast<Map<String, Any>>();
  if (manifest_field<int64_t>(m, "kjit_manifest", path) != 1) {
    throw ValueError("kjit.load: " + path + " has a manifest of another version; rebuild it with this kjit");
  }
  state->name = std::string(manifest_field<String>(m, "name", path));
  state->build.library_path = path;
  state->xla_handlers = manifest_field<bool>(m, "xla_handlers", path);
  state->tvm_ffi_bridge = manifest_field<bool>(m, "tvm_ffi_bridge", path);
  for (const Any& f : manifest_field<tvm::ffi::Array<Any>>(m, "functions", path)) {
    const auto fm = f.cast<Map<String, Any>>();
    const std::string fn(manifest_field<String>(fm, "name", path));
    const std::string device(manifest_field<String>(fm, "device", path));
    state->specs.push_back(parse_signature(fn, std::string(manifest_field<String>(fm, "signature", path)),
                                           device == "cuda" ? DeviceKind::kCUDA : DeviceKind::kCPU));
    auto fun = (*state->ffi_module)->GetFunction(fn);
    if (!fun) throw ValueError("kjit.load: " + path + " lists '" + fn + "' in its manifest but does not export it");
    state->functions.push_back(*fun);
    state->host_sources.emplace_back();
  }
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
