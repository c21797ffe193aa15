"""Building modules: compile errors, the toolchain lookup, the cache, the Module object and the CLI."""

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

import kjit

from conftest import build

KJIT_CLI = os.path.join(os.path.dirname(sys.executable), "kjit")

ADD_SOURCE = r"""
#include <kjit/kernel.h>
void add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  for (int64_t i = 0; i < a.numel(); ++i) c.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
}
int64_t twice(int64_t x) { return 2 * x; }
"""
ADD_FUNCTIONS = {"add": "a: float32[n], b: float32[n], c: float32[n] out", "twice": "x: int64"}


def run_python(code, cache_dir, **env):
    """Runs `code` in a fresh interpreter with its own KJIT_CACHE_DIR; returns the CompletedProcess."""
    full_env = dict(os.environ, KJIT_CACHE_DIR=str(cache_dir), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=120)


def loader_script(name, source=ADD_SOURCE, functions=ADD_FUNCTIONS, verbose=False):
    return f"""
        import kjit
        mod = kjit.load_inline({name!r}, cpp_sources={source!r}, functions={functions!r}, verbose={verbose})
        assert mod.twice(21) == 42
        print("PATH", mod.path)
        print("HIT", mod.cache_hit)
    """


def parse_run(proc):
    assert proc.returncode == 0, proc.stderr
    path = re.search(r"^PATH (.*)$", proc.stdout, re.M).group(1)
    hit = re.search(r"^HIT (.*)$", proc.stdout, re.M).group(1) == "True"
    return path, hit


@pytest.fixture(scope="module")
def mod():
    return build("buildmod", ADD_SOURCE, ADD_FUNCTIONS)


# ---- compile errors ----


def test_compile_error_carries_command_and_log():
    source = "#include <kjit/kernel.h>\n\nint64_t f(int64_t x) { return y; }\n"
    with pytest.raises(kjit.CompileError) as info:
        build("compile_err", source, {"f": "x: int64"})
    err = info.value
    assert isinstance(err, RuntimeError)
    assert "-O2" in err.command
    assert re.search(r"(c\+\+|g\+\+|clang\+\+)\s", err.command)
    assert "cpp_sources:3:" in err.log  # the user's own line number
    assert "'y' was not declared" in err.log.replace("\u2018", "'").replace("\u2019", "'")
    assert str(err).startswith("kjit: compiling module 'compile_err' failed")
    assert err.log.strip().splitlines()[-1] in str(err)


def test_compile_error_names_the_source_in_a_list():
    sources = ["#include <kjit/kernel.h>\n", "int64_t g();\nint64_t f(int64_t x) { return y; }\n"]
    with pytest.raises(kjit.CompileError) as info:
        build("compile_err_list", sources, {"f": "x: int64"})
    assert "cpp_sources[1]:2:" in info.value.log


def test_toolchain_error(tmp_path):
    code = """
        import kjit
        try:
            kjit.load_inline("tc", cpp_sources="int64_t f(int64_t x) { return x; }", functions={"f": "x: int64"})
        except kjit.ToolchainError as err:
            assert isinstance(err, RuntimeError)
            print("TOOLCHAIN", err)
    """
    proc = run_python(code, tmp_path / "cache", CXX="/nonexistent/c++")
    assert proc.returncode == 0, proc.stderr
    assert "TOOLCHAIN kjit: no C++ compiler: CXX='/nonexistent/c++'" in proc.stdout
    assert "not an executable file" in proc.stdout


# ---- the cache ----


def test_second_load_in_process_is_cached(mod):
    start = time.perf_counter()
    again = build("buildmod", ADD_SOURCE, ADD_FUNCTIONS)
    elapsed = time.perf_counter() - start
    assert again.path == mod.path
    assert elapsed < 0.1, f"cached load took {elapsed:.3f} s"
    assert again.twice(4) == 8


def test_fresh_process_reports_cache_hit(tmp_path):
    cache = tmp_path / "cache"
    first_path, first_hit = parse_run(run_python(loader_script("fresh_proc"), cache))
    second_path, second_hit = parse_run(run_python(loader_script("fresh_proc"), cache))
    assert (first_hit, second_hit) == (False, True)
    assert first_path == second_path
    assert first_path.startswith(str(cache))


def test_extra_cflags_change_the_path(mod):
    other = build("buildmod", ADD_SOURCE, ADD_FUNCTIONS, extra_cflags=["-DKJIT_TEST_FLAG=1"])
    assert other.path != mod.path
    assert not other.cache_hit


def test_build_directory(tmp_path):
    where = tmp_path / "builds"
    m = build("in_build_dir", ADD_SOURCE, ADD_FUNCTIONS, build_directory=str(where))
    assert os.path.commonpath([m.path, str(where)]) == str(where)
    assert os.path.isfile(m.path)
    assert m.twice(5) == 10


def test_concurrent_processes_compile_once(tmp_path):
    cache = tmp_path / "cache"
    code = textwrap.dedent(loader_script("concurrent", verbose=True))
    env = dict(os.environ, KJIT_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    paths = {re.search(r"^PATH (.*)$", out, re.M).group(1) for out, _ in outs}
    assert len(paths) == 1
    # "[kjit] compiling module" starts a compile; "still compiling module" is its
    # progress line on a slow machine (a loaded one, an ASan build), not a second compile.
    compiles = sum(len(re.findall(r"^\[kjit\] compiling module", err, re.M)) for _, err in outs)
    assert compiles == 1, "\n---\n".join(err for _, err in outs)


def test_damaged_cache_entry_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    path, hit = parse_run(run_python(loader_script("damaged"), cache))
    assert not hit
    with open(path, "wb"):
        pass  # truncate the shared object to 0 bytes
    path2, hit2 = parse_run(run_python(loader_script("damaged"), cache))
    assert path2 == path
    assert not hit2
    assert os.path.getsize(path) > 0


# ---- the Module object ----


def test_functions_and_call(mod):
    np = pytest.importorskip("numpy")
    assert mod.functions == {"add": "a: float32[n], b: float32[n], c: float32[n] out", "twice": "x: int64"}
    a = np.arange(4, dtype=np.float32)
    c = np.zeros(4, np.float32)
    assert mod.add(a, a, c) is None
    assert c.tolist() == [0, 2, 4, 6]
    assert mod["twice"](3) == 6
    assert "add" in mod and "missing" not in mod


def test_missing_function(mod):
    with pytest.raises(KeyError) as info:
        mod["missing"]
    assert "module 'buildmod' has no function 'missing' (it has: add, twice)" in str(info.value)
    with pytest.raises(AttributeError, match="missing"):
        mod.missing  # plain AttributeError: no __getattr__, so mod.fn stays fast
    with pytest.raises(KeyError, match="missing"):
        mod.get_host_source("missing")


def test_host_source(mod):
    stub = mod.get_host_source("add")
    assert "__tvm_ffi_add" in stub
    assert "__tvm_ffi_twice" not in stub
    for check in ("fail_count", "fail_tensor_kind", "fail_ndim", "fail_dtype", "fail_field", "fail_compact"):
        assert check in stub
    full = mod.get_host_source()
    assert full == mod.source
    assert stub in full and mod.get_host_source("twice") in full
    assert "tvm/ffi/function.h" not in full
    # The stub headers come first, through stub_includes.h (precompiled when it can be).
    assert full.startswith("#include <kjit/detail/stub_includes.h>\n")
    root = os.path.join(os.path.dirname(__file__), "..", "..", "include")
    with open(os.path.join(root, "kjit", "detail", "stub_includes.h")) as f:
        full += f.read()
    tvm_includes = re.findall(r"#include\s*[<\"](tvm/[^>\"]+)[>\"]", full)
    assert "tvm/ffi/c_api.h" in tvm_includes
    assert set(tvm_includes) <= {"tvm/ffi/c_api.h", "tvm/ffi/extra/c_env_api.h"}, tvm_includes  # C headers only


# ---- the command line ----


def test_cli_stub():
    proc = subprocess.run([KJIT_CLI, "stub", "--name", "add", "a: float32[n]"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("// add(a: float32[n])\n")
    assert "__tvm_ffi_add" in proc.stdout
    assert "fail_ndim" in proc.stdout


def test_cli_bad_signature():
    proc = subprocess.run([KJIT_CLI, "stub", "--name", "add", "a: float33[n]"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("kjit: error: signature of 'add': unknown dtype 'float33'")


def test_cli_check():
    proc = subprocess.run([KJIT_CLI, "check", "a: float32 [2 * k + 1]"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "a: float32[2*k + 1]\n"
