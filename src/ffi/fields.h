// The named fields of a Map that a kjit.* global function takes from Python (options, a
// declaration, a builder's parameter). kjit's Python package builds these Maps, so
// a missing or unknown field is a bug of kjit: InternalError naming the Map and the
// field. So is a mistyped one, unless the Map passes a user's values through
// unchecked (kjit.Spec's): then it is the user's TypeError.
#ifndef KJIT_SRC_FFI_FIELDS_H_
#define KJIT_SRC_FFI_FIELDS_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/string.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kjit/errors.h"

namespace kjit {

using FieldMap = tvm::ffi::Map<tvm::ffi::String, tvm::ffi::Any>;

class Fields {
 public:
  /// `where` names the Map in messages ("kjit.load_inline options").
  Fields(std::string where, FieldMap map, bool user_values = false)
      : where_(std::move(where)), map_(std::move(map)), user_values_(user_values) {}

  /// Field `name` as a T, or `fallback` when the Map does not have it.
  template <typename T>
  T get(const char* name, T fallback) {
    std::optional<T> value = maybe<T>(name);
    return value ? *std::move(value) : std::move(fallback);
  }
  /// Field `name` as a T, or nullopt when the Map does not have it.
  template <typename T>
  std::optional<T> maybe(const char* name) {
    std::optional<tvm::ffi::Any> value = take(name);
    if (!value) return std::nullopt;
    return cast<T>(name, *value);
  }
  /// Field `name` as a T; the Map must have it.
  template <typename T>
  T require(const char* name) {
    std::optional<tvm::ffi::Any> value = take(name);
    if (!value) fail(std::string("has no field '") + name + "'");
    return cast<T>(name, *value);
  }
  std::string text(const char* name, const std::string& fallback = "") {
    return std::string(get<tvm::ffi::String>(name, tvm::ffi::String(fallback)));
  }
  std::string required_text(const char* name) { return std::string(require<tvm::ffi::String>(name)); }
  /// A list of str; empty when absent.
  std::vector<std::string> texts(const char* name) {
    std::vector<std::string> out;
    for (const tvm::ffi::String& s : get<tvm::ffi::Array<tvm::ffi::String>>(name, {})) out.emplace_back(s);
    return out;
  }
  bool flag(const char* name) { return get<bool>(name, false); }
  /// Throws unless every field of the Map was read: one it has no use for is a
  /// misspelt or stale name.
  void expect_all_read() const {
    for (const auto& kv : map_) {
      if (std::find(read_.begin(), read_.end(), std::string(kv.first)) == read_.end()) {
        fail("has an unknown field '" + std::string(kv.first) + "'");
      }
    }
  }

 private:
  std::optional<tvm::ffi::Any> take(const char* name) {
    read_.emplace_back(name);
    return map_.Get(name);
  }
  template <typename T>
  T cast(const char* name, const tvm::ffi::Any& value) const {
    std::optional<T> out = value.try_cast<T>();
    if (!out) {
      std::string what =
          std::string("'") + name + "' must be " + tvm::ffi::TypeTraits<T>::TypeStr() + ", got " + type_name(value);
      if (user_values_) throw TypeError(where_ + ": " + what);
      fail("field " + what);
    }
    return *std::move(out);
  }
  /// The Python name of a value's type where there is one (tvm-ffi calls a short
  /// str "ffi.SmallStr").
  static std::string type_name(const tvm::ffi::Any& value) {
    switch (value.type_index()) {
      case tvm::ffi::TypeIndex::kTVMFFINone:
        return "None";
      case tvm::ffi::TypeIndex::kTVMFFIBool:
        return "bool";
      case tvm::ffi::TypeIndex::kTVMFFIInt:
        return "int";
      case tvm::ffi::TypeIndex::kTVMFFIFloat:
        return "float";
      case tvm::ffi::TypeIndex::kTVMFFISmallStr:
      case tvm::ffi::TypeIndex::kTVMFFIStr:
        return "str";
      case tvm::ffi::TypeIndex::kTVMFFISmallBytes:
      case tvm::ffi::TypeIndex::kTVMFFIBytes:
        return "bytes";
      default:
        return value.GetTypeKey();
    }
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw InternalError("kjit internal error: " + where_ + " " + what);
  }

  std::string where_;
  FieldMap map_;
  bool user_values_;
  std::vector<std::string> read_;
};

}  // namespace kjit

#endif  // KJIT_SRC_FFI_FIELDS_H_
