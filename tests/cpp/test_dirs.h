// Scratch directories and files for the C++ tests that write them.
#ifndef KJIT_TESTS_CPP_TEST_DIRS_H_
#define KJIT_TESTS_CPP_TEST_DIRS_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace kjit_test {

/// `<gtest temp dir>/<prefix>-<pid>-<test name>`, emptied: unique per test and per
/// process, so tests that ctest runs side by side never share one.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      (prefix + "-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

/// A directory made for one scope (mkdtemp under the system's temp folder) and
/// removed with what it holds at the end of it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kjit-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Writes `bytes` to `p`, replacing it.
inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_TEST_DIRS_H_
