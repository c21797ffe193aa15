// probe_version: a compiler's --version runs once per installed binary. Each test
// builds a stand-in compiler that logs every run, and a private cache root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kjit/build.h"
#include "test_dirs.h"
#include "toolchain/version_probe.h"

namespace kjit {
namespace build_detail {
namespace {

namespace fs = std::filesystem;

/// Prints a version line and appends one line to the file in FAKE_CC_LOG per run;
/// exits 1 when FAKE_CC_FAIL is set.
constexpr const char* kFakeCompiler = R"(#include <cstdio>
#include <cstdlib>
int main() {
  if (const char* log = std::getenv("FAKE_CC_LOG")) {
    if (FILE* f = std::fopen(log, "a")) { std::fputs("run\n", f); std::fclose(f); }
  }
  std::puts("fakecc (kjit test) 1.0");
  return std::getenv("FAKE_CC_FAIL") ? 1 : 0;
}
)";

class VersionProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kjit_test::fresh_test_dir("kjit-probe");
    fs::create_directories(dir_);
    std::ofstream(dir_ / "fakecc.cc") << kFakeCompiler;
    compiler_ = (dir_ / "fakecc").string();
    ProcessResult built =
        run_process({find_toolchain().compiler[0], "-O0", "-o", compiler_, (dir_ / "fakecc.cc").string()});
    ASSERT_EQ(built.exit_code, 0) << built.output;
    log_ = (dir_ / "runs.log").string();
    setenv("FAKE_CC_LOG", log_.c_str(), 1);
    setenv("KJIT_CACHE_DIR", (dir_ / "cache").c_str(), 1);
    unsetenv("FAKE_CC_FAIL");
  }
  void TearDown() override {
    unsetenv("FAKE_CC_LOG");
    unsetenv("FAKE_CC_FAIL");
    unsetenv("KJIT_CACHE_DIR");
    fs::remove_all(dir_);
  }
  /// How many times the stand-in compiler has run.
  int runs() const {
    std::ifstream in(log_);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  ProcessResult probe() const { return probe_version({compiler_, "--version"}); }
  /// The record files under the cache root.
  std::vector<fs::path> records() const {
    std::vector<fs::path> out;
    if (!fs::exists(dir_ / "cache" / "toolchains")) return out;
    for (const auto& e : fs::directory_iterator(dir_ / "cache" / "toolchains")) out.push_back(e.path());
    return out;
  }

  fs::path dir_;
  std::string compiler_, log_;
};

TEST_F(VersionProbeTest, RunsOnceThenReadsTheRecord) {
  ProcessResult first = probe();
  ProcessResult second = probe();
  EXPECT_EQ(first.exit_code, 0);
  EXPECT_EQ(first.output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(second.exit_code, 0);
  EXPECT_EQ(second.output, first.output);
  EXPECT_EQ(runs(), 1);
  EXPECT_EQ(records().size(), 1u);
}

TEST_F(VersionProbeTest, AChangedBinaryRunsAgain) {
  probe();
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000000, 0}};  // a new mtime, as an upgrade leaves
  ASSERT_EQ(utimensat(AT_FDCWD, compiler_.c_str(), times, 0), 0);
  EXPECT_EQ(probe().output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(runs(), 2);
  probe();
  EXPECT_EQ(runs(), 2);
}

TEST_F(VersionProbeTest, ADamagedRecordRunsAgainAndIsReplaced) {
  probe();
  ASSERT_EQ(records().size(), 1u);
  const fs::path record = records()[0];
  std::string text;
  {
    std::ifstream in(record, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  text[text.size() - 3] ^= 0x20;  // a flipped bit in the recorded output
  std::ofstream(record, std::ios::binary | std::ios::trunc) << text;
  EXPECT_EQ(probe().output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(runs(), 2);
  probe();
  EXPECT_EQ(runs(), 2);  // the rewritten record is good again
}

TEST_F(VersionProbeTest, AFailedProbeIsNotRecorded) {
  setenv("FAKE_CC_FAIL", "1", 1);
  EXPECT_EQ(probe().exit_code, 1);
  EXPECT_EQ(probe().exit_code, 1);
  EXPECT_EQ(runs(), 2);
  EXPECT_TRUE(records().empty());
}

TEST_F(VersionProbeTest, WrappersRunEveryTime) {
  const std::string script = (dir_ / "wrapper").string();
  std::ofstream(script) << "#!/bin/sh\nexec " << compiler_ << " \"$@\"\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  EXPECT_TRUE(is_compiler_wrapper(script));
  EXPECT_TRUE(is_compiler_wrapper("/opt/none/bin/ccache"));  // by its name, even where it does not exist
  EXPECT_FALSE(is_compiler_wrapper(compiler_));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(probe_version({script, "--version"}).output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(runs(), 2);
  EXPECT_TRUE(records().empty());
}

TEST_F(VersionProbeTest, AnUnusableCacheRootStillProbes) {
  std::ofstream(dir_ / "not-a-dir") << "x";
  setenv("KJIT_CACHE_DIR", (dir_ / "not-a-dir").c_str(), 1);
  EXPECT_EQ(probe().output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(probe().output, "fakecc (kjit test) 1.0\n");
  EXPECT_EQ(runs(), 2);
}

}  // namespace
}  // namespace build_detail
}  // namespace kjit
