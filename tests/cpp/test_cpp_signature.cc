// The C++ signature scanner: finding free functions by name and splitting their parameters.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "declare/cpp_signature.h"

namespace kjit {
namespace {

std::vector<std::string> names_of(const CppFunction& fn) {
  std::vector<std::string> out;
  for (const CppParam& p : fn.params) out.push_back(p.name);
  return out;
}

std::vector<std::string> types_of(const CppFunction& fn) {
  std::vector<std::string> out;
  for (const CppParam& p : fn.params) out.push_back(p.type);
  return out;
}

using Names = std::vector<std::string>;

TEST(CppSignature, FindsASimpleDefinition) {
  auto fns = find_cpp_functions("#include <cstdint>\n\nvoid f(int n, float* x) {\n  x[0] = n;\n}\n", "f");
  ASSERT_EQ(fns.size(), 1u);
  const CppFunction& fn = fns[0];
  EXPECT_EQ(fn.name, "f");
  EXPECT_EQ(fn.qualified_name, "f");
  EXPECT_EQ(fn.return_type, "void");
  EXPECT_TRUE(fn.is_definition);
  EXPECT_FALSE(fn.is_template);
  EXPECT_EQ(fn.line, 3);
  ASSERT_EQ(fn.params.size(), 2u);
  EXPECT_EQ(fn.params[0].name, "n");
  EXPECT_EQ(fn.params[0].type, "int");
  EXPECT_EQ(fn.params[0].base, "int");
  EXPECT_EQ(fn.params[0].pointer_depth, 0);
  EXPECT_EQ(fn.params[1].name, "x");
  EXPECT_EQ(fn.params[1].type, "float*");
  EXPECT_EQ(fn.params[1].base, "float");
  EXPECT_EQ(fn.params[1].pointer_depth, 1);
  EXPECT_FALSE(fn.params[1].is_const);
  EXPECT_FALSE(fn.params[1].is_reference);
}

TEST(CppSignature, SkipsComments) {
  const char* src =
      "// void f(int commented);\n"
      "// a continued comment \\\n"
      "void f(int hidden);\n"
      "/* void f(int block);\n"
      "   void f(int lines); */\n"
      "void f(int a /* , int b */, float c // , int d\n"
      "       , /* unnamed */ double) {}\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].line, 6);
  EXPECT_EQ(names_of(fns[0]), (Names{"a", "c", ""}));
  EXPECT_EQ(types_of(fns[0]), (Names{"int", "float", "double"}));
}

TEST(CppSignature, SkipsStringAndCharLiterals) {
  const char* src =
      "const char* s = \"void f(int a); \\\" void f(int b);\";\n"
      "char q = '\\''; char d = '\"'; char e = '{';\n"
      "const wchar_t* w = L\"void f(int w);\";\n"
      "auto u = u8\"}\"_sv;\n"
      "int big = 1'000'000;\n"
      "void f(int c);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"c"}));
  EXPECT_EQ(fns[0].line, 6);
}

TEST(CppSignature, SkipsRawStrings) {
  const char* src =
      "const char* r = R\"x(void f(int a); )\" \"{ )x\";\n"
      "const char* k = R\"(\n"
      "void f(int b) { }\n"
      ")\";\n"
      "const char* m = u8R\"--(})--\";\n"
      "void f(int c) {}\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"c"}));
  EXPECT_EQ(fns[0].line, 6);
}

TEST(CppSignature, SkipsPreprocessorLines) {
  const char* src =
      "#define f(x) void f(int x) \\\n"
      "    { x; }\n"
      "  #  include \"dir//f.h\"\n"
      "#define G /* void f(int g);\n"
      "   still a comment */ {\n"
      "#error don't stop here\n"
      "void f(float y);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"y"}));
  EXPECT_EQ(fns[0].line, 7);
  EXPECT_EQ(fns[0].qualified_name, "f");
}

TEST(CppSignature, DropsDefaultArguments) {
  const char* src =
      "void f(int n = g(1, 2), float a = (1.0f), std::vector<int> v = {1,2},\n"
      "       char c = ')', const char* s = \")\", int k = (3), int m = sizeof(int),\n"
      "       std::pair<int, int> p = std::pair<int, int>(1, 2), int last = 1 << 3);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"n", "a", "v", "c", "s", "k", "m", "p", "last"}));
  EXPECT_EQ(types_of(fns[0]), (Names{"int", "float", "std::vector<int>", "char", "const char*", "int", "int",
                                     "std::pair<int, int>", "int"}));
}

TEST(CppSignature, ALessThanInADefaultArgumentIsNotATemplate) {
  auto fns = find_cpp_functions("void f(bool b = lo < hi, int m = 3, bool c = x > y);", "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"b", "m", "c"}));
}

TEST(CppSignature, TemplateArgumentsKeepTheirCommas) {
  auto fns = find_cpp_functions(
      "void f(std::map<int, std::pair<int,int>> m, std::array<float, (4 > 2 ? 4 : 2)> a, "
      "std::function<void(int, int)> cb, int k);",
      "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"m", "a", "cb", "k"}));
  EXPECT_EQ(fns[0].params[0].type, "std::map<int, std::pair<int, int>>");
  EXPECT_EQ(fns[0].params[0].base, "std::map<int, std::pair<int, int>>");
  EXPECT_EQ(fns[0].params[2].type, "std::function<void(int, int)>");
}

TEST(CppSignature, StripsAttributesAndQualifiers) {
  const char* src =
      "void f([[maybe_unused]] int a, int b __attribute__((unused)), alignas(16) float c[4],\n"
      "       float* __restrict__ out, const float* __restrict in, volatile int* v, register int r,\n"
      "       float const* p, const float* q, float* const z, volatile const int vc, std::vector<const float*> w,\n"
      "       float x[], int y[3][4]);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  const auto& ps = fns[0].params;
  ASSERT_EQ(ps.size(), 14u);
  EXPECT_EQ(names_of(fns[0]), (Names{"a", "b", "c", "out", "in", "v", "r", "p", "q", "z", "vc", "w", "x", "y"}));
  EXPECT_EQ(ps[0].type, "int");
  EXPECT_EQ(ps[1].type, "int");
  EXPECT_EQ(ps[2].type, "float[4]");
  EXPECT_EQ(ps[2].base, "float");
  EXPECT_EQ(ps[2].pointer_depth, 1);
  EXPECT_EQ(ps[3].type, "float*");
  EXPECT_EQ(ps[3].base, "float");
  EXPECT_EQ(ps[4].type, "const float*");
  EXPECT_TRUE(ps[4].is_const);
  EXPECT_EQ(ps[5].type, "int*");
  EXPECT_EQ(ps[5].base, "int");
  EXPECT_EQ(ps[6].type, "int");
  EXPECT_EQ(ps[7].type, "float const*");
  EXPECT_EQ(ps[7].base, "float");
  EXPECT_TRUE(ps[7].is_const);
  EXPECT_EQ(ps[7].pointer_depth, 1);
  EXPECT_TRUE(ps[8].is_const);
  EXPECT_EQ(ps[9].type, "float* const");
  EXPECT_EQ(ps[9].base, "float");
  EXPECT_FALSE(ps[9].is_const);  // the pointer is const, not the floats
  EXPECT_TRUE(ps[10].is_const);
  EXPECT_EQ(ps[10].base, "int");
  EXPECT_EQ(ps[11].base, "std::vector<const float*>");  // const inside template arguments stays
  EXPECT_FALSE(ps[11].is_const);
  EXPECT_EQ(ps[11].pointer_depth, 0);
  EXPECT_EQ(ps[12].type, "float[]");
  EXPECT_EQ(ps[12].pointer_depth, 1);
  EXPECT_EQ(ps[13].type, "int[3][4]");
  EXPECT_EQ(ps[13].pointer_depth, 1);  // decays to int (*)[4]
}

TEST(CppSignature, HandlesLineBreaksVoidAndUnnamedParameters) {
  const char* src =
      "void\n"
      "f\n"
      "(\n"
      "  int\n"
      "  ,\n"
      "  const float *\n"
      "  ,\n"
      "  unsigned long long\n"
      "  ,\n"
      "  const T\n"
      ");\n"
      "void f(void);\n"
      "void f();\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 3u);
  EXPECT_EQ(fns[0].line, 2);
  ASSERT_EQ(fns[0].params.size(), 4u);
  EXPECT_EQ(names_of(fns[0]), (Names{"", "", "", ""}));
  EXPECT_EQ(types_of(fns[0]), (Names{"int", "const float*", "unsigned long long", "const T"}));
  EXPECT_EQ(fns[0].params[1].base, "float");
  EXPECT_TRUE(fns[0].params[1].is_const);
  EXPECT_EQ(fns[0].params[3].base, "T");
  EXPECT_TRUE(fns[0].params[3].is_const);
  EXPECT_TRUE(fns[1].params.empty());
  EXPECT_TRUE(fns[2].params.empty());
}

TEST(CppSignature, QualifiesNamesByNamespace) {
  const char* src =
      "namespace a { namespace b { void f(int x) {} } }\n"
      "namespace a::b { void f(float x); }\n"
      "namespace c { inline namespace v1 { void f(double x); } }\n"
      "namespace { void f(char x); }\n"
      "namespace d { namespace { void f(short x); } }\n"
      "void ns::f(long x) {}\n"
      "namespace e { void ::g(); void inner::f(bool x) {} }\n"
      "extern \"C\" { void f(unsigned x); }\n"
      "extern \"C\" void f(signed x);\n"
      "namespace al = a::b;\n"
      "namespace [[deprecated]] old { void f(int* x); }\n"
      "void f(int& x);\n";
  auto fns = find_cpp_functions(src, "f");
  std::vector<std::string> q;
  for (const auto& fn : fns) q.push_back(fn.qualified_name);
  EXPECT_EQ(q, (Names{"a::b::f", "a::b::f", "c::v1::f", "f", "d::f", "ns::f", "e::inner::f", "f", "f", "old::f", "f"}));
  ASSERT_EQ(fns.size(), 11u);
  EXPECT_EQ(fns[7].return_type, "void");
  EXPECT_EQ(fns[8].return_type, "void");
  EXPECT_EQ(fns[5].params[0].type, "long");
}

TEST(CppSignature, ExternCInsideANamespaceKeepsTheNamespace) {
  auto fns = find_cpp_functions("namespace k {\nextern \"C\" {\nint f(int);\n}\nint g();\n}\nint f(float);\n", "f");
  ASSERT_EQ(fns.size(), 2u);
  EXPECT_EQ(fns[0].qualified_name, "k::f");
  EXPECT_EQ(fns[1].qualified_name, "f");
  EXPECT_EQ(fns[1].line, 7);
}

TEST(CppSignature, IgnoresCallsMembersAndOtherNames) {
  const char* src =
      "struct S { void f(int); static void f(float x) { f(1); } };\n"
      "class C final : public S { public: void f(double); };\n"
      "template <class T> struct TS { void f(T); };\n"
      "int y = f(3);\n"
      "auto z = obj.f(x), w = p->f(x);\n"
      "obj.f(x);\n"
      "p->f(x);\n"
      "f(3);\n"
      "int v(f(3));\n"
      "static_assert(sizeof(f(1)) == 4, \"f(int x)\");\n"
      "void g() { f(1); int f(int); obj.f(2); }\n"
      "void other_f(int x);\n"
      "void f2(int x);\n"
      "void S::f(int x) {}\n"
      "template <class T> void TS<T>::f(T x) {}\n"
      "void (*f)(int);\n"
      "typedef void f(int);\n"
      "int f(3);\n"
      "int f = 4;\n"
      "auto l = [](int) { return f(1); };\n";
  EXPECT_TRUE(find_cpp_functions(src, "f").empty());
}

TEST(CppSignature, ReturnsDeclarationsAndDefinitionsInOrder) {
  const char* src =
      "void f(int x);\n"
      "void f(int x) { if (x) { return; } }\n"
      "void f(float) = delete;\n"
      "void f(double) = default;\n"
      "void f(char c) try { g(); } catch (const std::exception& e) { } catch (...) { }\n"
      "void f(short s) {}\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 6u);
  std::vector<bool> defs;
  std::vector<int> lines;
  for (const auto& fn : fns) {
    defs.push_back(fn.is_definition);
    lines.push_back(fn.line);
  }
  EXPECT_EQ(defs, (std::vector<bool>{false, true, false, false, true, true}));
  EXPECT_EQ(lines, (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

TEST(CppSignature, HandlesTrailingReturnsNoexceptAndTemplates) {
  const char* src =
      "auto f(int x) -> int { return x; }\n"
      "void f(float x) noexcept;\n"
      "void f(double x) noexcept(true) {}\n"
      "auto f(char x) -> std::pair<int, int>;\n"
      "template <typename T, int N> void f(T* x) {}\n"
      "template <typename T, typename = std::enable_if_t<(sizeof(T) > 2)>>\n"
      "T f(const T& x, int n = T{}) { return x; }\n"
      "template <> void f<float>(float* x, int n);\n"
      "decltype(auto) f(short x) { return x; }\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 8u);
  EXPECT_EQ(fns[0].return_type, "int");
  EXPECT_TRUE(fns[0].is_definition);
  EXPECT_EQ(names_of(fns[0]), (Names{"x"}));
  EXPECT_FALSE(fns[1].is_definition);
  EXPECT_TRUE(fns[2].is_definition);
  EXPECT_EQ(fns[3].return_type, "std::pair<int, int>");
  EXPECT_TRUE(fns[4].is_template);
  EXPECT_EQ(fns[4].return_type, "void");
  EXPECT_EQ(fns[4].params[0].type, "T*");
  EXPECT_EQ(fns[4].params[0].base, "T");
  EXPECT_TRUE(fns[5].is_template);
  EXPECT_EQ(fns[5].return_type, "T");
  EXPECT_EQ(fns[5].line, 7);
  EXPECT_EQ(names_of(fns[5]), (Names{"x", "n"}));
  EXPECT_TRUE(fns[6].is_template);
  EXPECT_EQ(names_of(fns[6]), (Names{"x", "n"}));
  EXPECT_FALSE(fns[0].is_template);
  EXPECT_EQ(fns[7].return_type, "decltype(auto)");
  // Type template parameters by name (the stub dispatches over dtype variables so named).
  EXPECT_EQ(fns[4].template_type_params, (Names{"T"}));
  EXPECT_TRUE(fns[4].template_has_value_params);  // int N
  EXPECT_EQ(fns[5].template_type_params, (Names{"T", ""}));
  EXPECT_FALSE(fns[5].template_has_value_params);
  EXPECT_TRUE(fns[6].template_type_params.empty());  // template <>
}

TEST(CppSignature, NamesTypeTemplateParameters) {
  const std::string src =
      "template <class T, typename U = std::pair<int, int>> void g(T a, U b) {}\n"
      "template <typename... Ts> void h(Ts... a) {}\n";
  auto g = find_cpp_functions(src, "g");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].template_type_params, (Names{"T", "U"}));
  EXPECT_FALSE(g[0].template_has_value_params);
  auto h = find_cpp_functions(src, "h");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_TRUE(h[0].template_has_value_params);  // a pack: no one value to pick
}

TEST(CppSignature, StripsSpecifiersFromTheReturnType) {
  const char* src =
      "[[nodiscard]] static inline constexpr int64_t f(int x);\n"
      "extern \"C\" __attribute__((visibility(\"default\"))) std::pair<int, int> f(int x);\n"
      "__global__ void __launch_bounds__(256) f(const float* __restrict__ x);\n"
      "inline const kjit::TensorView& f(const kjit::TensorView& x);\n"
      "unsigned long long* f(void*);\n";
  auto fns = find_cpp_functions(src, "f");
  std::vector<std::string> r;
  for (const auto& fn : fns) r.push_back(fn.return_type);
  EXPECT_EQ(r, (Names{"int64_t", "std::pair<int, int>", "void", "const kjit::TensorView&", "unsigned long long*"}));
}

TEST(CppSignature, NormalisesCommonKernelTypes) {
  const char* src =
      "void f(const kjit::TensorView x, ::kjit::TensorView &y, BE::Tensor z, unsigned long long n,\n"
      "       long int m, std::int64_t k, cudaStream_t stream, float* __restrict__ out,\n"
      "       const kjit::TensorView& r, std::complex<float> c, int&& rv, Args&&... rest);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  const auto& ps = fns[0].params;
  ASSERT_EQ(ps.size(), 12u);
  EXPECT_EQ(names_of(fns[0]), (Names{"x", "y", "z", "n", "m", "k", "stream", "out", "r", "c", "rv", "rest"}));
  EXPECT_EQ(ps[0].type, "const kjit::TensorView");
  EXPECT_EQ(ps[0].base, "kjit::TensorView");
  EXPECT_TRUE(ps[0].is_const);
  EXPECT_EQ(ps[1].type, "::kjit::TensorView&");
  EXPECT_EQ(ps[1].base, "kjit::TensorView");
  EXPECT_TRUE(ps[1].is_reference);
  EXPECT_FALSE(ps[1].is_const);
  EXPECT_EQ(ps[2].base, "BE::Tensor");
  EXPECT_EQ(ps[3].base, "unsigned long long");
  EXPECT_EQ(ps[4].base, "long int");
  EXPECT_EQ(ps[5].base, "std::int64_t");
  EXPECT_EQ(ps[6].base, "cudaStream_t");
  EXPECT_EQ(ps[7].type, "float*");
  EXPECT_EQ(ps[7].base, "float");
  EXPECT_EQ(ps[7].pointer_depth, 1);
  EXPECT_EQ(ps[8].type, "const kjit::TensorView&");
  EXPECT_TRUE(ps[8].is_const);
  EXPECT_TRUE(ps[8].is_reference);
  EXPECT_EQ(ps[9].type, "std::complex<float>");
  EXPECT_EQ(ps[9].base, "std::complex<float>");
  EXPECT_TRUE(ps[10].is_reference);
  EXPECT_EQ(ps[11].type, "Args&&...");
}

TEST(CppSignature, ReadsFunctionPointerParameters) {
  auto fns = find_cpp_functions("void f(void (*cb)(int, float), float (&a)[4], int (*)(void));", "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(names_of(fns[0]), (Names{"cb", "a", ""}));
  EXPECT_EQ(fns[0].params[0].type, "void(*)(int, float)");
  EXPECT_EQ(fns[0].params[0].pointer_depth, 1);
  EXPECT_TRUE(fns[0].params[1].is_reference);
}

TEST(CppSignature, SkipsBodiesOfClassesAndInitializers) {
  const char* src =
      "struct P { int a; void f(int); } p = {1};\n"
      "int arr[] = {1, 2, 3};\n"
      "enum class E : int { A, B };\n"
      "auto lam = [](int x) { struct L { void f(); }; return x; };\n"
      "namespace n { int g(int x) { return x; } }\n"
      "void f(E e);\n";
  auto fns = find_cpp_functions(src, "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].params[0].type, "E");
  EXPECT_EQ(fns[0].line, 6);
}

TEST(CppSignature, SurvivesOddInput) {
  const std::vector<std::string> odd = {
      "",
      "f",
      "f(",
      "void f(",
      "void f(int x",
      "void f(int x) {",
      "}}}} void f(int);",
      ")))]]] void f(int);",
      "void f(int x)) {}",
      "template <",
      "template < void f(int);",
      "R\"x(",
      "\"",
      "'",
      "/*",
      "#define \\",
      "void f(int x = ;",
      "namespace {",
      "namespace",
      "extern \"C\"",
      "void f(int a,)",
      "void f<(int);",
      "void f(std::vector<int x);",
      "\\",
      "void f(int x) try",
      "void f(int [[x) {}",
      "void f(...);",
  };
  for (const std::string& src : odd) {
    EXPECT_NO_THROW(find_cpp_functions(src, "f")) << src;
  }
  auto fns = find_cpp_functions("}}}} void f(int);", "f");
  ASSERT_EQ(fns.size(), 1u);
  fns = find_cpp_functions("void f(int x)) {}\nvoid f(float y);", "f");  // the stray ')' costs one match
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(fns[0].line, 2);
  fns = find_cpp_functions("void f(int n, ...);", "f");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_EQ(types_of(fns[0]), (Names{"int", "..."}));
  EXPECT_TRUE(find_cpp_functions("void f(int x);", "").empty());
}

TEST(CppSignature, SurvivesEveryTruncationOfARealisticSource) {
  const std::string src =
      "// kernel\n#include <kjit/kernel.h>\n#define TWICE(x) \\\n  ((x) * 2)\n"
      "namespace kernels { namespace {\n"
      "template <typename T, int N = 4> struct Acc { T v[N]; void f(T); };\n"
      "const char* doc = R\"md(void f(int) { )md\" \"\\\"'\";\n"
      "}  // namespace\n"
      "[[nodiscard]] inline int64_t f(const kjit::TensorView x, float* __restrict__ out /* out */,\n"
      "    std::map<int, std::pair<int,int>> m = {}, int n = g(1, 2), char c = '}') noexcept {\n"
      "  for (int i = 0; i < n; ++i) { out[i] = TWICE(i); }\n  return f(x, out);\n}\n"
      "}  // namespace kernels\n";
  ASSERT_EQ(find_cpp_functions(src, "f").size(), 1u);
  EXPECT_EQ(find_cpp_functions(src, "f")[0].qualified_name, "kernels::f");
  EXPECT_EQ(names_of(find_cpp_functions(src, "f")[0]), (Names{"x", "out", "m", "n", "c"}));
  for (size_t n = 0; n <= src.size(); ++n) {
    EXPECT_NO_THROW(find_cpp_functions(src.substr(0, n), "f")) << n;
    EXPECT_NO_THROW(find_cpp_functions(src.substr(n), "f")) << n;
  }
}

}  // namespace
}  // namespace kjit
