// Test helpers: FunctionDecls as each front door of kjit.load_inline's `functions`
// makes them (a signature string, arg_spec tokens, or "infer from the C++").
#ifndef KJIT_TESTS_CPP_DECL_BUILDERS_H_
#define KJIT_TESTS_CPP_DECL_BUILDERS_H_

#include <string>
#include <utility>
#include <vector>

#include "kjit/declare.h"

namespace kjit_test {

inline kjit::FunctionDecl signature_decl(const std::string& name, const std::string& signature) {
  kjit::FunctionDecl d;
  d.name = name;
  d.form = kjit::FunctionDecl::Form::kSignature;
  d.signature = signature;
  d.origin = "functions['" + name + "']";
  return d;
}

inline kjit::FunctionDecl tokens_decl(const std::string& name, std::vector<std::string> tokens) {
  kjit::FunctionDecl d;
  d.name = name;
  d.form = kjit::FunctionDecl::Form::kTokens;
  d.tokens = std::move(tokens);
  d.origin = "functions['" + name + "']";
  return d;
}

inline kjit::FunctionDecl infer_decl(const std::string& name) {
  kjit::FunctionDecl d;
  d.name = name;
  d.form = kjit::FunctionDecl::Form::kInfer;
  d.origin = "functions['" + name + "']";
  return d;
}

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_DECL_BUILDERS_H_
