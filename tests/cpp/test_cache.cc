// The cache's file-system layer (src/toolchain/cache_files) and the NVRTC image
// cache's integrity. The end-to-end damage, ownership and header-change cases are in
// tests/python/test_cache.py, where each crash-prone load runs in a subprocess.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "cuda/cuda_cache.h"
#include "kjit/build.h"
#include "kjit/errors.h"
#include "test_dirs.h"
#include "toolchain/cache_files.h"
#include "toolchain/cache_key.h"
#include "toolchain/library_exports.h"

namespace kjit {
namespace cache_detail {
namespace {

/// A fresh directory under the test temp dir, removed afterwards.
class CacheFilesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = kjit_test::fresh_test_dir("kjit-cache-files"); }
  void TearDown() override { fs::remove_all(dir_); }
  static mode_t mode_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  fs::path dir_;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CacheError& e) {
    return e.what();
  }
  return "(no CacheError)";
}

TEST(FileStem, ShortIdentifiersStayAndOthersGetAHash) {
  EXPECT_EQ(file_stem("add_one"), "add_one");
  std::string long_name(240, 'a');
  std::string stem = file_stem(long_name);
  EXPECT_LE(stem.size(), 64u);
  EXPECT_EQ(stem.substr(0, 40), std::string(40, 'a'));
  EXPECT_NE(stem, file_stem(long_name + "b"));
  EXPECT_EQ(file_stem("a/../b\xc3\xa9").find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos);
  EXPECT_NE(file_stem(""), "");
}

TEST(MakeDependencies, ParsesEscapesAndContinuations) {
  std::string text = "out.so: src.cc /inc/a.h \\\n  /inc/with\\ space.h rel/b.h /inc/dollar$$.h\n/inc/a.h:\n";
  std::vector<std::string> want{"src.cc", "/inc/a.h", "/inc/with space.h", "rel/b.h", "/inc/dollar$.h"};
  EXPECT_EQ(parse_make_dependencies(text), want);
  EXPECT_TRUE(parse_make_dependencies("").empty());
}

TEST(Manifest, RoundTripsAndRejectsAnyEdit) {
  Manifest m;
  m.library_size = 1234;
  m.library_hash = hash_hex("library");
  m.dependencies.push_back({"/inc/with space.h", 10, 1700000000123456789, hash_hex("header")});
  std::string text = format_manifest(m);
  Manifest back;
  ASSERT_TRUE(parse_manifest(text, &back));
  EXPECT_EQ(back.library_size, 1234u);
  EXPECT_EQ(back.library_hash, m.library_hash);
  ASSERT_EQ(back.dependencies.size(), 1u);
  EXPECT_EQ(back.dependencies[0].path, "/inc/with space.h");
  EXPECT_EQ(back.dependencies[0].mtime_ns, 1700000000123456789);
  for (size_t i = 0; i < text.size(); ++i) {  // every single-byte edit is caught
    std::string edited = text;
    edited[i] = static_cast<char>(edited[i] ^ 0x01);
    EXPECT_FALSE(parse_manifest(edited, &back)) << "byte " << i;
  }
  EXPECT_FALSE(parse_manifest(text.substr(0, text.size() / 2), &back));
  EXPECT_FALSE(parse_manifest("", &back));
}

TEST(Seal, DetectsFlippedTruncatedAndExtendedImages) {
  std::string image(4096, '\x7f');
  image[100] = 'x';
  std::string sealed = seal(image), out;
  ASSERT_TRUE(unseal(sealed, &out));
  EXPECT_EQ(out, image);
  std::string flipped = sealed;
  flipped[sealed.size() - 7] ^= 0x10;
  EXPECT_FALSE(unseal(flipped, &out));
  EXPECT_FALSE(unseal(sealed.substr(0, sealed.size() / 2), &out));
  EXPECT_FALSE(unseal(sealed + "tail", &out));
  EXPECT_FALSE(unseal(image, &out));  // an unsealed (older) file
}

TEST_F(CacheFilesTest, RootIsCreatedPrivate) {
  fs::path root = dir_ / "a" / "cache";
  EXPECT_EQ(private_cache_root(root), root);
  EXPECT_EQ(mode_of(root), 0700u);
  ensure_private_dir(root / "locks", "lock directory");
  EXPECT_EQ(mode_of(root / "locks"), 0700u);
  write_private_file(root / "f", "x");
  EXPECT_EQ(mode_of(root / "f"), 0600u);
}

TEST_F(CacheFilesTest, RootWritableByOthersIsRefusedUnlessSticky) {
  fs::create_directories(dir_);
  chmod(dir_.c_str(), 0777);
  EXPECT_EQ(message_of([&] { private_cache_root(dir_); }),
            "kjit: refusing the cache directory " + dir_.string() +
                ": it is writable by others (mode 0777) without the sticky bit, so another user could replace "
                "cached modules. Run 'chmod go-w " +
                dir_.string() + "' (or 'chmod +t' for a shared directory), or set KJIT_CACHE_DIR to a private one");
  chmod(dir_.c_str(), 01777);
  fs::path mine = private_cache_root(dir_);
  EXPECT_EQ(mine, dir_ / ("kjit-" + std::to_string(geteuid())));
  EXPECT_EQ(mode_of(mine), 0700u);
  chmod(mine.c_str(), 0777);  // our own subdirectory, opened up: refused too
  EXPECT_NE(message_of([&] { private_cache_root(dir_); }).find("it is writable by others (mode 0777"),
            std::string::npos);
}

TEST_F(CacheFilesTest, SymlinksAreNeverFollowed) {
  fs::create_directories(dir_);
  write(dir_ / "real", "data");
  fs::create_symlink(dir_ / "real", dir_ / "link");
  std::string out;
  EXPECT_EQ(message_of([&] { read_owned_file(dir_ / "link", &out); }),
            "kjit: cache file " + (dir_ / "link").string() + " is a symbolic link; refusing it");
  fs::create_directory_symlink(dir_, dir_ / "dirlink");
  EXPECT_NE(message_of([&] { ensure_private_dir(dir_ / "dirlink", "lock directory"); }).find("is not a directory"),
            std::string::npos);
}

TEST_F(CacheFilesTest, MissingFileIsNotAnError) {
  fs::create_directories(dir_);
  std::string out;
  uint64_t size = 0;
  EXPECT_FALSE(read_owned_file(dir_ / "none", &out));
  EXPECT_FALSE(hash_owned_file(dir_ / "none", &size, &out));
}

TEST_F(CacheFilesTest, ChangedDependencyIsFoundBySizeOrContents) {
  fs::create_directories(dir_);
  fs::path h = dir_ / "h.h";
  write(h, "#define V 1\n");
  Dependency d;
  ASSERT_TRUE(describe_dependency(h.string(), &d));
  EXPECT_EQ(changed_dependency({d}), "");
  fs::last_write_time(h, fs::last_write_time(h) + std::chrono::seconds(5));  // touched only
  EXPECT_EQ(changed_dependency({d}), "");
  write(h, "#define V 2\n");
  fs::last_write_time(h, fs::last_write_time(h) + std::chrono::seconds(10));
  EXPECT_EQ(changed_dependency({d}), h.string() + " changed");
  write(h, "#define V 22\n");
  EXPECT_EQ(changed_dependency({d}), h.string() + " changed (size)");
  fs::remove(h);
  EXPECT_EQ(changed_dependency({d}), h.string() + " is gone (No such file or directory)");
}

TEST_F(CacheFilesTest, StaleBuildDirectoriesGoOnlyWhenKjitMadeThemAndTheirLockIsFree) {
  fs::create_directories(dir_ / "locks");
  const std::string key(32, 'a');
  fs::path held = dir_ / (".tmp-held-" + key + "-XyZ123");
  fs::path free_dir = dir_ / (".tmp-free-" + key + "-AbC456");
  fs::path free_old = dir_ / (".tmp-free-" + key + "-AbC456.old");
  fs::path lookalike = dir_ / (".tmp-photos-" + key + "-Qw1234");    // named like one, no marker: the user's
  fs::path wrong_marker = dir_ / (".tmp-other-" + key + "-Zx9876");  // a marker copied from another build
  fs::path legacy = dir_ / ".tmp-legacy-Qw1234";
  fs::path entry = dir_ / ("mod-" + key);
  for (const fs::path& p : {held, free_dir, free_old, lookalike, wrong_marker, legacy, entry}) {
    fs::create_directories(p / "sub");
  }
  for (const std::string e : {"held", "free"})
    write_private_file(dir_ / (".tmp-" + e + "-" + key + "-" + (e == "held" ? "XyZ123" : "AbC456")) / kBuildMarker,
                       build_marker_text(e + "-" + key));
  write_private_file(free_old / kBuildMarker, build_marker_text("free-" + key));
  write_private_file(wrong_marker / kBuildMarker, build_marker_text("free-" + key));
  write_private_file(entry / kBuildMarker, build_marker_text("mod-" + key));
  const std::string legacy_age = "touch -d '3 days ago' " + legacy.string() + " " + lookalike.string();
  ASSERT_EQ(std::system(legacy_age.c_str()), 0);
  int fd = open((dir_ / "locks" / ("held-" + key + ".lock")).c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  EXPECT_EQ(remove_stale_builds(dir_), 2);
  EXPECT_TRUE(fs::exists(held));
  EXPECT_FALSE(fs::exists(free_dir));
  EXPECT_FALSE(fs::exists(free_old));
  EXPECT_TRUE(fs::exists(lookalike / "sub"));     // kjit did not make it: never touched, however old
  EXPECT_TRUE(fs::exists(wrong_marker / "sub"));  // its marker names another entry
  EXPECT_TRUE(fs::exists(legacy / "sub"));
  EXPECT_TRUE(fs::exists(entry));  // published entries are never touched
  close(fd);
  EXPECT_EQ(remove_stale_builds(dir_), 1);
  EXPECT_FALSE(fs::exists(held));
}

TEST(Stamp, MarksKjitsFilesAndCatchesAnyEdit) {
  const std::string text = "kjit-lock m-" + std::string(32, 'a') + "\n";
  const std::string stamped = stamp(text);
  EXPECT_EQ(stamped.rfind(text + "// kjit-stamp ", 0), 0u);
  EXPECT_EQ(stamped, lock_file_text("m-" + std::string(32, 'a')));
  std::string back;
  ASSERT_TRUE(unstamp(stamped, &back));
  EXPECT_EQ(back, text);
  for (size_t i = 0; i < stamped.size(); ++i) {
    std::string edited = stamped;
    edited[i] = static_cast<char>(edited[i] ^ 0x01);
    EXPECT_FALSE(unstamp(edited, &back)) << "byte " << i;
  }
  EXPECT_FALSE(unstamp(stamped.substr(0, stamped.size() - 1), &back));
  EXPECT_FALSE(unstamp("", &back));
  EXPECT_FALSE(unstamp(text, &back));
  EXPECT_EQ(stamp("no newline"), stamp("no newline\n"));  // a C++ source without one stays a C++ source
}

TEST_F(CacheFilesTest, OnlyOwnSmallRegularFilesAreReadForTheChecks) {
  fs::create_directories(dir_);
  write(dir_ / "small", "abc");
  std::string out;
  EXPECT_TRUE(read_own_small_file(dir_ / "small", 3, &out));
  EXPECT_EQ(out, "abc");
  EXPECT_FALSE(read_own_small_file(dir_ / "small", 2, &out));  // longer than asked: never kjit's
  EXPECT_FALSE(read_own_small_file(dir_ / "missing", 10, &out));
  fs::create_symlink(dir_ / "small", dir_ / "link");
  EXPECT_FALSE(read_own_small_file(dir_ / "link", 10, &out));
  EXPECT_FALSE(read_own_small_file(dir_, 10, &out));
  chmod((dir_ / "small").c_str(), 0666);
  EXPECT_FALSE(read_own_small_file(dir_ / "small", 10, &out));  // writable by others: no check can trust it
}

TEST_F(CacheFilesTest, PublishFileIsAtomicAndPrivate) {
  fs::create_directories(dir_);
  publish_file(dir_ / "image", "bytes");
  std::string out;
  ASSERT_TRUE(read_owned_file(dir_ / "image", &out));
  EXPECT_EQ(out, "bytes");
  EXPECT_EQ(mode_of(dir_ / "image"), 0600u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporary left
}

TEST(KeyParts, HashToTheKeyAndNameWhatChanged) {
  BuildRequest r;
  r.name = "m";
  r.source = "int f() { return 1; }";
  const std::string key = build_key(r);
  const std::string before = format_key_parts(key_parts(r));
  EXPECT_EQ(changed_key_parts(before, before), std::vector<std::string>{});
  BuildRequest edited = r;
  edited.source += "\n";
  edited.extra_cflags = {"-O3"};
  EXPECT_NE(build_key(edited), key);
  EXPECT_EQ(changed_key_parts(before, format_key_parts(key_parts(edited))),
            (std::vector<std::string>{"extra_cflags", "source"}));
  // A field moved between lists changes the key: the lists are counted.
  BuildRequest moved = r;
  moved.include_paths = {"/x"};
  BuildRequest moved2 = r;
  moved2.extra_ldflags = {"/x"};
  EXPECT_NE(build_key(moved), build_key(moved2));
  // Parts only one side has are named too.
  BuildRequest relocatable = r;
  relocatable.relocatable = true;
  EXPECT_EQ(changed_key_parts(format_key_parts(key_parts(relocatable)), before),
            std::vector<std::string>{"relocatable option"});
  // Damaged or foreign text compares as parts missing, never as a crash.
  EXPECT_EQ(changed_key_parts("garbage\n\t\t\n", "a\tb\n"), (std::vector<std::string>{"a", ""}));
}

TEST_F(CacheFilesTest, ACacheMissNamesTheNewestEarlierBuildAndWhatChanged) {
  BuildRequest r;
  r.name = "m";
  r.source = "a";
  const std::string now = format_key_parts(key_parts(r));
  EXPECT_EQ(describe_cache_miss(dir_, "m", "m-" + std::string(32, '0'), now),
            "cache miss: no earlier build of this name in " + dir_.string());
  const fs::path old = dir_ / ("m-" + std::string(32, '1'));
  fs::create_directories(old);
  BuildRequest before = r;
  before.source = "b";
  write_private_file(old / "key", format_key_parts(key_parts(before)));
  // Entries of other names, and look-alikes, are not compared.
  fs::create_directories(dir_ / ("mm-" + std::string(32, '2')));
  write_private_file(dir_ / ("mm-" + std::string(32, '2')) / "key", "");
  const std::string text = describe_cache_miss(dir_, "m", "m-" + std::string(32, '0'), now);
  EXPECT_EQ(text.rfind("cache miss: the source changed since the build of ", 0), 0u) << text;
  EXPECT_NE(text.find(" s ago (" + old.string() + ")"), std::string::npos) << text;
}

}  // namespace
}  // namespace cache_detail
}  // namespace kjit

// A damaged NVRTC image is recompiled and republished, never handed to the driver.
TEST(ElementwiseCudaDiskCache, DamagedImageIsRecompiled) {
  namespace fs = std::filesystem;
  std::string dir = ::testing::TempDir() + "kjit-ew-cuda-damage-" + std::to_string(::getpid());
  kjit::EwKernelTypes types;
  types.outputs = {kjit::EwType::kFloat32};
  types.inputs = {kjit::EwType::kFloat32, kjit::EwType::kFloat32};
  types.compute = kjit::EwType::kFloat32;
  const std::string code = "template <typename T> T add(T a, T b) { return a + b; }";
  auto compile = [&](bool* hit) {
    return kjit::cuda::cached_elementwise_cuda(code, "add", types, kjit::EwCudaVariant::kStrided, "sm_80", {}, dir,
                                               hit);
  };
  bool hit = true;
  kjit::cuda::NvrtcResult first;
  try {
    first = compile(&hit);
  } catch (const kjit::ToolchainError& e) {
    GTEST_SKIP() << "NVRTC does not load here: " << e.what();
  }
  ASSERT_FALSE(hit);
  fs::path image;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "cuda-kernels")) image = e.path();
  {
    std::fstream f(image, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(image) / 2);
    f.seekg(middle);
    char byte = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(middle);
    f.put(byte);
  }
  testing::internal::CaptureStderr();
  kjit::cuda::NvrtcResult again = compile(&hit);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(hit);
  EXPECT_EQ(again.binary, first.binary);
  EXPECT_EQ(err, "[kjit] cached NVRTC image " + image.string() + " is damaged (checksum mismatch); recompiling it\n");
  compile(&hit);
  EXPECT_TRUE(hit);
  fs::permissions(image, fs::perms::others_write, fs::perm_options::add);
  EXPECT_THROW(compile(&hit), kjit::CacheError);
  fs::remove_all(dir);
}

// Object builds (BuildRequest::objects): cached as entries of their own, checked
// like libraries, linked into the builds that name them, and part of their keys.
TEST(ObjectBuilds, AreCachedCheckedAndLinkedIntoLibraries) {
  namespace fs = std::filesystem;
  const fs::path dir = kjit_test::fresh_test_dir("kjit-object-builds");
  kjit::BuildRequest helper;
  helper.name = "k_helper";
  helper.source = "extern \"C\" __attribute__((visibility(\"hidden\"))) int k_helper_value() { return 41; }\n";
  helper.object_only = true;
  kjit::BuildRequest lib;
  lib.name = "k_lib";
  lib.source =
      "extern \"C\" int k_helper_value();\n"
      "extern \"C\" __attribute__((visibility(\"default\"))) int k_lib_value() { return k_helper_value() + 1; }\n";
  lib.cache_dir = dir.string();
  lib.objects = {helper};
  auto value_of = [](const kjit::BuildResult& built) {
    void* handle = dlopen(built.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    auto fn = reinterpret_cast<int (*)()>(dlsym(handle, "k_lib_value"));
    EXPECT_NE(fn, nullptr);
    return fn();
  };
  EXPECT_EQ(value_of(kjit::build_shared_library(lib)), 42);
  // The object went into the library's cache, as an entry of its own.
  helper.cache_dir = dir.string();
  const kjit::BuildResult object = kjit::build_shared_library(helper);
  EXPECT_TRUE(object.cache_hit);
  EXPECT_EQ(fs::path(object.library_path).extension(), ".o");
  // The library's key covers the object's.
  kjit::BuildRequest edited = lib;
  edited.objects[0].source += "// another helper\n";
  EXPECT_NE(kjit::build_key(edited), kjit::build_key(lib));
  // A damaged object is rebuilt before the next build links it, never linked as it is.
  {
    std::fstream f(object.library_path, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(object.library_path) / 2);
    f.seekg(middle);
    char byte = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(middle);
    f.put(byte);
  }
  kjit::BuildRequest next = lib;
  next.name = "k_lib2";
  testing::internal::CaptureStderr();
  const kjit::BuildResult rebuilt = kjit::build_shared_library(next);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[kjit] cached module 'k_helper' at "), std::string::npos) << err;
  EXPECT_NE(err.find("is damaged (its library does not match the checksum recorded when it was built)"),
            std::string::npos)
      << err;
  EXPECT_EQ(value_of(rebuilt), 42);
  // Only object builds may be linked in.
  kjit::BuildRequest wrong = next;
  wrong.name = "k_lib3";
  wrong.objects[0].object_only = false;
  EXPECT_THROW(kjit::build_shared_library(wrong), kjit::InternalError);
  fs::remove_all(dir);
}

// A library must export what its request names before it is cached: one that does
// not (a hidden symbol, or flags that made something other than a library) fails
// the build and leaves no entry behind.
TEST(LibraryExports, AreCheckedBeforePublishing) {
  namespace fs = std::filesystem;
  const fs::path dir = kjit_test::fresh_test_dir("kjit-library-exports");
  kjit::BuildRequest lib;
  lib.name = "k_exports";
  lib.source =
      "extern \"C\" __attribute__((visibility(\"default\"))) int k_shown() { return 1; }\n"
      "extern \"C\" __attribute__((visibility(\"hidden\"))) int k_hidden() { return 2; }\n"
      "static int k_local() { return 3; }\n"
      "extern \"C\" __attribute__((visibility(\"default\"))) int k_uses() { return k_local() + k_hidden(); }\n";
  lib.cache_dir = dir.string();
  lib.exports = {"k_shown", "k_uses"};
  const kjit::BuildResult built = kjit::build_shared_library(lib);
  EXPECT_EQ(
      kjit::build_detail::missing_exports(built.library_path, {"k_shown", "k_hidden", "k_local", "k_uses", "malloc"}),
      (std::vector<std::string>{"k_hidden", "k_local", "malloc"}));

  kjit::BuildRequest hiding = lib;
  hiding.name = "k_exports_hidden";
  hiding.exports = {"k_shown", "k_hidden"};
  try {
    kjit::build_shared_library(hiding);
    ADD_FAILURE() << "a library without k_hidden was built";
  } catch (const kjit::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("the library built for module 'k_exports_hidden' does not export k_hidden "),
              std::string::npos)
        << e.what();
  }
  kjit::BuildRequest preprocessed = lib;
  preprocessed.name = "k_exports_e";
  preprocessed.extra_cflags = {"-E"};
  try {
    kjit::build_shared_library(preprocessed);
    ADD_FAILURE() << "preprocessed text was published as a library";
  } catch (const kjit::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("does not export k_shown, k_uses ("), std::string::npos) << e.what();
  }
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().parent_path().filename() == "locks") continue;  // a lock outlives its build
    if (e.path().parent_path().filename() == "failed") {         // the failed builds' sources, kept to read
      EXPECT_EQ(e.path().extension(), ".cc") << "not a kept source: " << e.path();
      continue;
    }
    EXPECT_EQ(e.path().string().find("k_exports_"), std::string::npos) << "published or left behind: " << e.path();
  }
  fs::remove_all(dir);
}

// Every truncation and many flipped bytes of a real library: read without a crash
// (the sanitizer suite runs this), and a truncated library defines nothing.
TEST(LibraryExports, DamagedLibrariesAreReadSafely) {
  namespace fs = std::filesystem;
  const fs::path dir = kjit_test::fresh_test_dir("kjit-library-exports-damaged");
  kjit::BuildRequest lib;
  lib.name = "k_damaged";
  lib.source = "extern \"C\" __attribute__((visibility(\"default\"))) int k_value() { return 1; }\n";
  lib.cache_dir = dir.string();
  std::ifstream in(kjit::build_shared_library(lib).library_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path copy = dir / "copy.so";
  auto write = [&](const std::string& b) { std::ofstream(copy, std::ios::binary | std::ios::trunc) << b; };
  for (size_t size : {size_t{0}, size_t{4}, size_t{63}, size_t{64}, bytes.size() / 2, bytes.size() - 1}) {
    write(bytes.substr(0, size));
    EXPECT_EQ(kjit::build_detail::missing_exports(copy.string(), {"k_value"}).size(), 1u) << "truncated to " << size;
    EXPECT_NE(kjit::build_detail::library_file_problem(copy.string()), "") << "truncated to " << size;
  }
  write(bytes);
  EXPECT_EQ(kjit::build_detail::library_file_problem(copy.string()), "");
  // Offsets near 2^64 in the headers: no overflow into "inside the file".
  std::string hostile = bytes;
  const uint64_t far = ~uint64_t{0} - 8;
  std::memcpy(&hostile[0x20], &far, sizeof(far));  // e_phoff
  write(hostile);
  EXPECT_EQ(kjit::build_detail::library_file_problem(copy.string()),
            "its program headers need bytes [" + std::to_string(far) + ", past 2^64) but the file has " +
                std::to_string(bytes.size()) + " bytes: it is truncated (an interrupted download or copy?)");
  hostile = bytes;
  hostile[0] = 'X';
  write(hostile);
  EXPECT_EQ(kjit::build_detail::library_file_problem(copy.string()), "it does not start with the ELF magic (\\x7fELF)");
  uint32_t state = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string flipped = bytes;
    for (int k = 0; k < 4; ++k) {
      state = state * 1103515245u + 12345u;
      const size_t at = (state >> 8) % std::min<size_t>(flipped.size(), i % 2 ? flipped.size() : 4096);
      flipped[at] = static_cast<char>(flipped[at] ^ static_cast<char>(1u << (state % 8)));
    }
    write(flipped);
    (void)kjit::build_detail::missing_exports(copy.string(), {"k_value"});
    (void)kjit::build_detail::library_file_problem(copy.string());
  }
  EXPECT_EQ(kjit::build_detail::missing_exports((dir / "absent.so").string(), {"k_value"}).size(), 1u);
  fs::remove_all(dir);
}

// host_isa_cflags: x86-64-v3 flags only on a CPU that has them, AVX-512 (v4) ones
// on top where it has those, always with contraction off (a fused multiply-add
// would change results against NumPy).
bool has_flag(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

TEST(HostIsa, FlagsFollowTheCpu) {
  const std::vector<std::string>& flags = kjit::host_isa_cflags();
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512cd");
#else
  const bool v3 = false, v4 = false;
#endif
  if (!v3) {
    EXPECT_TRUE(flags.empty());
    return;
  }
  ASSERT_FALSE(flags.empty());
  EXPECT_EQ(flags.front(), "-mavx2");
  EXPECT_EQ(flags.back(), "-ffp-contract=off");
  EXPECT_EQ(has_flag(flags, "-mavx512f"), v4);
  EXPECT_EQ(has_flag(flags, "-mavx512vl"), v4);
}

TEST(HostIsa, LevelCappedOnRequest) {
  setenv("KJIT_HOST_ISA", "x86-64-v3", 1);  // read once, at the first call (each test is its own process)
  const std::vector<std::string>& flags = kjit::host_isa_cflags();
  EXPECT_FALSE(has_flag(flags, "-mavx512f"));
  if (!flags.empty()) {
    EXPECT_EQ(flags.front(), "-mavx2");
  }
}

TEST(HostIsa, UnknownLevelIsAToolchainError) {
  setenv("KJIT_HOST_ISA", "avx512", 1);
  try {
    kjit::host_isa_cflags();
    FAIL() << "no error";
  } catch (const kjit::ToolchainError& e) {
    EXPECT_STREQ(e.what(),
                 "KJIT_HOST_ISA='avx512': expected baseline, x86-64-v3 or x86-64-v4 (the highest level kjit "
                 "compiles elementwise loops for), or unset for this CPU's own level");
  }
}

TEST(HostIsa, BaselineOnRequest) {
  setenv("KJIT_HOST_ISA", "baseline", 1);  // read once, at the first call (each test is its own process)
  EXPECT_TRUE(kjit::host_isa_cflags().empty());
}
