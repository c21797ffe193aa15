"""kjit.build and kjit.load: a module built ahead of time, relocatable, loaded with
no compiler and no source (PATH without one, CXX=/nonexistent, an empty cache),
with its keywords, defaults, returned outputs, checks, torch ops and JAX handlers."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kjit

SOURCE = r"""
#include <kjit/kernel.h>
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}
void twice(const kjit::TensorView x, kjit::TensorView out) {
  for (int64_t i = 0; i < x.numel(); ++i) out.data<float>()[i] = 2 * x.data<float>()[i];
}
"""
FUNCTIONS = {
    "axpy": "x: float32[n], y: float32[n] out, alpha: float32 = 2.0",
    "twice": "x: float32[n], out: float32[n] return",
}


def _child(code, tmp_path):
    """Runs `code` where no compiler can be found and the cache is empty."""
    env = dict(os.environ, PATH="/nonexistent", CXX="/nonexistent", CC="/nonexistent",
               KJIT_CACHE_DIR=str(tmp_path / "empty-cache"))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shipped")
    path = kjit.build("shipped_axpy", output=folder / "shipped_axpy.so", cpp_sources=SOURCE, functions=FUNCTIONS)
    return str(path)


def test_a_built_module_loads_and_runs_without_a_compiler(built, tmp_path):
    out = _child(f"""
        import json
        import numpy as np
        import kjit
        m = kjit.load({built!r})
        x = np.arange(4, dtype=np.float32)
        y = np.zeros(4, np.float32)
        m.axpy(x, y)                      # the default alpha=2.0
        m.axpy(x=x, y=y, alpha=0.5)       # keywords
        r = m.twice(x)                    # a returned output
        try:
            m.axpy(np.ones(3, np.float32), y)
            err = None
        except ValueError as e:
            err = str(e)
        print(json.dumps({{"y": y.tolist(), "r": r.tolist(), "err": err, "functions": m.functions, "name": m.name,
                           "source": m.get_host_source()}}))
    """, tmp_path)
    got = json.loads(out.strip().splitlines()[-1])
    assert got["y"] == [0.0, 2.5, 5.0, 7.5]
    assert got["r"] == [0.0, 2.0, 4.0, 6.0]
    assert got["err"] == "axpy: argument #1 'y': shape[0] must equal n = 3 (bound by x.shape[0]), got 4"
    assert got["name"] == "shipped_axpy" and got["source"] == ""
    ref = kjit.load_inline("shipped_axpy_ref", cpp_sources=SOURCE, functions=FUNCTIONS)
    assert got["functions"] == ref.functions


def test_the_library_has_no_runpath_into_this_tvm_ffi(built):
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("needs readelf")
    dynamic = subprocess.run([readelf, "-d", built], capture_output=True, text=True, check=True).stdout
    import tvm_ffi
    assert os.path.dirname(tvm_ffi.__file__) not in dynamic
    assert "libtvm_ffi.so" in dynamic  # found by soname, already loaded by `import tvm_ffi`


def test_tvm_ffi_loads_it_too(built, tmp_path):
    out = _child(f"""
        import numpy as np
        import tvm_ffi
        m = tvm_ffi.load_module({built!r})
        x = np.arange(3, dtype=np.float32)
        y = np.zeros(3, np.float32)
        m["axpy"](x, y, 1.0)
        print(y.tolist())
    """, tmp_path)
    assert out.strip().splitlines()[-1] == "[0.0, 1.0, 2.0]"


def test_torch_ops_of_a_loaded_module(built, tmp_path):
    pytest.importorskip("torch")
    out = _child(f"""
        import torch
        import kjit
        m = kjit.load({built!r})
        print(m.torch.twice(torch.arange(3, dtype=torch.float32)).tolist())
    """, tmp_path)
    assert out.strip().splitlines()[-1] == "[0.0, 2.0, 4.0]"


def test_jax_handlers_ship_with_jax_true(tmp_path):
    pytest.importorskip("jax")
    path = kjit.build("shipped_jax", output=tmp_path / "shipped_jax.so", cpp_sources=SOURCE, functions=FUNCTIONS,
                      jax=True)
    out = _child(f"""
        import jax, jax.numpy as jnp
        import kjit
        m = kjit.load({str(path)!r})
        print(jax.jit(m.jax.twice)(jnp.arange(3, dtype=jnp.float32)).tolist())
    """, tmp_path)
    assert out.strip().splitlines()[-1] == "[0.0, 2.0, 4.0]"


def test_mod_jax_of_a_module_built_without_handlers_says_how(built):
    pytest.importorskip("jax")
    m = kjit.load(built)
    with pytest.raises(ValueError, match=r"was built without XLA handlers; build it with kjit.build\(..., jax=True\)"):
        m.jax.twice  # noqa: B018


def test_rejections(tmp_path):
    with pytest.raises(FileNotFoundError, match="kjit.load: no file"):
        kjit.load(tmp_path / "missing.so")
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if os.path.exists(libm):
        with pytest.raises(ValueError, match=r"kjit.load: .*libm.so.6 does not load as a shared library"):
            kjit.load(libm)
        shutil.copy(libm, tmp_path / "libm_copy.so")
        with pytest.raises(ValueError, match=r"is not a kjit module: it exports no __kjit_manifest"):
            kjit.load(tmp_path / "libm_copy.so")
        os.unlink(tmp_path / "libm_copy.so")
    (tmp_path / "garbage.so").write_bytes(b"not an ELF file")
    with pytest.raises(ValueError, match=r"garbage.so does not load as a shared library"):
        kjit.load(tmp_path / "garbage.so")
    os.unlink(tmp_path / "garbage.so")
    with pytest.raises(ValueError, match="is a folder; name the library file"):
        kjit.build("x", output=tmp_path, cpp_sources=SOURCE, functions=FUNCTIONS)
    with pytest.raises(FileNotFoundError, match="the folder of output"):
        kjit.build("x", output=tmp_path / "no" / "x.so", cpp_sources=SOURCE, functions=FUNCTIONS)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporary left behind


def test_sources_are_files_with_their_folders_on_the_include_path(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "helper.h").write_text("inline float twice(float v) { return 2 * v; }\n")
    (tmp_path / "k.cc").write_text('#include "inc/helper.h"\n#include <kjit/kernel.h>\n'
                                   "void scale(const kjit::TensorView x, kjit::TensorView y) {\n"
                                   "  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = twice(x.data<float>()[i]);\n"
                                   "}\n")
    m = kjit.load_inline("files_scale", sources=[tmp_path / "k.cc"], functions={"scale": "x: float32[n], y: float32[n] out"})
    y = np.zeros(3, np.float32)
    m.scale(np.ones(3, np.float32), y)
    assert y.tolist() == [2.0, 2.0, 2.0]
    # A compile error names the file and the line the user wrote.
    (tmp_path / "bad.cc").write_text("#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x) {\n"
                                     "  int y = undefined_thing;\n}\n")
    with pytest.raises(kjit.CompileError, match=rf"{tmp_path}/bad.cc:3:\d+: error: .undefined_thing. was not declared"):
        kjit.load_inline("files_bad", sources=str(tmp_path / "bad.cc"), functions={"f": "x: float32[n]"})
    with pytest.raises(FileNotFoundError, match="no source file .*missing.cc.* pass source text as cpp_sources="):
        kjit.load_inline("files_missing", sources=[tmp_path / "missing.cc"], functions=["f"])
    with pytest.raises(ValueError, match="is a folder; name the files in it"):
        kjit.load_inline("files_folder", sources=[tmp_path / "inc"], functions=["f"])
    (tmp_path / "latin1.cc").write_bytes(b"// caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.cc' is not UTF-8 text \(invalid continuation byte at byte 6\)"):
        kjit.load_inline("files_latin1", sources=[tmp_path / "latin1.cc"], functions=["f"])


def test_the_build_command(tmp_path):
    (tmp_path / "k.cc").write_text(SOURCE)
    out = tmp_path / "cli_mod.so"
    cli = [sys.executable, "-m", "kjit", "build", "--name", "cli_mod", "-o", str(out)]
    args = ["-f", f"axpy={FUNCTIONS['axpy']}", "-f", f"twice={FUNCTIONS['twice']}", str(tmp_path / "k.cc")]
    proc = subprocess.run(cli + args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{out}: axpy({FUNCTIONS['axpy']}), twice({FUNCTIONS['twice']})"
    assert kjit.load(out).functions == FUNCTIONS
    missing = subprocess.run(cli + [str(tmp_path / "nope.cc")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"kjit: error: cannot read the source file '{tmp_path / 'nope.cc'}': No such file or directory"
    # A name alone is inferred from the C++ definition, beside signatures.
    mixed = subprocess.run(cli + ["-f", "axpy", "-f", f"twice={FUNCTIONS['twice']}", str(tmp_path / "k.cc")],
                           capture_output=True, text=True, timeout=300)
    assert mixed.returncode == 0, mixed.stderr
    assert set(kjit.load(out).functions) == {"axpy", "twice"}
    assert kjit.load(out).functions["twice"] == FUNCTIONS["twice"]
    for bad, message in ((["-f", "axpy="], "kjit build: -f 'axpy=' has an empty signature; write -f axpy to infer "
                                           "it from the C++ definition"),
                         (["-f", "axpy", "-f", "axpy=x: float32[n]"], "kjit build: -f names the function 'axpy' twice")):
        proc = subprocess.run(cli + bad + [str(tmp_path / "k.cc")], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.strip() == f"kjit: error: {message}"


def test_a_failed_build_keeps_its_generated_source(tmp_path):
    bad = "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x) {\n  int y = undefined_thing;\n}\n"
    with pytest.raises(kjit.CompileError) as err:
        kjit.load_inline("kept_failure", cpp_sources=bad, functions={"f": "x: float32[n]"}, build_directory=tmp_path)
    last = str(err.value).splitlines()[-1]
    assert last.startswith(f"the generated source is kept at {tmp_path}/failed/kept_failure-") and last.endswith(".cc")
    kept = last.split(" kept at ")[1]
    text = open(kept).read()
    assert "undefined_thing" in text and "__tvm_ffi_f" in text  # the user's code and the stubs, as compiled
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]  # the build directory itself is gone


def test_a_none_signature_in_the_dict_is_inferred_beside_declared_ones():
    assert kjit.resolve(SOURCE, {"axpy": None, "twice": FUNCTIONS["twice"]}) == {
        "axpy": "x: any[...], y: any[...] out, alpha: float32", "twice": FUNCTIONS["twice"]}
    with pytest.raises(TypeError) as err:
        kjit.resolve(SOURCE, {"axpy": 3})
    assert str(err.value) == ("functions['axpy'] must be a signature string, a kjit.Spec, a list of arg_spec tokens "
                              "or None (inferred from the C++ definition), got int")


OPTIONAL = r"""
import sys
sys.modules["jax"] = None
sys.modules["torch"] = None
import kjit
for name in ("jax", "torch"):
    try:
        getattr(kjit, name)
    except ImportError as err:
        print(err)
try:
    kjit.load_inline("optional_jax", cpp_sources="#include <cstdint>\nint64_t f() { return 1; }\n", functions=["f"],
                     jax=True)
except ImportError as err:
    print(err)
"""


def test_a_missing_framework_names_its_pip_extra():
    proc = subprocess.run([sys.executable, "-c", OPTIONAL], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "kjit.jax needs jax, which could not be imported (import of jax halted; None in sys.modules); install it "
        "with pip install 'kjit[jax]'",
        "kjit.torch needs torch, which could not be imported (import of torch halted; None in sys.modules); install "
        "it with pip install 'kjit[torch]'",
        "load_inline(jax=True) needs jax.ffi, which could not be imported (No module named 'jax.ffi'; 'jax' is not a "
        "package); install it with pip install 'kjit[jax]'"]


# ---- what kjit.load checks (docs/shipping.md) ----

def _manifest_of(path):
    with open(path, "rb") as f:
        data = f.read()
    start = data.index(b'{"kjit_manifest"')
    return data, start, json.loads(data[start:data.index(b"\0", start)])


def _edited(built, tmp_path, name, old, new):
    """A copy of the library with one edit in its manifest (same length: the ELF file
    is otherwise intact)."""
    assert len(old) == len(new)
    data, start, _ = _manifest_of(built)
    at = data.index(old, start)
    path = tmp_path / f"{name}.so"
    path.write_bytes(data[:at] + new + data[at + len(old):])
    return str(path)


def test_load_holds_the_manifest_against_the_stubs_and_versions(built, tmp_path):
    """A one-byte edit of the manifest (a default, a parameter's name, a device, the
    JSON, a version, the XLA flag) is refused, naming the library, what the manifest
    says and what the stub checks or this kjit runs; never a silent wrong default or
    a call that fails over an argument nobody passes. In a child: each copy is loaded."""
    from kjit._versions import versions  # noqa: PLC0415

    _, _, manifest = _manifest_of(built)
    abi, here = manifest["tvm_ffi_abi"], versions()["tvm-ffi"]
    kjit_version = manifest["kjit_version"]
    assert (kjit_version, abi.split(".")[:2]) == (kjit.__version__, here.split(".")[:2])
    axpy = FUNCTIONS["axpy"]
    disagrees = ("has a manifest that disagrees with its stub of 'axpy': the manifest says '{}' ({}), the stub checks "
                 f"'{axpy}' (cpu); the library was edited or damaged, rebuild it with kjit.build")
    cases = {
        "default": (b"alpha: float32 = 2.0", b"alpha: float32 = 9.0",
                    disagrees.format(axpy.replace("2.0", "9.0"), "cpu")),
        "name": (b"alpha: float32", b"alphb: float32", disagrees.format(axpy.replace("alpha", "alphb"), "cpu")),
        "device": (b'"device":"cpu","location":"cpp_sources:3"', b'"device":"cuda","location":"cpp_sources:"',
                   disagrees.format(axpy, "cuda")),
        "json": (b'"kjit_manifest":2,', b'"kjit_manifest":2;',
                 "has a broken manifest (its __kjit_manifest): it is not JSON (Expecting ',' delimiter: line 1 column "
                 "19 (char 18)); rebuild it with kjit.build"),
        "kjit": (b'"kjit_version":"' + kjit_version.encode(), b'"kjit_version":"9' + kjit_version[1:].encode(),
                 f"was built by kjit 9{kjit_version[1:]} for the tvm-ffi ABI {abi}, but this is kjit {kjit.__version__} "
                 f"with tvm-ffi {here} (a library needs the same major version of each, and the same minor one below "
                 "1.0); rebuild it with this kjit"),
        "abi": (b'"tvm_ffi_abi":"' + abi.encode(), b'"tvm_ffi_abi":"9' + abi[1:].encode(),
                f"was built by kjit {kjit_version} for the tvm-ffi ABI 9{abi[1:]}, but this is kjit {kjit.__version__} "
                f"with tvm-ffi {here} (a library needs the same major version of each, and the same minor one below "
                "1.0); rebuild it with this kjit"),
        "xla": (b'"xla_handlers":false', b'"xla_handlers":true ',
                "has a manifest that says it has XLA handlers, but it does not export __kjit_xla_axpy; rebuild it with "
                "kjit.build(..., jax=True)"),
        "missing": (b'"name":"twice"', b'"name":"twixe"', "lists 'twixe' in its manifest but does not export it"),
    }
    paths = {case: _edited(built, tmp_path, case, old, new) for case, (old, new, _) in cases.items()}
    out = _child(f"""
        import json, kjit
        got = {{}}
        for case, path in {paths!r}.items():
            try:
                kjit.load(path)
                got[case] = "loaded"
            except Exception as e:
                got[case] = type(e).__name__ + ": " + str(e)
        print(json.dumps(got))
    """, tmp_path)
    got = json.loads(out.strip().splitlines()[-1])
    for case, (_, _, message) in cases.items():
        assert got[case] == f"ValueError: kjit.load: {paths[case]} {message}", case


def _elf_problem(data, n):
    """What kjit.load says of `data` cut to n bytes (docs/shipping.md): the ELF header,
    then the program headers and each segment the loader maps, then the section table."""
    import struct  # noqa: PLC0415

    cut = " bytes: it is truncated (an interrupted download or copy?)"
    if n < 64:
        return f"it is {n} bytes, shorter than an ELF header (64 bytes): it is truncated or not a library"
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phnum, shentsize, shnum = struct.unpack_from("<HHH", data, 0x38)[0], *struct.unpack_from("<HH", data, 0x3A)
    if phoff + 56 * phnum > n:
        return f"its program headers need bytes [{phoff}, {phoff + 56 * phnum}) but the file has {n}{cut}"
    kinds = {1: "PT_LOAD", 2: "PT_DYNAMIC", 3: "PT_INTERP"}
    for i in range(phnum):
        kind, = struct.unpack_from("<I", data, phoff + 56 * i)
        offset, _, _, filesz = struct.unpack_from("<QQQQ", data, phoff + 56 * i + 8)
        if kind in kinds and offset + filesz > n:
            return f"its segment #{i} ({kinds[kind]}) needs bytes [{offset}, {offset + filesz}) but the file has {n}{cut}"
    if shnum and shoff + shnum * shentsize > n:
        return f"its section headers need bytes [{shoff}, {shoff + shnum * shentsize}) but the file has {n}{cut}"
    return None


@pytest.mark.parametrize("sections", [True, False])
def test_load_of_a_truncated_library_is_a_value_error_not_sigbus(built, tmp_path, sections):
    """An interrupted download (`head -c N m.so > t.so`) is refused before dlopen, which
    maps the missing pages and dies of SIGBUS on touching them: a ValueError naming the
    file and the bytes its headers need. Without a section table (stripped of it), the
    program headers' segments are what is checked. Each load runs in a child, so a
    crash fails the test instead of killing pytest."""
    data = bytearray(open(built, "rb").read())
    if not sections:
        data[0x28:0x30] = bytes(8)  # e_shoff
        data[0x3C:0x3E] = bytes(2)  # e_shnum
    size = len(data)
    lengths = sorted({0, 10, 63, 64, 100, 1000, 4096, size // 2, size * 3 // 4, size - 1})
    paths = {}
    for n in lengths:
        path = tmp_path / f"cut{n}.so"
        path.write_bytes(bytes(data[:n]))
        paths[n] = str(path)
    for n in lengths:
        problem = _elf_problem(data, n)
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import sys; sys.modules["torch"] = None
            import kjit
            try:
                kjit.load({paths[n]!r})
                print("loaded")
            except ValueError as e:
                print(e)
        """)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{n} bytes: exit status {proc.returncode}\n{proc.stderr[-3000:]}"
        if problem is None:  # only what no segment needs is missing: it loads and works
            assert proc.stdout.strip() == "loaded", (n, proc.stdout)
        else:
            assert proc.stdout.strip() == f"kjit.load: {paths[n]} does not load as a shared library: {problem}", n
    assert any(_elf_problem(data, n) and "segment #" in _elf_problem(data, n) for n in lengths) or sections


# ---- instruction sets (docs/shipping.md "Instruction sets") ---------------------


def _cpu_level():
    import tvm_ffi  # noqa: PLC0415

    return str(tvm_ffi.get_global_func("kjit.isa_level_name")("native"))


def test_a_shipped_library_is_portable_unless_asked(built):
    assert b"KJIT_ISA=" not in open(built, "rb").read()  # baseline: no requirement recorded


def test_load_inline_compiles_for_this_cpu(tmp_path):
    mod = kjit.load_inline("isa_native", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path))
    level = _cpu_level()
    data = open(mod.path, "rb").read()
    assert (f"KJIT_ISA={level}".encode() in data) == (level != "baseline")
    np.testing.assert_array_equal(mod.twice(np.ones(3, np.float32)), [2, 2, 2])


def test_a_library_for_a_level_the_cpu_lacks_is_refused_by_name(tmp_path):
    level = _cpu_level()
    if level == "baseline":
        pytest.skip("this CPU runs no level above baseline")
    path = kjit.build("isa_high", output=tmp_path / "isa_high.so", cpp_sources=SOURCE, functions=FUNCTIONS, isa=level)
    assert f"KJIT_ISA={level}".encode() in open(path, "rb").read()
    assert kjit.load(path).twice(np.ones(2, np.float32)).tolist() == [2, 2]
    # the same CPU, capped below the library's level
    code = f"import kjit\ntry:\n    kjit.load({str(path)!r})\nexcept ValueError as e:\n    print(e)\n"
    env = dict(os.environ, KJIT_HOST_ISA="baseline")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == (
        f"kjit.load: {path} was built for the instruction set {level}, which this CPU does not run (it runs "
        f"baseline): it would stop at its first such instruction (SIGILL); rebuild it with kjit.build(..., "
        f"isa='baseline')"), out.stderr


def test_an_unknown_isa_is_a_toolchain_error(tmp_path):
    with pytest.raises(kjit.ToolchainError, match=r"^isa='avx9': expected native \(this CPU's instruction set\), "
                                                  r"baseline \(any x86-64\), x86-64-v3 \(AVX2, FMA\) or x86-64-v4 "
                                                  r"\(AVX-512\)$"):
        kjit.build("isa_bad", output=tmp_path / "isa_bad.so", cpp_sources=SOURCE, functions=FUNCTIONS, isa="avx9")
    with pytest.raises(TypeError, match="isa must be a str"):
        kjit.load_inline("isa_bad", cpp_sources=SOURCE, functions=FUNCTIONS, isa=3)


@pytest.mark.parametrize("level", [b"x86-64-v9", "x86-64-\u00e9\u00e9".encode(), b"v" * 200 + b"\0"])
def test_an_unknown_or_garbled_level_in_a_library_is_refused_not_loaded(tmp_path, level):
    """A foreign or edited library naming a level kjit does not know: refused by
    kjit.load before loading, the name cut to 32 bytes, never a crash."""
    if _cpu_level() == "baseline":
        pytest.skip("this CPU runs no level to build the marker from")
    path = kjit.build("isa_garbled", output=tmp_path / "isa_garbled.so", cpp_sources=SOURCE, functions=FUNCTIONS,
                      isa=_cpu_level())
    data = open(path, "rb").read()
    marker = f"KJIT_ISA={_cpu_level()}".encode()
    at = data.index(marker) + len(b"KJIT_ISA=")
    edited = tmp_path / "edited.so"
    # same length: the ELF layout stays whole; the level text is what changed
    replacement = (level + b"\0" * 9)[: len(marker) - len(b"KJIT_ISA=")]
    edited.write_bytes(data[:at] + replacement + data[at + len(replacement):])
    code = f"import kjit\ntry:\n    kjit.load({str(edited)!r})\nexcept ValueError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"kjit.load: {edited} was built for the instruction set "), out.stdout
    assert "which this CPU does not run" in out.stdout
