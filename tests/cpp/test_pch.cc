// The stub precompiled header's stamp and the decision to use it. Each test writes
// its own PCH directory (a small stand-in .gch and a stamp of real headers), so the
// checks run whatever compiler this build used; tests/python/test_pch.py builds
// modules with the real PCH, and with damaged copies of it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kjit/build.h"
#include "test_dirs.h"
#include "toolchain/paths.h"
#include "toolchain/pch.h"

namespace kjit {
namespace pch_detail {
namespace {

namespace fs = std::filesystem;

/// A PCH directory whose stamp fits this process, and a request that would use it.
class PchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = kjit_test::fresh_test_dir("kjit-pch");
    fs::create_directories(dir_ / "kjit/detail");
    write(dir_ / kGchName, std::string(4096, 'g'));
    stamp_.identity = find_toolchain().identity;
    stamp_.flags = jit_host_cflags();
    stamp_.system_dirs = {"/usr/include"};
    ASSERT_TRUE(cache_detail::describe_dependency((dir_ / kGchName).string(), &stamp_.gch));
    stamp_.gch.path = kGchName;
    Header kernel;
    kernel.root = "kjit";
    ASSERT_TRUE(cache_detail::describe_dependency(system_paths().kjit_include + "/kjit/kernel.h", &kernel.dep));
    kernel.dep.path = "kjit/kernel.h";
    Header libc;
    libc.root = "/";
    ASSERT_TRUE(cache_detail::describe_dependency("/usr/include/stdio.h", &libc.dep));
    stamp_.headers = {kernel, libc};
    request_.name = "m";
    request_.source = std::string(kStubIncludesLine) + "int f() { return 1; }\n";
    request_.machine_cflags = jit_machine_cflags();
    setenv("KJIT_PCH_DIR", dir_.c_str(), 1);
    unsetenv("KJIT_PCH");
  }
  void TearDown() override {
    unsetenv("KJIT_PCH_DIR");
    unsetenv("KJIT_PCH");
    fs::remove_all(dir_);
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  /// Writes the stamp, then returns why a build of the request would not use the PCH.
  std::string why_not() {
    write(dir_ / kStampName, format_stamp(stamp_));
    std::string why;
    std::string dir = stub_pch_dir(request_, &why);
    EXPECT_EQ(dir.empty(), !why.empty()) << dir << " / " << why;
    return why;
  }
  fs::path dir_;
  Stamp stamp_;
  BuildRequest request_;
};

TEST_F(PchTest, StampRoundTripsAndRejectsEdits) {
  std::string text = format_stamp(stamp_);
  Stamp back;
  ASSERT_TRUE(parse_stamp(text, &back));
  EXPECT_EQ(format_stamp(back), text);
  EXPECT_EQ(back.headers.size(), 2u);
  EXPECT_EQ(back.headers[0].root, "kjit");
  std::string edited = text;
  edited.replace(edited.find("-O2"), 3, "-O3");
  EXPECT_FALSE(parse_stamp(edited, &back));
  EXPECT_FALSE(parse_stamp(text.substr(0, text.size() - 10), &back));
  EXPECT_FALSE(parse_stamp("", &back));
}

TEST_F(PchTest, AFittingStampIsUsedAndNamesTheHeadersItHolds) {
  EXPECT_EQ(why_not(), "");
  PchChoice c = choose_stub_pch(request_);
  EXPECT_EQ(c.dir, dir_.string());
  ASSERT_EQ(c.headers.size(), 1u);  // kjit's and tvm-ffi's, for the cache entry; not the system's
  EXPECT_EQ(c.headers[0], system_paths().kjit_include + "/kjit/kernel.h");
}

TEST_F(PchTest, OnlyModuleSourcesStartingWithTheStubIncludesAreConcerned) {
  request_.source = "int f() { return 1; }\n";
  write(dir_ / kStampName, format_stamp(stamp_));
  std::string why = "unset";
  EXPECT_EQ(stub_pch_dir(request_, &why), "");
  EXPECT_EQ(why, "");
}

TEST_F(PchTest, KjitPch0TurnsItOff) {
  setenv("KJIT_PCH", "0", 1);
  EXPECT_EQ(why_not(), "KJIT_PCH=0");
}

TEST_F(PchTest, ExtraCflagsTurnItOffUnlessTheyKeepItValid) {
  request_.extra_cflags = {"-Wall", "-g"};
  EXPECT_EQ(why_not(), "extra_cflags has '-g' (it is built for the default flags; warnings and -O2/-O3 keep it)");
  for (const char* flag : {"-O2", "-O3", "-Wall", "-Werror=shadow", "-w", "-pedantic", "-fmax-errors=3"}) {
    EXPECT_TRUE(pch_detail::leaves_pch_valid(flag)) << flag;
  }
  for (const char* flag : {"-g", "-O0", "-Os", "-Ofast", "-DX", "-Wp,-DX", "-Wl,-z,now", "-march=native", "-fPIE",
                           "-include", "-std=c++20"}) {
    EXPECT_FALSE(pch_detail::leaves_pch_valid(flag)) << flag;
  }
}

TEST_F(PchTest, AMissingOrDamagedStampTurnsItOff) {
  std::string stamp = (dir_ / kStampName).string();
  fs::remove(stamp);
  std::string why;
  EXPECT_EQ(stub_pch_dir(request_, &why), "");
  EXPECT_EQ(why, "no precompiled header in " + dir_.string() + " (" + stamp + " is missing)");
  write(stamp, format_stamp(stamp_) + "x");
  EXPECT_EQ(stub_pch_dir(request_, &why), "");
  EXPECT_EQ(why, "its stamp " + stamp + " is damaged");
}

TEST_F(PchTest, AnotherCompilerTurnsItOff) {
  stamp_.identity = "/usr/bin/clang++-14 | Debian clang version 14.0.6";
  EXPECT_EQ(why_not(), "it was built by /usr/bin/clang++-14 | Debian clang version 14.0.6, this build uses " +
                           find_toolchain().identity);
}

std::string joined(const std::vector<std::string>& flags) {
  std::string out;
  for (const std::string& f : flags) out += (out.empty() ? "" : " ") + f;
  return out;
}

TEST_F(PchTest, OtherFlagsTurnItOff) {
  stamp_.flags = {"-std=c++17", "-O0", "-fPIC", "-fvisibility=hidden"};
  EXPECT_EQ(why_not(), "it was built with flags '-std=c++17 -O0 -fPIC -fvisibility=hidden', this build's are '" +
                           joined(jit_host_cflags()) + "'");
}

TEST_F(PchTest, APortableBuildDoesNotTakeTheJitsHeader) {
  request_.machine_cflags.clear();  // kjit.build's: the defaults alone
  EXPECT_EQ(why_not(), "it was built with flags '" + joined(jit_host_cflags()) + "', this build's are '" +
                           joined(default_host_cflags()) + "'");
}

TEST_F(PchTest, AChangedHeaderTurnsItOff) {
  // Another size: changed. Same size, another time and contents: changed too.
  stamp_.headers[0].dep.size += 1;
  std::string kernel = system_paths().kjit_include + "/kjit/kernel.h";
  EXPECT_EQ(why_not(), kernel + " changed (size) since it was precompiled");
  stamp_.headers[0].dep.size -= 1;
  stamp_.headers[0].dep.mtime_ns -= 1;
  stamp_.headers[0].dep.hash = std::string(32, '0');
  EXPECT_EQ(why_not(), kernel + " changed since it was precompiled");
  stamp_.headers[1].dep.path = "/usr/include/kjit-no-such-header.h";
  stamp_.headers[0] = stamp_.headers[1];
  EXPECT_NE(why_not().find("/usr/include/kjit-no-such-header.h is gone ("), std::string::npos);
}

TEST_F(PchTest, ATruncatedOrAlteredGchTurnsItOff) {
  std::string gch = (dir_ / kGchName).string();
  write(gch, std::string(100, 'g'));
  EXPECT_EQ(why_not(), "the precompiled header " + gch + " has 100 bytes, its stamp says 4096");
  // Same size, the file's time put back: only the checksum can tell.
  write(gch, std::string(4095, 'g') + "h");
  struct timespec times[2] = {{0, UTIME_OMIT}, {stamp_.gch.mtime_ns / 1000000000, stamp_.gch.mtime_ns % 1000000000}};
  ASSERT_EQ(utimensat(AT_FDCWD, gch.c_str(), times, 0), 0);
  EXPECT_EQ(why_not(), "the precompiled header " + gch + " does not match the checksum in its stamp");
  fs::remove(gch);
  EXPECT_EQ(why_not(), "the precompiled header " + gch + " is missing");
}

TEST_F(PchTest, AnIncludePathHoldingASystemHeaderTurnsItOff) {
  fs::path inc = dir_ / "inc";
  fs::create_directories(inc);
  request_.include_paths = {inc.string()};
  EXPECT_EQ(why_not(), "");  // an include path without such a header keeps it
  write(inc / "stdio.h", "#include_next <stdio.h>\n");
  EXPECT_EQ(why_not(), "the include path " + inc.string() +
                           " has stdio.h, which would replace the system header /usr/include/stdio.h");
}

// clang does not take a .gch through #include: kjit_pch leaves no PCH (and removes
// an old one) rather than one GCC-built stubs could not use.
TEST_F(PchTest, KjitPchMakesNoneForClang) {
  if (build_detail::which("clang++").empty()) GTEST_SKIP() << "no clang++ on PATH";
  const char* old = std::getenv("CXX");
  std::string saved = old ? old : "";
  setenv("CXX", "clang++", 1);
  std::string what = build_stub_pch(dir_.string());
  old ? setenv("CXX", saved.c_str(), 1) : unsetenv("CXX");
  EXPECT_EQ(what.rfind("no precompiled stub headers: the JIT's compiler ", 0), 0u) << what;
  EXPECT_NE(what.find(" is not GCC (only GCC takes a .gch through #include)"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(dir_ / kGchName));
  EXPECT_FALSE(fs::exists(dir_ / kStampName));
}

}  // namespace
}  // namespace pch_detail
}  // namespace kjit
