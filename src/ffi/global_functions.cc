// The C++ functions the Python package calls, registered as tvm-ffi global
// functions ("kjit.*"). Anything with more than a few arguments or results crosses
// as named fields (Maps, ffi/fields.h); kjit's errors become FFI errors of their
// kind through at_ffi_boundary (ffi/boundary.h).
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <map>

#include "call/call_model_object.h"
#include "declare/cpp_signature.h"
#include "ffi/boundary.h"
#include "ffi/fields.h"
#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "kjit/version.h"

namespace kjit {
namespace {

using tvm::ffi::Array;
using tvm::ffi::String;

std::vector<std::string> to_strings(const Array<String>& a) {
  std::vector<std::string> out;
  for (const String& s : a) out.emplace_back(s);
  return out;
}

Array<String> strings(const std::vector<std::string>& v) {
  Array<String> out;
  for (const std::string& s : v) out.push_back(String(s));
  return out;
}

DeviceKind parse_device(const std::string& d) {
  if (d == "cuda") return DeviceKind::kCUDA;
  if (d == "cpu" || d.empty()) return DeviceKind::kCPU;
  throw SpecError("unknown device '" + d + "': expected cpu or cuda");
}

/// One tensor of Python's kjit.Spec: its fields in the order the builder applies
/// them, so the first mistake reported is the same as for the C++ builder's calls.
void add_tensor(Fields* f, SpecBuilder* b) {
  b->tensor(f->required_text("name"), f->required_text("dtype"), f->texts("shape"));
  if (f->flag("out")) b->out();
  if (f->flag("returned")) b->returned();
  if (f->flag("optional")) b->optional();
  if (f->flag("strided")) b->strided();
  if (std::optional<Array<String>> strides = f->maybe<Array<String>>("strides")) b->strides(to_strings(*strides));
  if (std::optional<int64_t> align = f->maybe<int64_t>("align")) b->align(*align);
  if (std::optional<String> device = f->maybe<String>("device")) b->device(std::string(*device));
}

/// One parameter of Python's kjit.Spec: {"kind": "tensor" | "scalar" | "symbol" | "stream" | "dtype_var", ...}.
void add_param(const FieldMap& param, SpecBuilder* b) {
  Fields f("kjit.Spec", param, /*user_values=*/true);
  std::string kind = f.required_text("kind");
  if (kind == "dtype_var") {
    b->dtype_var(f.required_text("name"), f.required_text("dtypes"));
  } else if (kind == "tensor") {
    add_tensor(&f, b);
  } else if (kind == "symbol") {
    b->symbol(f.required_text("name"), f.required_text("type"));
  } else if (kind == "scalar") {
    b->scalar(f.required_text("name"), f.required_text("type"));
    if (std::optional<String> value = f.maybe<String>("default")) b->default_value(std::string(*value));
  } else {
    internal_check(kind == "stream", "a kjit.Spec parameter is a tensor, a scalar, a symbol or a stream");
    b->stream(f.required_text("name"));
  }
  f.expect_all_read();
}

/// The spec Python's kjit.Spec describes: {"name", "params": [...], "constraints": [...]}.
FunctionSpec build_spec(const FieldMap& fields) {
  Fields f("kjit.Spec", fields, /*user_values=*/true);
  SpecBuilder b(f.required_text("name"));
  for (const FieldMap& param : f.get<Array<FieldMap>>("params", {})) add_param(param, &b);
  for (const std::string& c : f.texts("constraints")) b.constraint(c);
  b.independent(f.texts("independent"));
  f.expect_all_read();
  return b.build();
}

/// A declaration from Python: {"name", "origin", "form"} with form "signature"
/// (and "signature"), "tokens" (and "tokens") or "infer".
FunctionDecl to_decl(const FieldMap& fields) {
  Fields f("kjit declaration", fields);
  FunctionDecl d;
  d.name = f.required_text("name");
  d.origin = f.required_text("origin");
  std::string form = f.required_text("form");
  if (form == "signature") {
    d.form = FunctionDecl::Form::kSignature;
    d.signature = f.required_text("signature");
  } else if (form == "tokens") {
    d.form = FunctionDecl::Form::kTokens;
    d.tokens = f.texts("tokens");
  } else {
    internal_check(form == "infer", "unknown declaration form");
    d.form = FunctionDecl::Form::kInfer;
  }
  f.expect_all_read();
  return d;
}

std::vector<FunctionDecl> to_decls(const Array<FieldMap>& functions) {
  std::vector<FunctionDecl> out;
  for (const FieldMap& f : functions) out.push_back(to_decl(f));
  return out;
}

/// {"name", "signature", "arg_spec"} of each resolved declaration, without
/// compiling: what kjit read off the tokens, annotations and C++ definitions.
Array<FieldMap> resolve_entry(const FieldMap& options) {
  return at_ffi_boundary([&] {
    Fields f("kjit.resolve_functions options", options);
    std::vector<std::string> sources = f.texts("cpp_sources");
    std::vector<std::string> cuda_sources = f.texts("cuda_sources");
    std::vector<FunctionDecl> decls = to_decls(f.get<Array<FieldMap>>("functions", {}));
    SourceFiles files{f.texts("cpp_source_files"), f.texts("cuda_source_files")};
    f.expect_all_read();
    Array<FieldMap> out;
    for (const FunctionSpec& s : resolve_module_functions(sources, cuda_sources, decls, files)) {
      out.push_back(FieldMap{
          {"name", String(s.name)}, {"signature", String(to_string(s))}, {"arg_spec", strings(to_arg_spec(s))}});
    }
    return out;
  });
}

/// InlineOptions, each field under its own name.
InlineOptions inline_options(Fields* f) {
  InlineOptions opts;
  opts.extra_cflags = f->texts("extra_cflags");
  opts.extra_ldflags = f->texts("extra_ldflags");
  opts.extra_include_paths = f->texts("extra_include_paths");
  opts.build_directory = f->text("build_directory");
  opts.verbose = f->flag("verbose");
  opts.force_rebuild = f->flag("force_rebuild");
  opts.xla_include_dir = f->text("xla_include_dir");
  opts.cuda_sources = f->texts("cuda_sources");
  opts.extra_cuda_cflags = f->texts("extra_cuda_cflags");
  opts.cuda_arch = f->text("cuda_arch");
  opts.brainevent_include_dir = f->text("brainevent_include_dir");
  opts.relocatable = f->flag("relocatable");
  opts.isa = f->text("isa");
  opts.source_files = SourceFiles{f->texts("cpp_source_files"), f->texts("cuda_source_files")};
  return opts;
}

/// What Python binds a call by: each parameter the caller passes, in order, as
/// {"name", "kind" ("tensor"|"scalar"), "type", "written", "optional", "default"},
/// for tensors kjit allocates "returned", "shape" (dim texts), "dtype" (its one
/// dtype) and "dtype_of" (the input whose dtype it takes), for tensors "batch" (the
/// batch group of its leading dims, or ""), and for scalars "value_type", the type
/// the value is read as ("T" reads float64 or int64).
std::vector<std::string> dim_texts(const Param& p) {
  std::vector<std::string> out;
  for (const Expr& e : p.tensor.shape) out.push_back(to_string(e));
  return out;
}

Array<FieldMap> call_params(const FunctionSpec& s) {
  Array<FieldMap> out;
  for (const Param* p : s.call_args()) {
    bool tensor = p->kind == ParamKind::kTensor;
    std::string param_text = to_string(*p);
    out.push_back(FieldMap{{"name", String(p->name)},
                           {"kind", String(tensor ? "tensor" : "scalar")},
                           {"type", String(param_text.substr(p->name.size() + 2))},
                           {"written", tensor && p->tensor.out},
                           {"optional", tensor && p->tensor.optional},
                           {"default", String(p->default_value)},
                           {"returned", tensor && p->tensor.returned},
                           {"shape", strings(dim_texts(*p))},
                           {"dtype", String(tensor && p->tensor.dtypes.size() == 1 ? p->tensor.dtypes[0].name : "")},
                           {"dtype_of", String(p->tensor.dtype_of)},
                           {"batch", String(tensor ? p->tensor.batch : "")},
                           {"value_type", String(tensor ? "" : scalar_type_name(p->scalar))}});
  }
  return out;
}

/// Where each function is defined and its C++ return type, by name: from the
/// sources, or for a module loaded from its library (no sources) its manifest.
using Definitions = std::map<std::string, std::pair<std::string, std::string>>;

FieldMap function_record(const FunctionSpec& s, const std::vector<SourceText>& sources, const Definitions& given) {
  auto it = given.find(s.name);
  std::pair<std::string, std::string> where = it != given.end() ? it->second : definition_of(sources, s.name);
  return FieldMap{{"name", String(s.name)},
                  {"signature", String(to_string(s))},
                  {"arg_spec", strings(to_arg_spec(s))},
                  {"device", String(device_of(s))},
                  {"params", call_params(s)},
                  {"location", String(where.first)},
                  {"return_type", String(where.second)},
                  {"backward", String(s.backward)}};
}

/// A loaded module as named fields: its objects ("module"; "functions", the stubs'
/// functions in declaration order; "models", their call models), its long texts ("source"; "stubs", in the same
/// order), and "record", a JSON object of the short plain fields ("path",
/// "cache_hit", "key", "has_xla_handlers", "tvm_ffi_bridge", and per function its
/// function_record).
/// Python reads the record with one json.loads; field by field it took about fifty
/// crossings per load.
FieldMap module_fields(const Module& m, const std::vector<SourceText>& sources, const Definitions& given = {}) {
  Array<tvm::ffi::Function> functions;
  Array<tvm::ffi::ObjectRef> models;
  Array<String> stubs;
  Array<FieldMap> records;
  for (const FunctionSpec& s : m.specs()) {
    functions.push_back(m.function(s.name));
    models.push_back(make_call_model_object(s));
    stubs.push_back(String(m.host_source(s.name)));
    records.push_back(function_record(s, sources, given));
  }
  FieldMap record{{"name", String(m.name())},
                  {"path", String(m.path())},
                  {"functions", records},
                  {"cache_hit", m.cache_hit()},
                  {"key", String(m.key())},
                  {"has_xla_handlers", m.has_xla_handlers()},
                  {"tvm_ffi_bridge", m.has_tvm_ffi_bridge()}};
  return FieldMap{{"module", m.ffi_module()}, {"functions", functions},
                  {"models", models},         {"source", String(m.full_source())},
                  {"stubs", stubs},           {"record", tvm::ffi::json::Stringify(record)}};
}

/// load_inline with options as named fields: "name", "cpp_sources", "functions"
/// (declarations) and InlineOptions' fields by their names; returns the module's
/// fields (module_fields).
FieldMap load_inline_entry(const FieldMap& options) {
  return at_ffi_boundary([&] {
    Fields f("kjit.load_inline options", options);
    std::string name = f.required_text("name");
    std::vector<std::string> sources = f.texts("cpp_sources");
    std::vector<FunctionDecl> decls = to_decls(f.get<Array<FieldMap>>("functions", {}));
    InlineOptions opts = inline_options(&f);
    f.expect_all_read();
    std::vector<SourceText> labelled = label_sources(sources, "cpp_sources", false, opts.source_files.cpp);
    for (SourceText& t : label_sources(opts.cuda_sources, "cuda_sources", true, opts.source_files.cuda)) {
      labelled.push_back(std::move(t));
    }
    return module_fields(load_inline(name, sources, decls, opts), labelled);
  });
}

/// kjit.load_module(path): the module's fields as load_inline's, the functions'
/// locations and return types from its manifest.
FieldMap load_module_entry(const String& path) {
  return at_ffi_boundary([&] {
    Module m = load_module(path);
    Definitions given;
    auto manifest = m.ffi_module()->GetFunction(kManifestFunction);
    using tvm::ffi::Any;
    using tvm::ffi::Map;
    const auto record = tvm::ffi::json::Parse((*manifest)().cast<String>()).cast<Map<String, Any>>();
    for (const Any& f : record["functions"].cast<Array<Any>>()) {
      const auto fm = f.cast<Map<String, Any>>();
      auto text = [&](const char* key) {
        auto it = fm.find(key);
        return it == fm.end() ? std::string() : std::string((*it).second.cast<String>());
      };
      given[text("name")] = {text("location"), text("return_type")};
    }
    return module_fields(m, {}, given);
  });
}

/// A dim as the sharding rules read it (python/kjit/sharding.py): a whole symbol, a
/// literal, or an expression of symbols.
FieldMap dim_fields(const Expr& e) {
  const char* kind = e->op == ExprOp::kSymbol ? "symbol" : (e->op == ExprOp::kConst ? "literal" : "expr");
  Array<String> symbols;
  for (const std::string& s : symbols_of(e)) symbols.push_back(String(s));
  return FieldMap{{"kind", String(kind)}, {"text", String(to_string(e))}, {"symbols", symbols}};
}

/// kjit.spec_tensors(name, signature): each tensor's dims and role, and the spec's
/// independent symbols, for the sharding rules derived from a spec.
FieldMap spec_tensors(const FunctionSpec& spec) {
  Array<FieldMap> tensors;
  for (const Param& p : spec.params) {
    if (p.kind != ParamKind::kTensor) continue;
    Array<FieldMap> dims;
    for (const Expr& e : p.tensor.shape) dims.push_back(dim_fields(e));
    tensors.push_back(FieldMap{{"name", String(p.name)},
                               {"written", p.tensor.out},
                               {"returned", p.tensor.returned},
                               {"optional", p.tensor.optional},
                               {"batch", String(p.tensor.batch)},
                               {"any_rank", p.tensor.any_rank},
                               {"dims", dims}});
  }
  return FieldMap{{"tensors", tensors}, {"independent", strings(spec.independent)}};
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("kjit.version", []() { return String(KJIT_VERSION); })
      .def("kjit.default_cache_dir", []() { return at_ffi_boundary([] { return String(default_cache_dir()); }); })
      .def("kjit.include_dir", []() { return at_ffi_boundary([] { return String(system_paths().kjit_include); }); })
      .def("kjit.isa_level_name",
           [](const String& isa) { return at_ffi_boundary([&] { return String(isa_level_name(std::string(isa))); }); })
      .def("kjit.parse_signature",
           [](const String& name, const String& sig, const String& device) {
             return at_ffi_boundary([&] {
               return String(to_string(parse_signature(std::string(name), std::string(sig), parse_device(device))));
             });
           })
      .def("kjit.spec_from_builder",
           [](const FieldMap& spec) { return at_ffi_boundary([&] { return String(to_string(build_spec(spec))); }); })
      .def("kjit.emit_stub",
           [](const String& name, const String& sig) {
             return at_ffi_boundary(
                 [&] { return String(emit_stub(parse_signature(std::string(name), std::string(sig)))); });
           })
      .def("kjit.spec_tensors",
           [](const String& name, const String& sig) {
             return at_ffi_boundary([&] { return spec_tensors(parse_signature(std::string(name), std::string(sig))); });
           })
      .def("kjit.emit_stub_prelude", []() { return String(emit_stub_prelude()); })
      .def("kjit.load_inline", load_inline_entry)
      .def("kjit.load_module", load_module_entry)
      .def("kjit.resolve_functions", resolve_entry)
      .def("kjit.normalize_arg_spec",
           [](const String& fn, const Array<String>& tokens) {
             return at_ffi_boundary([&] { return strings(normalize_arg_spec(std::string(fn), to_strings(tokens))); });
           })
      .def("kjit.error_kind_names", []() {
        Array<String> out;
        for (ErrorKind kind : kAllErrorKinds) out.push_back(String(error_kind_name(kind)));
        return out;
      });
}

}  // namespace
}  // namespace kjit
