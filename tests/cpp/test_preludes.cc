// The preludes of generated code are the headers under include/kjit/detail, byte for
// byte: each emitted source contains its headers' exact text (so the cache keys,
// which hash the whole source, cover them), and generated code never reads a
// kjit/detail header at JIT time. tests/cpp/CMakeLists.txt compiles each header alone.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "cpu/codegen_cpu.h"
#include "cuda/codegen_cuda.h"
#include "kjit/build.h"
#include "kjit/codegen.h"

namespace kjit {
namespace {

/// A header as it is in the source tree.
std::string header_text(const std::string& name) {
  std::ifstream in(std::string(KJIT_TEST_DETAIL_DIR) + "/" + name + ".h", std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string guard_of(const std::string& name) {
  std::string guard = "KJIT_DETAIL_";
  for (char c : name) guard += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return guard + "_H_";
}

ModuleSource full_module() {
  ModuleSourceOptions options;
  options.xla_handlers = true;
  options.cuda_sources = {{"cuda_sources", "void add(kjit::TensorView, void*) {}\n"}};
  return emit_module_source({}, {parse_signature("add", "a: float32[n] @cuda, s: stream")}, "m.cc", options);
}

EwKernelTypes float16_add() {
  EwKernelTypes t;
  t.outputs = {EwType::kFloat16};
  t.inputs = {EwType::kFloat16, EwType::kFloat16};
  return t;
}

const char* kAdd = "template <typename T> T add(T a, T b) { return a + b; }";

/// Every `#include <kjit/detail/X.h>` in generated code sits under `#ifndef` X's
/// guard, which the embedded text of X defined earlier: the include is skipped.
/// `from` skips a module source's first line, the one detail header it does read
/// (stub_includes.h, or its precompiled form).
void expect_detail_includes_skipped(const std::string& text, size_t from = 0) {
  const std::string directive = "#include <kjit/detail/";
  for (size_t at = text.find(directive, from); at != std::string::npos; at = text.find(directive, at + 1)) {
    const size_t begin = at + directive.size();
    const std::string name = text.substr(begin, text.find(".h>", begin) - begin);
    const std::string ifndef = "#ifndef " + guard_of(name) + "\n";
    EXPECT_EQ(text.rfind(ifndef, at), at - ifndef.size()) << name;
    if (from > 0 && name == "stub_includes") continue;  // the first line defined its guard
    EXPECT_LT(text.find("#define " + guard_of(name) + "\n"), at) << name;
  }
}

TEST(Preludes, EmitFunctionsReturnTheHeaders) {
  EXPECT_EQ(emit_stub_prelude(), header_text("float16_conversions") + header_text("stub_prelude"));
  EXPECT_EQ(emit_xla_prelude(), header_text("xla_prelude"));
  EXPECT_EQ(emit_xla_helpers_source(),
            kStubIncludesLine + emit_stub_prelude() + header_text("xla_prelude") + header_text("xla_helpers"));
  EXPECT_EQ(emit_cuda_prelude(), header_text("cuda_host_prelude"));
}

TEST(Preludes, ModuleSourceEmbedsEachHeaderInOrder) {
  const std::string text = full_module().text;
  size_t last = 0;
  for (const char* name : {"float16_conversions", "stub_prelude", "cuda_host_prelude", "xla_prelude"}) {
    const size_t at = text.find(header_text(name));
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GE(at, last) << name;
    last = at;
  }
  ASSERT_EQ(text.rfind(kStubIncludesLine, 0), 0u);  // first, so a precompiled header can stand for it
  expect_detail_includes_skipped(text, std::string(kStubIncludesLine).size());
}

TEST(Preludes, ElementwiseSourcesEmbedTheirHeaders) {
  const std::string cpu = emit_elementwise_cpu(kAdd, "add", float16_add());
  EXPECT_NE(cpu.find(header_text("float16_conversions")), std::string::npos);
  EXPECT_NE(cpu.find(header_text("stream_stores")), std::string::npos);
  expect_detail_includes_skipped(cpu);
  const std::string cuda = emit_elementwise_cuda(kAdd, "add", float16_add(), EwCudaVariant::kCastStrided);
  EXPECT_NE(cuda.find(header_text("elementwise_cuda_prelude")), std::string::npos);
  EXPECT_EQ(cuda.find("#include"), std::string::npos);  // NVRTC: no headers at all
}

// The key hashes the whole generated source, so any edit of a prelude is a new key.
TEST(Preludes, CacheKeyCoversThePreludeText) {
  BuildRequest request;
  request.name = "m";
  request.source = full_module().text;
  const std::string key = build_key(request);
  for (const char* name : {"float16_conversions", "stub_prelude", "cuda_host_prelude", "xla_prelude"}) {
    BuildRequest edited = request;
    const size_t at = edited.source.find(header_text(name));
    ASSERT_NE(at, std::string::npos) << name;
    edited.source.insert(at + header_text(name).size() / 2, " ");
    EXPECT_NE(build_key(edited), key) << name;
  }
  // The helpers' text is in the object build the module links, whose key is in the module's.
  BuildRequest helpers;
  helpers.name = "kjit_xla_helpers";
  helpers.source = emit_xla_helpers_source();
  helpers.object_only = true;
  request.objects = {helpers};
  const std::string with_helpers = build_key(request);
  EXPECT_NE(with_helpers, key);
  const size_t at = request.objects[0].source.find(header_text("xla_helpers"));
  ASSERT_NE(at, std::string::npos);
  request.objects[0].source.insert(at + header_text("xla_helpers").size() / 2, " ");
  EXPECT_NE(build_key(request), with_helpers);
}

}  // namespace
}  // namespace kjit
