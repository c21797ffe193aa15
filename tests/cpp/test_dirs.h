// A scratch directory per test, for the C++ tests that write files.
#ifndef KJIT_TESTS_CPP_TEST_DIRS_H_
#define KJIT_TESTS_CPP_TEST_DIRS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
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

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_TEST_DIRS_H_
