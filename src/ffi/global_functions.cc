// The C++ entry points the Python package calls, registered as tvm-ffi global
// functions ("kjit.*"). Each converts kjit's error types to FFI errors of a named
// kind here, in one place.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include "ffi/boundary.h"
#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "kjit/version.h"

namespace kjit {

std::pair<std::string, std::string>& last_compile_error() {
  thread_local std::pair<std::string, std::string> last;
  return last;
}

namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::String;

std::vector<std::string> to_strings(const Array<String>& a) {
  std::vector<std::string> out;
  for (const String& s : a) out.emplace_back(s);
  return out;
}

DeviceKind parse_device(const std::string& d) {
  if (d == "cuda") return DeviceKind::kCUDA;
  if (d == "cpu" || d.empty()) return DeviceKind::kCPU;
  throw SpecError("unknown device '" + d + "': expected cpu or cuda");
}

/// Replays builder calls recorded by Python's kjit.Spec: each op is
/// [verb, args...].
FunctionSpec replay_builder(const std::string& name, const Array<Array<String>>& ops) {
  SpecBuilder b(name);
  for (const Array<String>& op : ops) {
    std::vector<std::string> a = to_strings(op);
    internal_check(!a.empty(), "empty builder op");
    const std::string& verb = a[0];
    if (verb == "tensor") {
      b.tensor(a.at(1), a.at(2), std::vector<std::string>(a.begin() + 3, a.end()));
    } else if (verb == "scalar") {
      b.scalar(a.at(1), a.at(2));
    } else if (verb == "stream") {
      b.stream(a.at(1));
    } else if (verb == "out") {
      b.out();
    } else if (verb == "optional") {
      b.optional();
    } else if (verb == "strided") {
      b.strided();
    } else if (verb == "strides") {
      b.strides(std::vector<std::string>(a.begin() + 1, a.end()));
    } else if (verb == "align") {
      b.align(std::stoll(a.at(1)));
    } else if (verb == "device") {
      b.device(a.at(1));
    } else if (verb == "constraint") {
      b.constraint(a.at(1));
    } else {
      throw InternalError("kjit internal error: unknown builder op '" + verb + "'");
    }
  }
  return b.build();
}

/// Declarations from Python: each is [name, form, origin, payload...] with form
/// "signature" (payload: the string), "tokens" (payload: the tokens) or "infer".
std::vector<FunctionDecl> to_decls(const Array<Array<String>>& functions) {
  std::vector<FunctionDecl> out;
  for (const Array<String>& f : functions) {
    std::vector<std::string> a = to_strings(f);
    internal_check(a.size() >= 3, "a declaration is [name, form, origin, payload...]");
    FunctionDecl d;
    d.name = a[0];
    d.origin = a[2];
    if (a[1] == "signature") {
      d.form = FunctionDecl::Form::kSignature;
      d.signature = a.at(3);
    } else if (a[1] == "tokens") {
      d.form = FunctionDecl::Form::kTokens;
      d.tokens.assign(a.begin() + 3, a.end());
    } else {
      internal_check(a[1] == "infer", "unknown declaration form");
      d.form = FunctionDecl::Form::kInfer;
    }
    out.push_back(std::move(d));
  }
  return out;
}

Array<String> strings(const std::vector<std::string>& v) {
  Array<String> out;
  for (const std::string& s : v) out.push_back(String(s));
  return out;
}

/// [[name, signature, [arg_spec tokens]], ...] of resolved declarations, without
/// compiling: what kjit read off the tokens, annotations and C++ definitions.
Array<Any> resolve_entry(const Array<String>& sources, const Array<Array<String>>& functions,
                         const Array<String>& cuda_sources) {
  return at_ffi_boundary([&] {
    Array<Any> out;
    for (const FunctionSpec& s :
         resolve_module_functions(to_strings(sources), to_strings(cuda_sources), to_decls(functions))) {
      out.push_back(Array<Any>{String(s.name), String(to_string(s)), strings(to_arg_spec(s))});
    }
    return out;
  });
}

Array<Any> load_inline_entry(const String& name, const Array<String>& sources, const Array<Array<String>>& functions,
                             const Array<String>& cflags, const Array<String>& ldflags, const Array<String>& includes,
                             const String& build_directory, bool verbose, bool force_rebuild,
                             const String& xla_include_dir, const Array<String>& cuda_sources,
                             const Array<String>& cuda_cflags, const String& cuda_arch) {
  return at_ffi_boundary([&] {
    InlineOptions opts;
    opts.extra_cflags = to_strings(cflags);
    opts.extra_ldflags = to_strings(ldflags);
    opts.extra_include_paths = to_strings(includes);
    opts.build_directory = std::string(build_directory);
    opts.verbose = verbose;
    opts.force_rebuild = force_rebuild;
    opts.xla_include_dir = std::string(xla_include_dir);
    opts.cuda_sources = to_strings(cuda_sources);
    opts.extra_cuda_cflags = to_strings(cuda_cflags);
    opts.cuda_arch = std::string(cuda_arch);
    Module m = load_inline(std::string(name), to_strings(sources), to_decls(functions), opts);
    Array<Any> names, signatures, stubs, fns, arg_specs, devices;
    for (const FunctionSpec& s : m.specs()) {
      std::string device = "none";
      for (const Param& p : s.params) {
        if (p.kind == ParamKind::kTensor) {
          device = device_kind_name(p.tensor.device);
          break;
        }
      }
      devices.push_back(String(device));
      names.push_back(String(s.name));
      signatures.push_back(String(to_string(s)));
      stubs.push_back(String(m.host_source(s.name)));
      fns.push_back(m.function(s.name));
      arg_specs.push_back(strings(to_arg_spec(s)));
    }
    return Array<Any>{
        m.ffi_module(),          String(m.path()), names,           signatures,           stubs,     fns,
        String(m.full_source()), m.cache_hit(),    String(m.key()), m.has_xla_handlers(), arg_specs, devices};
  });
}

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("kjit.version", []() { return String(KJIT_VERSION); })
      .def("kjit.default_cache_dir", []() { return at_ffi_boundary([] { return String(default_cache_dir()); }); })
      .def("kjit.parse_signature",
           [](const String& name, const String& sig, const String& device) {
             return at_ffi_boundary([&] {
               return String(to_string(parse_signature(std::string(name), std::string(sig), parse_device(device))));
             });
           })
      .def("kjit.spec_from_builder",
           [](const String& name, const Array<Array<String>>& ops) {
             return at_ffi_boundary([&] { return String(to_string(replay_builder(std::string(name), ops))); });
           })
      .def("kjit.emit_stub",
           [](const String& name, const String& sig) {
             return at_ffi_boundary(
                 [&] { return String(emit_stub(parse_signature(std::string(name), std::string(sig)))); });
           })
      .def("kjit.emit_stub_prelude", []() { return String(emit_stub_prelude()); })
      .def("kjit.load_inline", load_inline_entry)
      .def("kjit.resolve_functions", resolve_entry)
      .def("kjit.normalize_arg_spec",
           [](const String& fn, const Array<String>& tokens) {
             return at_ffi_boundary([&] { return strings(normalize_arg_spec(std::string(fn), to_strings(tokens))); });
           })
      .def("kjit.take_compile_error", []() {
        Array<String> out{String(last_compile_error().first), String(last_compile_error().second)};
        last_compile_error() = {};
        return out;
      });
}

}  // namespace
}  // namespace kjit
