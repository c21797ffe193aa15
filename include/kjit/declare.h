// kjit/declare.h — the front doors besides the signature string: brainevent-style
// arg_spec tokens, specs inferred from the C++ definition, and `// @kjit` / `// @BE`
// annotations in the sources. All of them produce the one FunctionSpec model.
#ifndef KJIT_DECLARE_H_
#define KJIT_DECLARE_H_

#include <string>
#include <vector>

#include "kjit/spec.h"

namespace kjit {

/// One source text and the name messages use for it ("cpp_sources", "cpp_sources[1]").
struct SourceText {
  std::string file;
  std::string text;
  bool cuda = false;  ///< device code (cuda_sources): its functions default to @cuda
};

/// Names a module's sources for messages and #line: `what` alone for one source,
/// `what[i]` for several ("cpp_sources", "cuda_sources[1]"); a source read from a
/// file (files[i] not empty: load_inline's `sources=[paths]`) by its path.
std::vector<SourceText> label_sources(const std::vector<std::string>& texts, const std::string& what = "cpp_sources",
                                      bool cuda = false, const std::vector<std::string>& files = {});

/// The files a module's sources were read from, index for index ("" for a source
/// given as text): what label_sources names them by.
struct SourceFiles {
  std::vector<std::string> cpp;
  std::vector<std::string> cuda;
};

/// How a function was declared.
struct FunctionDecl {
  enum class Form {
    kSignature,  ///< a signature string (docs/spec.md)
    kTokens,     ///< arg_spec tokens: arg, ret, stream, attr.<name>[:<type>] and aliases
    kInfer,      ///< nothing: read the spec off the C++ definition
  };
  std::string name;
  Form form = Form::kInfer;
  std::string signature;             ///< kSignature
  std::vector<std::string> tokens;   ///< kTokens
  std::string origin;                ///< where it was declared, for messages ("functions['f']")
  std::string annotation_file = {};  ///< an annotation's source ("cuda_sources"); empty otherwise
  int annotation_line = 0;           ///< an annotation's 1-based line; 0 otherwise
  /// "backward=g" on an annotation: the function of the module computing this one's
  /// gradients (FunctionSpec::backward); empty otherwise.
  std::string backward = {};
};

/// Canonical tokens: aliases normalised (args -> arg, rets -> ret, ctx.stream ->
/// stream, attrs.x -> attr.x, attrs.x:t -> attr.x:t). Throws SpecError on an
/// invalid token, a duplicate stream or attr, no 'ret', or an attr name that is not
/// a C identifier.
std::vector<std::string> normalize_arg_spec(const std::string& fn, const std::vector<std::string>& tokens);

/// The arg_spec tokens of a spec (tensor -> arg/ret, scalar -> attr.name:type).
std::vector<std::string> to_arg_spec(const FunctionSpec& spec);

/// The `// @kjit NAME ...` and `// @BE NAME ...` lines of the sources, in order:
/// "NAME tokens..." (kTokens), "NAME(signature)" (kSignature), "NAME" (kInfer).
/// Throws SpecError on a malformed or duplicate annotation.
std::vector<FunctionDecl> read_annotations(const std::vector<SourceText>& sources);

/// True when the sources use brainevent's spelling (`// @BE` or `BE::Tensor`), so the
/// module gets `BE::Tensor` as an alias of kjit::TensorView.
bool uses_brainevent_spelling(const std::vector<SourceText>& sources);

/// Turns declarations into validated specs, reading the C++ definitions in
/// `sources` where a declaration leaves something out (names, bare attr types,
/// typed-pointer dtypes, namespaces). Tensors default to @cuda for functions
/// defined in a `cuda` source, else to `default_device`. Throws SpecError.
std::vector<FunctionSpec> resolve_functions(const std::vector<FunctionDecl>& decls,
                                            const std::vector<SourceText>& sources,
                                            DeviceKind default_device = DeviceKind::kCPU);

/// A module's whole front door: labels its sources, reads the annotations when
/// `decls` is empty, and resolves; a function found in no source follows the module
/// (@cuda when all its code is device code).
std::vector<FunctionSpec> resolve_module_functions(const std::vector<std::string>& cpp_sources,
                                                   const std::vector<std::string>& cuda_sources,
                                                   const std::vector<FunctionDecl>& decls,
                                                   const SourceFiles& files = {});

}  // namespace kjit

#endif  // KJIT_DECLARE_H_
