// Fuzzes brainevent's arg_spec tokens: one token per line of the input. Accepted
// token lists are then resolved against a few C++ definitions, which checks the
// tokens against the parameters (counts, attr types, names).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "declare/arg_spec.h"
#include "fuzz_common.h"
#include "kjit/declare.h"

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// Definitions the tokens are resolved against: tensors, typed pointers, attrs, a stream.
const char* const kSources[] = {
    "void f(const kjit::TensorView a, kjit::TensorView b) {}",
    "void f(const float* x, float* y, float scale, int64_t n) {}",
    "void f(const kjit::TensorView x, kjit::TensorView y, double alpha, bool flag, kjit::Stream s) {}",
    "namespace ns { int64_t f(const BE::Tensor in, BE::Tensor out, uint16_t h, std::complex<float> z); }",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string source = kSources[data[0] % (sizeof(kSources) / sizeof(kSources[0]))];
  const std::vector<std::string> tokens = split_lines(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::vector<kjit::ArgToken> parsed;
  if (!kjit_fuzz::run_guarded("parse_arg_spec", [&] { parsed = kjit::parse_arg_spec("arg_spec of 'f'", tokens); })) {
    return 0;
  }
  for (const kjit::ArgToken& token : parsed) kjit::canonical_token(token);
  std::vector<std::string> normalized;
  if (!kjit_fuzz::run_guarded("normalize_arg_spec", [&] { normalized = kjit::normalize_arg_spec("f", tokens); })) {
    kjit_fuzz::bug("parse_arg_spec accepted tokens that normalize_arg_spec rejects");
  }
  std::vector<std::string> again;
  if (!kjit_fuzz::run_guarded("normalize_arg_spec (canonical)",
                              [&] { again = kjit::normalize_arg_spec("f", normalized); }) ||
      again != normalized) {
    kjit_fuzz::bug("canonical tokens do not normalize to themselves");
  }
  kjit::FunctionDecl decl;
  decl.name = "f";
  decl.form = kjit::FunctionDecl::Form::kTokens;
  decl.tokens = normalized;
  decl.origin = "functions['f']";
  kjit_fuzz::run_guarded("resolve_functions", [&] { kjit::resolve_functions({decl}, kjit::label_sources({source})); });
  return 0;
}
