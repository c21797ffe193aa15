// The C++ entry points the Python package calls, registered as tvm-ffi global
// functions ("kjit.*"). Each converts kjit's error types to FFI errors of a named
// kind here, in one place.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "kjit/version.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::String;

/// Command and log of the last CompileError on this thread, for the Python
/// CompileError's .command and .log.
thread_local std::pair<std::string, std::string> t_last_compile_error;

/// Runs f, turning kjit's exceptions into FFI errors of the matching kind.
template <typename F>
auto at_ffi_boundary(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SpecError& e) {
    throw tvm::ffi::Error("SpecError", e.what(), "");
  } catch (const CompileError& e) {
    t_last_compile_error = {e.command(), e.log()};
    throw tvm::ffi::Error("CompileError", e.what(), "");
  } catch (const ToolchainError& e) {
    throw tvm::ffi::Error("ToolchainError", e.what(), "");
  } catch (const CacheError& e) {
    throw tvm::ffi::Error("CacheError", e.what(), "");
  } catch (const InternalError& e) {
    throw tvm::ffi::Error("InternalError", e.what(), "");
  }
}

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

Array<Any> load_inline_entry(const String& name, const Array<String>& sources, const Array<Array<String>>& functions,
                             const Array<String>& cflags, const Array<String>& ldflags, const Array<String>& includes,
                             const String& build_directory, bool verbose) {
  return at_ffi_boundary([&] {
    SignatureList sigs;
    for (const Array<String>& f : functions) sigs.emplace_back(std::string(f[0]), std::string(f[1]));
    InlineOptions opts;
    opts.extra_cflags = to_strings(cflags);
    opts.extra_ldflags = to_strings(ldflags);
    opts.extra_include_paths = to_strings(includes);
    opts.build_directory = std::string(build_directory);
    opts.verbose = verbose;
    Module m = load_inline(std::string(name), to_strings(sources), sigs, opts);
    Array<Any> names, signatures, stubs, fns;
    for (const FunctionSpec& s : m.specs()) {
      names.push_back(String(s.name));
      signatures.push_back(String(to_string(s)));
      stubs.push_back(String(m.host_source(s.name)));
      fns.push_back(m.function(s.name));
    }
    return Array<Any>{m.ffi_module(),          String(m.path()), names, signatures, stubs, fns,
                      String(m.full_source()), m.cache_hit()};
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
      .def("kjit.take_compile_error", []() {
        Array<String> out{String(t_last_compile_error.first), String(t_last_compile_error.second)};
        t_last_compile_error = {};
        return out;
      });
}

}  // namespace
}  // namespace kjit
