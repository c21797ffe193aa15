"""The stub precompiled header (docs/cache.md): a cold build with the default flags
compiles against it when its stamp fits, and otherwise exactly as without it; the
modules behave the same either way. The stamp's individual checks are in
tests/cpp/test_pch.cc; here real modules are built with the real PCH and with
damaged copies of it (KJIT_PCH_DIR)."""

import os
import shutil

import numpy as np
import pytest

import kjit
from kjit import _lib

PCH_DIR = os.path.join(os.path.dirname(os.path.realpath(_lib.LIBRARY_PATH)), "pch")
GCH = os.path.join("kjit", "detail", "stub_includes.h.gch")

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(PCH_DIR, "stamp")),
    reason=f"this kjit was built without the stub PCH (no {PCH_DIR}/stamp: not GCC, or a sanitizer build)")

SOURCE = r"""
#include <kjit/kernel.h>
#include <cmath>
void axpy(const kjit::TensorView x, kjit::TensorView y, double alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] += alpha * std::sqrt(x.data<double>()[i]);
}
std::string describe(int64_t n, std::string_view tag) { return std::string(tag) + "=" + std::to_string(n); }
"""
FUNCTIONS = {"axpy": "x: float64[n], y: float64[n] out, alpha: float64", "describe": "n: int64, tag: str"}


def build(tmp_path, name="pch_mod", **kwargs):
    """A cold build into its own cache; returns the module and its build.log."""
    mod = kjit.load_inline(name, cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path / name),
                           **kwargs)
    assert not mod.cache_hit
    with open(os.path.join(os.path.dirname(mod.path), "build.log")) as f:
        return mod, f.read()


def used_pch(log, pch_dir):
    """The command names the PCH directory first on the include path, and GCC
    printed nothing (-Winvalid-pch would say if it had rejected the .gch)."""
    command, _, output = log.partition("\n")
    if f"-I{pch_dir} " not in command:
        return False
    assert "-Winvalid-pch" in command
    assert output.strip() == "", output
    return True


def results(mod):
    """What the module computes, and what its checks say."""
    x = np.array([0.0, 1.0, 4.0, 2.0])
    y = np.full(4, 0.5)
    mod.axpy(x, y, 3.0)
    with pytest.raises(ValueError) as err:
        mod.axpy(x, np.empty(3), 1.0)
    return y.tolist(), mod.describe(-7, "n"), str(err.value)


def damaged_copy(tmp_path, how):
    """A copy of the PCH directory, damaged in one way."""
    copy = tmp_path / "pch-copy"
    shutil.copytree(PCH_DIR, copy)
    gch = copy / GCH
    if how == "truncated":
        with open(gch, "r+b") as f:
            f.truncate(os.path.getsize(gch) // 2)
    elif how == "flipped":  # a byte in the middle, the file's time put back: GCC would load it
        st = os.stat(gch)
        with open(gch, "r+b") as f:
            f.seek(st.st_size // 2)
            byte = f.read(1)
            f.seek(st.st_size // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        os.utime(gch, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "stamp edited":
        text = (copy / "stamp").read_text().replace("-O2", "-O3")
        (copy / "stamp").write_text(text)
    elif how == "stamp missing":
        os.remove(copy / "stamp")
    return str(copy)


@pytest.fixture
def plain(tmp_path_factory, monkeypatch):
    """What a build without the PCH computes (KJIT_PCH=0)."""
    monkeypatch.setenv("KJIT_PCH", "0")
    mod, log = build(tmp_path_factory.mktemp("plain"))
    monkeypatch.delenv("KJIT_PCH")
    assert not used_pch(log, PCH_DIR)
    return mod


def test_a_cold_build_uses_the_pch_and_computes_the_same(tmp_path, plain):
    mod, log = build(tmp_path)
    assert used_pch(log, PCH_DIR)
    assert results(mod) == results(plain)
    assert mod.key == plain.key  # the PCH does not change what is built
    # The headers baked into the PCH are recorded with the entry, as a plain build's -MMD would.
    with open(os.path.join(os.path.dirname(mod.path), "manifest")) as f:
        manifest = f.read()
    for header in ("kjit/detail/stub_includes.h", "kjit/kernel.h", "tvm/ffi/c_api.h"):
        assert header in manifest


def test_verbose_says_whether_and_why_not(tmp_path, monkeypatch, capfd):
    build(tmp_path, "pch_verbose_on", verbose=True)
    assert f"[kjit] module 'pch_verbose_on': stub headers precompiled in {PCH_DIR}\n" in capfd.readouterr().err
    monkeypatch.setenv("KJIT_PCH", "0")
    build(tmp_path, "pch_verbose_off", verbose=True)
    assert "[kjit] module 'pch_verbose_off': no precompiled stub headers: KJIT_PCH=0\n" in capfd.readouterr().err


def test_extra_cflags_compile_without_it(tmp_path, plain):
    mod, log = build(tmp_path, extra_cflags=["-g"])  # GCC refuses a .gch built at another debug level
    assert not used_pch(log, PCH_DIR)
    assert results(mod) == results(plain)


def test_warning_and_optimisation_flags_keep_it(tmp_path, plain):
    """Flags that change no macro or target the header was precompiled under: GCC
    takes the .gch with them (used_pch checks it printed no -Winvalid-pch note)."""
    mod, log = build(tmp_path, extra_cflags=["-O3", "-Wall", "-Wextra", "-Werror", "-fdiagnostics-color=never"])
    assert used_pch(log, PCH_DIR), log
    assert results(mod) == results(plain)
    _, log = build(tmp_path, "pch_define", extra_cflags=["-Wall", "-DNDEBUG"])  # a macro: not taken
    assert not used_pch(log, PCH_DIR)


def test_an_untouched_copy_is_used(tmp_path, monkeypatch):
    copy = tmp_path / "pch-copy"
    shutil.copytree(PCH_DIR, copy)
    monkeypatch.setenv("KJIT_PCH_DIR", str(copy))
    _, log = build(tmp_path)
    assert used_pch(log, str(copy))


@pytest.mark.parametrize("how, why", [
    ("truncated", "has {half} bytes, its stamp says {size}"),
    ("flipped", "does not match the checksum in its stamp"),
    ("stamp edited", "is damaged"),
    ("stamp missing", "is missing"),
])
def test_a_damaged_pch_is_not_used(tmp_path, monkeypatch, capfd, plain, how, why):
    size = os.path.getsize(os.path.join(PCH_DIR, GCH))
    copy = damaged_copy(tmp_path, how)
    monkeypatch.setenv("KJIT_PCH_DIR", copy)
    mod, log = build(tmp_path, verbose=True)
    assert not used_pch(log, copy)
    assert why.format(half=size // 2, size=size) in capfd.readouterr().err
    assert results(mod) == results(plain)


def test_an_include_path_with_a_system_header_compiles_without_it(tmp_path, capfd, plain):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "cstdio").write_text("#include_next <cstdio>\n#define KJIT_TEST_OWN_CSTDIO 1\n")
    mod, log = build(tmp_path, extra_include_paths=[str(inc)], verbose=True)
    assert not used_pch(log, PCH_DIR)
    assert f"the include path {inc} has cstdio, which would replace the system header" in capfd.readouterr().err
    assert results(mod) == results(plain)
    # A harmless include path keeps it.
    (tmp_path / "inc2").mkdir()
    _, log = build(tmp_path, "pch_mod2", extra_include_paths=[str(tmp_path / "inc2")])
    assert used_pch(log, PCH_DIR)
