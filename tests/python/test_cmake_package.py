"""The installed CMake package (docs/cpp.md): consumer projects configured and
built against it: one that only parses a signature, run as built and installed
with no LD_LIBRARY_PATH; one that JIT-compiles at run time (docs/cpp.md's own
example); one whose kernels kjit_add_module builds and a program loads with no
compiler, and one whose FUNCTIONS hold constraints and characters CMake, shells and
make treat specially; and every kjit_add_module mistake stopping configure with its
message."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cpp.md").read_text()

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("c++") is None,
                                reason="needs cmake and a C++ compiler")

KERNELS = r"""#include <kjit/kernel.h>

void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}

int64_t add_ints(int64_t a, int64_t b) { return a + b; }
"""

PROGRAM = r"""#include <kjit/runtime.h>

#include <cstdio>
#include <vector>

int main() {
  kjit::Module m = kjit::load_module(KERNELS);
  std::vector<float> x{1, 2, 3}, y(3, 0.0f);
  int64_t n = 3;
  DLTensor tx{x.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, nullptr, 0};
  DLTensor ty{y.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, nullptr, 0};
  m.function("axpy")(&tx, &ty, 0.5f);
  const int64_t sum = m.function("add_ints")(int64_t{2}, int64_t{40}).cast<int64_t>();
  std::printf("%s %g %g %g %lld\n", m.name().c_str(), y[0], y[1], y[2], static_cast<long long>(sum));
  try {
    m.function("axpy")(&tx, &ty);
  } catch (const tvm::ffi::Error& e) {
    std::printf("%s: %s\n", e.kind().c_str(), e.message().c_str());
  }
  return 0;
}
"""


def _doc_blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def _doc_block(language, marker):
    """docs/cpp.md's one ```language block that holds marker."""
    blocks = [b for b in _doc_blocks(language) if marker in b]
    assert len(blocks) == 1, f"docs/cpp.md has {len(blocks)} {language} blocks with {marker!r}"
    return blocks[0]


def _without_library_path():
    """This environment less LD_LIBRARY_PATH: a program finds its libraries by RUNPATH alone."""
    return {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}


@pytest.fixture(scope="module")
def kjit_dir():
    out = subprocess.run([sys.executable, "-m", "kjit.config", "--cmakedir"], capture_output=True, text=True,
                         check=True).stdout.strip()
    if not os.path.isfile(os.path.join(out, "kjitConfig.cmake")):
        pytest.skip(f"kjit is not installed with its CMake package ({out}); pip install the package")
    return out


def _configure(project, kjit_dir, *extra):
    return subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build"), f"-Dkjit_DIR={kjit_dir}",
                           "-DCMAKE_BUILD_TYPE=Release", *extra], capture_output=True, text=True, timeout=300)


def _build(project, kjit_dir):
    conf = _configure(project, kjit_dir)
    assert conf.returncode == 0, conf.stdout[-3000:] + conf.stderr[-3000:]
    build = subprocess.run(["cmake", "--build", str(project / "build")], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]


def test_a_program_that_only_parses_a_signature_starts_as_built_and_installed(tmp_path, kjit_dir):
    # libkjit needs libtvm_ffi.so; the program calls no tvm-ffi function itself, and
    # the loader does not look for libkjit's dependencies in the program's RUNPATH.
    (tmp_path / "CMakeLists.txt").write_text(_doc_block("cmake", "project(parse_only"))
    (tmp_path / "main.cc").write_text(_doc_block("cpp", "parse_signature("))
    _build(tmp_path, kjit_dir)
    built = tmp_path / "build" / "parse_only"
    nm = shutil.which("nm")
    if nm:
        undefined = subprocess.run([nm, "-D", "--undefined-only", str(built)], capture_output=True, text=True,
                                   check=True).stdout
        assert "TVMFFI" not in undefined, undefined
    prefix = tmp_path / "prefix"
    install = subprocess.run(["cmake", "--install", str(tmp_path / "build"), "--prefix", str(prefix)],
                             capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    for program in (built, prefix / "bin" / "parse_only"):
        run = subprocess.run([str(program)], capture_output=True, text=True, env=_without_library_path(),
                             timeout=60)
        assert run.returncode == 0, f"{program}: {run.stderr[-2000:]}"
        assert run.stdout.splitlines() == ["x: float32[n], y: float32[n] out; n % 4 == 0",
                                           "signature of 'quad': unexpected character '#'"], program


def test_the_docs_jit_program_builds_against_the_package_and_runs(tmp_path, kjit_dir):
    (tmp_path / "CMakeLists.txt").write_text(_doc_block("cmake", "project(scale_jit"))
    (tmp_path / "main.cc").write_text(_doc_block("cpp", "load_inline("))
    _build(tmp_path, kjit_dir)
    env = dict(os.environ, KJIT_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([str(tmp_path / "build" / "scale_jit")], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.splitlines() == ["2 4 6", "TypeError: scale: argument #0 'x': dtype must be float32, got int32"]


def test_kjit_add_module_builds_kernels_a_program_loads_without_a_compiler(tmp_path, kjit_dir):
    (tmp_path / "CMakeLists.txt").write_text(_doc_block("cmake", "project(aot_consumer"))
    (tmp_path / "kernels.cc").write_text(KERNELS)
    (tmp_path / "main.cc").write_text(PROGRAM)
    _build(tmp_path, kjit_dir)
    lib = tmp_path / "build" / "aot_kernels.so"
    assert lib.is_file()
    # The build's cache is in the build tree, not the user's.
    assert (tmp_path / "build" / "kjit_cache").is_dir()
    # No RUNPATH into this machine's tvm-ffi (kjit.build's library).
    readelf = shutil.which("readelf")
    if readelf:
        dynamic = subprocess.run([readelf, "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        assert "RUNPATH" not in dynamic and "RPATH" not in dynamic
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    env = dict(os.environ, CXX="/nonexistent", KJIT_CACHE_DIR=str(empty), PATH="/nonexistent")
    run = subprocess.run([str(tmp_path / "build" / "use_kernels")], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.splitlines() == [
        "aot_kernels 0.5 1 1.5 42",
        "TypeError: axpy: expected 3 arguments (x: float32[n], y: float32[n] out, alpha: float32 = 2.0), got 2"]
    assert list(empty.iterdir()) == []
    # Python's kjit.load takes the same library.
    import numpy as np

    import kjit

    mod = kjit.load(lib)
    y = np.zeros(2, np.float32)
    mod.axpy(np.ones(2, np.float32), y)
    assert y.tolist() == [2.0, 2.0]
    assert mod.add_ints(1, 2) == 3


QUAD = r"""#include <kjit/kernel.h>

void quad(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = 4 * x.data<float>()[i];
}

void pair(const kjit::TensorView a, kjit::TensorView b) {
  for (int64_t i = 0; i < a.numel(); ++i) b.data<float>()[i] = a.data<float>()[i];
}

int64_t add_ints(int64_t a, int64_t b) { return a + b; }
"""

SIGNATURES = """cmake_minimum_required(VERSION 3.18)
project(signatures LANGUAGES CXX)
find_package(kjit CONFIG REQUIRED)
kjit_add_module(constrained SOURCES quad.cc
                FUNCTIONS "quad=x: float32[n], y: float32[n] out; n % 4 == 0"
                          "pair=a: float32[m, 2],
                                b: float32[m, 2] out;
                                m >= 2, m % 2 == 0"
                          add_ints)
"""


def test_kjit_add_module_passes_a_signature_with_constraints_whole_and_the_module_checks_them(tmp_path, kjit_dir):
    # The ';' before the constraints is no CMake list separator: each entry is one
    # function, its constraints checked on every call.
    (tmp_path / "CMakeLists.txt").write_text(SIGNATURES)
    (tmp_path / "quad.cc").write_text(QUAD)
    _build(tmp_path, kjit_dir)
    import numpy as np

    import kjit

    mod = kjit.load(tmp_path / "build" / "constrained.so")
    assert mod.functions == {"quad": "x: float32[n], y: float32[n] out; n % 4 == 0",
                             "pair": "a: float32[m, 2], b: float32[m, 2] out; m >= 2, m % 2 == 0",
                             "add_ints": "a: int64, b: int64"}
    y = np.zeros(8, np.float32)
    mod.quad(np.ones(8, np.float32), y)
    assert y.tolist() == [4.0] * 8
    with pytest.raises(ValueError) as err:
        mod.quad(np.ones(6, np.float32), np.zeros(6, np.float32))
    assert str(err.value) == "quad: constraint 'n % 4 == 0' failed with n = 6 (bound by x.shape[0])"
    with pytest.raises(ValueError) as err:
        mod.pair(np.ones((3, 2), np.float32), np.zeros((3, 2), np.float32))
    assert str(err.value) == "pair: constraint 'm % 2 == 0' failed with m = 3 (bound by a.shape[0])"
    assert mod.add_ints(2, 40) == 42


def test_kjit_add_module_hands_kjit_build_a_signature_byte_for_byte(tmp_path, kjit_dir):
    # Characters that CMake lists, generator expressions, shells and make treat
    # specially reach kjit's parser as written: its error quotes the whole text.
    text = "x: float32[n], y: float32[n] out; n % 4 == 0 # \"q\" 'é' ${x} $(HOME) `id` $<SEMICOLON> \\;"
    (tmp_path / "CMakeLists.txt").write_text(
        HEAD + f"kjit_add_module(odd SOURCES quad.cc FUNCTIONS [=[quad={text}]=])\n", encoding="utf-8")
    (tmp_path / "quad.cc").write_text(QUAD)
    conf = _configure(tmp_path, kjit_dir)
    assert conf.returncode == 0, conf.stdout[-3000:] + conf.stderr[-3000:]
    build = subprocess.run(["cmake", "--build", str(tmp_path / "build")], capture_output=True, text=True,
                           encoding="utf-8", timeout=600)
    assert build.returncode != 0
    caret = " " * (2 + text.index("#")) + "^"
    assert f"kjit: error: signature of 'quad': unexpected character '#'\n  {text}\n{caret}\n" in (
        build.stdout + build.stderr), build.stdout[-3000:] + build.stderr[-3000:]


HEAD = "cmake_minimum_required(VERSION 3.18)\nproject(bad LANGUAGES CXX)\nfind_package(kjit CONFIG REQUIRED)\n"

MISTAKES = [
    ("kjit_add_module(m)", [], "kjit_add_module(m): no SOURCES; name the module's C++ (and .cu) files"),
    ("kjit_add_module(m SOURCES missing.cc)", [], "kjit_add_module(m): no source file '{dir}/missing.cc'"),
    ("kjit_add_module(m SOURCE k.cc)", [],
     "kjit_add_module(m): unknown arguments 'SOURCE;k.cc'; it takes SOURCES, FUNCTIONS, JAX, INCLUDE_DIRECTORIES, "
     "COMPILE_OPTIONS, CUDA_ARCH, ISA, DEPENDS, OUTPUT_DIRECTORY"),
    ("add_custom_target(m)\nkjit_add_module(m SOURCES k.cc)", [], "kjit_add_module(m): a target named 'm' exists "
     "already"),
    ("kjit_install_module(nothing DESTINATION lib)", [],
     "kjit_install_module(nothing): no target 'nothing'; call kjit_add_module(nothing ...) first"),
    ("add_custom_target(t)\nkjit_install_module(t DESTINATION lib)", [],
     "kjit_install_module(t): 't' was not made by kjit_add_module"),
    ("kjit_add_module(m SOURCES k.cc)\nkjit_install_module(m)", [], "kjit_install_module(m): no DESTINATION"),
    ("kjit_add_module(m SOURCES k.cc)", ["-DKJIT_PYTHON_EXECUTABLE=/bin/true"],
     "kjit_add_module runs `python -m kjit build` with /bin/true, whose `import kjit` prints no folder, not this "
     "package ({package}); set -DKJIT_PYTHON_EXECUTABLE=<the Python kjit is installed in>"),
    ("kjit_add_module(m SOURCES k.cc)", ["-DKJIT_PYTHON_EXECUTABLE=/usr/bin/python3"],
     "kjit_add_module runs `python -m kjit build` with /usr/bin/python3, whose `import kjit` fails: "
     "ModuleNotFoundError: No module named 'kjit', not this package ({package}); set "
     "-DKJIT_PYTHON_EXECUTABLE=<the Python kjit is installed in>"),
    ("kjit_add_module(m SOURCES k.cc)", ["-DKJIT_PYTHON_EXECUTABLE=/bin/false"],
     "kjit_add_module runs `python -m kjit build` with /bin/false, whose `import kjit` fails (exit status 1), not this package "
     "({package}); set -DKJIT_PYTHON_EXECUTABLE=<the Python kjit is installed in>"),
]


@pytest.mark.parametrize("body,flags,message", MISTAKES, ids=[m[2][:40] for m in MISTAKES])
def test_a_kjit_add_module_mistake_stops_configure_with_its_message(tmp_path, kjit_dir, body, flags, message):
    if "/usr/bin/python3" in " ".join(flags) and (not os.path.exists("/usr/bin/python3") or subprocess.run(
            ["/usr/bin/python3", "-c", "import kjit"], capture_output=True).returncode == 0):
        pytest.skip("needs a /usr/bin/python3 without kjit")
    (tmp_path / "CMakeLists.txt").write_text(HEAD + body + "\n")
    (tmp_path / "k.cc").write_text(KERNELS)
    conf = _configure(tmp_path, kjit_dir, *flags)
    assert conf.returncode != 0
    package = os.path.realpath(os.path.join(kjit_dir, "..", "..", ".."))
    # CMake wraps long messages; compare with its line breaks and indentation removed.
    text = " ".join(conf.stderr.split())
    assert " ".join(message.format(dir=tmp_path, package=package).split()) in text, conf.stderr
