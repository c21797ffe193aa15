// kjit's one error type, its name table, the FFI boundary and the named fields the
// kjit.* entries read.
#include <gtest/gtest.h>
#include <tvm/ffi/function.h>

#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ffi/boundary.h"
#include "ffi/fields.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

using tvm::ffi::Any;
using tvm::ffi::Array;
using tvm::ffi::String;

// Each error is a kjit::Error and still the standard exception it always was.
static_assert(std::is_base_of<Error, SpecError>::value && std::is_base_of<std::invalid_argument, SpecError>::value,
              "SpecError");
static_assert(std::is_base_of<std::logic_error, InternalError>::value, "InternalError");
static_assert(std::is_base_of<std::runtime_error, CompileError>::value, "CompileError");
static_assert(std::is_base_of<std::runtime_error, ToolchainError>::value, "ToolchainError");
static_assert(std::is_base_of<std::runtime_error, CacheError>::value, "CacheError");
static_assert(std::is_base_of<std::runtime_error, ValueError>::value, "ValueError");
static_assert(std::is_base_of<Error, NotImplementedError>::value, "NotImplementedError");

TEST(ErrorKinds, HaveDistinctNames) {
  std::set<std::string> names;
  for (ErrorKind kind : kAllErrorKinds) names.insert(error_kind_name(kind));
  EXPECT_EQ(names.size(), sizeof(kAllErrorKinds) / sizeof(kAllErrorKinds[0]));
  EXPECT_STREQ(error_kind_name(ErrorKind::kSpecError), "SpecError");
  EXPECT_STREQ(error_kind_name(ErrorKind::kInternalError), "InternalError");
}

TEST(ErrorKinds, EachErrorCarriesItsKind) {
  EXPECT_STREQ(SpecError("s").kind(), "SpecError");
  EXPECT_STREQ(ToolchainError("t").kind(), "ToolchainError");
  EXPECT_STREQ(CacheError("c").kind(), "CacheError");
  EXPECT_STREQ(InternalError("i").kind(), "InternalError");
  EXPECT_STREQ(CompileError("m", "cmd", "log").kind(), "CompileError");
  EXPECT_STREQ(IndexError("x").kind(), "IndexError");
  EXPECT_STREQ(AxisError("x").kind(), "AxisError");
  EXPECT_EQ(kernel_error_kind(AxisError("x")), ErrorKind::kAxisError);
  EXPECT_THROW(throw AxisError("x"), ValueError);  // C++ callers catching ValueError still do
  EXPECT_EQ(TypeError("x").error_kind(), ErrorKind::kTypeError);
}

TEST(ErrorKinds, CatchableAsStdExceptionWithTheMessage) {
  try {
    throw SpecError("bad spec");
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "bad spec");
  }
  try {
    throw InternalError("broken");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "broken");
  }
}

TEST(ErrorKinds, KernelExceptionsMapToBuiltins) {
  EXPECT_EQ(kernel_error_kind(std::invalid_argument("x")), ErrorKind::kValueError);
  EXPECT_EQ(kernel_error_kind(std::domain_error("x")), ErrorKind::kValueError);
  EXPECT_EQ(kernel_error_kind(std::out_of_range("x")), ErrorKind::kIndexError);
  EXPECT_EQ(kernel_error_kind(std::bad_alloc()), ErrorKind::kMemoryError);
  EXPECT_EQ(kernel_error_kind(std::logic_error("x")), ErrorKind::kRuntimeError);
  EXPECT_EQ(kernel_error_kind(std::runtime_error("x")), ErrorKind::kRuntimeError);
  EXPECT_EQ(kernel_error_kind(NotImplementedError("x")), ErrorKind::kNotImplementedError);
  EXPECT_EQ(kernel_error_kind(SpecError("x")), ErrorKind::kSpecError);  // its kind, not std::invalid_argument's
}

/// The FFI error at_ffi_boundary makes of what f throws.
template <typename F>
tvm::ffi::Error ffi_error_of(F f) {
  try {
    at_ffi_boundary([&] {
      f();
      return 0;
    });
  } catch (const tvm::ffi::Error& e) {
    return e;
  }
  ADD_FAILURE() << "nothing was thrown";
  return tvm::ffi::Error("none", "", "");
}

TEST(FfiBoundary, RaisesTheKindOfTheError) {
  tvm::ffi::Error e = ffi_error_of([] { throw SpecError("bad spec"); });
  EXPECT_EQ(e.kind(), "SpecError");
  EXPECT_EQ(e.message(), "bad spec");
  EXPECT_FALSE(e.extra_context().has_value());
  EXPECT_EQ(ffi_error_of([] { throw kjit::ValueError("v"); }).kind(), "ValueError");
}

TEST(FfiBoundary, CompileErrorCarriesCommandAndLog) {
  tvm::ffi::Error e = ffi_error_of([] { throw CompileError("it failed", "c++ -c x.cc", "x.cc:1: error"); });
  EXPECT_EQ(e.kind(), "CompileError");
  EXPECT_EQ(e.message(), "it failed");
  ASSERT_TRUE(e.extra_context().has_value());
  auto context = e.extra_context()->as<FieldMap>();
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(std::string(context->at("command").cast<String>()), "c++ -c x.cc");
  EXPECT_EQ(std::string(context->at("log").cast<String>()), "x.cc:1: error");
}

/// The message of the InternalError (or kjit TypeError) that f throws.
template <typename E, typename F>
std::string message_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(Fields, ReadByName) {
  Fields f("test options", FieldMap{{"name", String("m")}, {"flags", Array<String>{"-O2", "-g"}}, {"on", true}});
  EXPECT_EQ(f.required_text("name"), "m");
  EXPECT_EQ(f.texts("flags"), (std::vector<std::string>{"-O2", "-g"}));
  EXPECT_TRUE(f.flag("on"));
  EXPECT_FALSE(f.flag("off"));  // absent: the default
  EXPECT_EQ(f.text("dir", "fallback"), "fallback");
  EXPECT_FALSE(f.maybe<int64_t>("align").has_value());
  f.expect_all_read();
}

TEST(Fields, UnknownMissingAndMistypedFieldsAreInternalErrors) {
  EXPECT_EQ(message_of<InternalError>([] {
              Fields f("test options", FieldMap{{"name", String("m")}, {"nmae", String("m")}});
              f.required_text("name");
              f.expect_all_read();
            }),
            "kjit internal error: test options has an unknown field 'nmae'");
  EXPECT_EQ(message_of<InternalError>([] { Fields("test options", FieldMap{}).required_text("name"); }),
            "kjit internal error: test options has no field 'name'");
  EXPECT_EQ(message_of<InternalError>([] {
              Fields("test options", FieldMap{{"verbose", String("yes")}}).flag("verbose");
            }),
            "kjit internal error: test options field 'verbose' must be bool, got str");
}

TEST(Fields, MistypedUserValuesAreTypeErrors) {
  EXPECT_EQ(message_of<kjit::TypeError>([] {
              Fields("kjit.Spec", FieldMap{{"name", int64_t{3}}}, /*user_values=*/true).required_text("name");
            }),
            "kjit.Spec: 'name' must be str, got int");
}

}  // namespace
}  // namespace kjit
