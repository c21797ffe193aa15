"""A C++ program built with ``python -m kjit.config``'s flags: it loads a library
``kjit.build`` made (kjit::load_module) and calls its checked function, and runs
kjit/iterator.h's cpu_kernel and parallel_for on kjit's pool, linked to libkjit."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import kjit

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
