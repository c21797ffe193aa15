"""A C++ program built with ``python -m kjit.config``'s flags: it loads a library
``kjit.build`` made (kjit::load_module) and calls its checked function, and runs
kjit/iterator.h's cpu_kernel and parallel_for on kjit's pool, linked to libkjit;
and libkjit finds the tvm-ffi installed beside it by its own RUNPATH, wherever the
environment is."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import kjit

PARSE_ONLY = r"""
#include <kjit/spec.h>

#include <cstdio>

int main() {
  kjit::FunctionSpec spec = kjit::parse_signature("quad", "x: float32[n],y: float32[n] out;n % 4 == 0");
  std::printf("%s\n", kjit::to_string(spec).c_str());
  return 0;
}
"""

PROGRAM = r"""
#include <kjit/iterator.h>
#include <kjit/runtime.h>

#include <atomic>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  kjit::Module m = kjit::load_module(argv[1]);
  const int64_t sum = m.function("add_ints")(int64_t{2}, int64_t{40}).cast<int64_t>();
  try {
    m.function("nope");
  } catch (const kjit::SpecError& e) {
    std::printf("error: %s\n", e.what());
  }
  std::vector<float> a(1 << 20, 1.5f), c(a.size());
  int64_t shape = static_cast<int64_t>(a.size());
  DLTensor ta{a.data(), {kDLCPU, 0}, 1, kjit::dtype_of<float>(), &shape, nullptr, 0};
  DLTensor tc{c.data(), {kDLCPU, 0}, 1, kjit::dtype_of<float>(), &shape, nullptr, 0};
  auto iter = kjit::TensorIteratorConfig().add_output(kjit::TensorView(&tc)).add_input(kjit::TensorView(&ta)).build();
  kjit::cpu_kernel(iter, [](float x) { return x * 2; });
  std::atomic<int> chunks{0};
  kjit::parallel_for(0, 1 << 20, 1024, [&](int64_t, int64_t) { ++chunks; });
  std::printf("%s %lld %g %d\n", m.name().c_str(), static_cast<long long>(sum), c[12345], chunks.load() > 1 ? 1 : 0);
  return 0;
}
"""


def test_a_cpp_program_loads_a_built_module_and_runs_the_iterator(tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    lib = kjit.build("consumer_mod", output=tmp_path / "consumer_mod.so",
                     cpp_sources="#include <cstdint>\nint64_t add_ints(int64_t a, int64_t b) { return a + b; }\n",
                     functions={"add_ints": "a: int64, b: int64"})
    config = subprocess.run([sys.executable, "-m", "kjit.config", "--cxxflags", "--ldflags"], capture_output=True,
                            text=True, check=True).stdout.split()
    (tmp_path / "main.cc").write_text(PROGRAM)
    build = subprocess.run([cxx, str(tmp_path / "main.cc"), "-o", str(tmp_path / "main"), *config],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    env = dict(os.environ, KJIT_NUM_THREADS="2", KJIT_ADAPTIVE_THREADS="0")
    run = subprocess.run([str(tmp_path / "main"), str(lib)], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "error: module 'consumer_mod' has no function 'nope' (it has: add_ints)"
    assert lines[1] == "consumer_mod 42 3 1"


def test_libkjit_finds_the_tvm_ffi_beside_it_wherever_the_environment_is(tmp_path):
    # pip puts libkjit in site-packages/kjit/lib and tvm-ffi's library in
    # site-packages/tvm_ffi/lib; libkjit's RUNPATH is relative, so the same layout at
    # another place starts a program that links libkjit alone and calls no tvm-ffi
    # function, with no LD_LIBRARY_PATH (the loader looks for libkjit's dependencies
    # in libkjit's RUNPATH, not the program's).
    import tvm_ffi

    cxx = shutil.which("g++") or shutil.which("c++")
    readelf = shutil.which("readelf")
    if cxx is None or readelf is None:
        pytest.skip("needs a C++ compiler and readelf")
    libdir = subprocess.run([sys.executable, "-m", "kjit.config", "--libdir"], capture_output=True, text=True,
                            check=True).stdout.strip()
    if os.path.realpath(libdir) != os.path.realpath(os.path.join(os.path.dirname(kjit.__file__), "lib")):
        pytest.skip(f"libkjit ({libdir}) is not the installed package's")
    library = os.path.join(libdir, "libkjit.so")
    dynamic = subprocess.run([readelf, "-d", library], capture_output=True, text=True, check=True).stdout
    assert "Library runpath: [$ORIGIN/../../tvm_ffi/lib]" in dynamic, dynamic
    site = tmp_path / "elsewhere" / "site-packages"
    (site / "kjit" / "lib").mkdir(parents=True)
    shutil.copy(library, site / "kjit" / "lib" / "libkjit.so")
    os.symlink(os.path.dirname(os.path.abspath(tvm_ffi.__file__)), site / "tvm_ffi")
    cxxflags = subprocess.run([sys.executable, "-m", "kjit.config", "--cxxflags"], capture_output=True, text=True,
                              check=True).stdout.split()
    (tmp_path / "main.cc").write_text(PARSE_ONLY)
    kjit_lib = site / "kjit" / "lib"
    build = subprocess.run([cxx, str(tmp_path / "main.cc"), "-o", str(tmp_path / "main"), *cxxflags,
                            f"-L{kjit_lib}", "-lkjit", f"-Wl,-rpath,{kjit_lib}"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.splitlines() == ["x: float32[n], y: float32[n] out; n % 4 == 0"]


def test_config_prints_each_value_and_refuses_unknown_options():
    out = subprocess.run([sys.executable, "-m", "kjit.config"], capture_output=True, text=True, check=True).stdout
    keys = [line.split(":")[0] for line in out.splitlines()]
    assert keys == ["includedir", "libdir", "cmakedir", "docdir", "cxxflags", "ldflags", "version"]
    inc = subprocess.run([sys.executable, "-m", "kjit.config", "--includedir"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert os.path.isfile(os.path.join(inc, "kjit", "iterator.h"))
    bad = subprocess.run([sys.executable, "-m", "kjit.config", "--cmake"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unrecognized arguments: --cmake" in bad.stderr


def test_every_doc_a_docstring_names_ships_with_the_package():
    docdir = subprocess.run([sys.executable, "-m", "kjit.config", "--docdir"], capture_output=True, text=True,
                            check=True).stdout.strip()
    package = os.path.dirname(kjit.__file__)
    named = set()
    for name in os.listdir(package):
        if name.endswith(".py"):
            with open(os.path.join(package, name), encoding="utf-8") as f:
                named |= set(re.findall(r"docs/([a-z_]+\.md)", f.read()))
    assert len(named) >= 6, named
    missing = sorted(n for n in named if not os.path.isfile(os.path.join(docdir, n)))
    assert missing == [], f"{docdir} lacks {missing}"
    assert os.path.isfile(os.path.join(docdir, "README.md")) or os.path.isfile(os.path.join(docdir, "..", "README.md"))
