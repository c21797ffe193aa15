"""kjit.jax: XLA FFI handlers generated from the same spec as the tvm-ffi stub.

Target names are process-global in XLA, so every module here has a name starting
with 'tj_' and no two tests register the same name with different code (except
where that is the point).
"""

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import kjit  # noqa: E402
import kjit.jax  # noqa: E402
from kjit import SpecError  # noqa: E402

from conftest import build  # noqa: E402

JaxRuntimeError = jax.errors.JaxRuntimeError
F32 = np.float32


def sds(shape, dtype=np.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def raises_jax(message):
    """Expects a JaxRuntimeError whose text contains `message` verbatim."""
    return pytest.raises(JaxRuntimeError, match=re.escape(message))


# ---------------------------------------------------------------------------
# a token-declared vector add, jitted, vmapped, multi-output
# ---------------------------------------------------------------------------

VADD_SOURCE = r"""
#include <kjit/kernel.h>
void vadd(const kjit::TensorView x, const kjit::TensorView y, kjit::TensorView z, float scale) {
  const float* a = x.data<float>();
  const float* b = y.data<float>();
  float* c = z.data<float>();
  for (int64_t i = 0; i < z.numel(); ++i) c[i] = scale * (a[i] + b[i]);
}
void sumdiff(const kjit::TensorView x, const kjit::TensorView y, kjit::TensorView s, kjit::TensorView d) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    s.data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
    d.data<float>()[i] = x.data<float>()[i] - y.data<float>()[i];
  }
}
"""
VADD_FUNCTIONS = {"vadd": ["args", "args", "rets", "attrs.scale"], "sumdiff": ["arg", "arg", "ret", "ret"]}


@pytest.fixture(scope="module")
def vadd_mod():
    mod = build("tj_vadd", VADD_SOURCE, VADD_FUNCTIONS, jax=True)
    kjit.jax.register(mod)
    return mod


def vadd_call(x, y, scale):
    return jax.ffi.ffi_call("tj_vadd.vadd", sds(x.shape, x.dtype), vmap_method="broadcast_all")(x, y, scale=scale)


def test_load_with_jax_has_handlers(vadd_mod):
    assert vadd_mod.has_xla_handlers
    assert vadd_mod.functions["vadd"] == "x: any[...], y: any[...], z: any[...] out, scale: float32"


def test_register_returns_target_names(vadd_mod):
    assert kjit.jax.register(vadd_mod) == ["tj_vadd.vadd", "tj_vadd.sumdiff"]
    assert kjit.jax.register(vadd_mod, prefix="tj_vadd_pfx") == ["tj_vadd_pfx.vadd", "tj_vadd_pfx.sumdiff"]


def test_register_twice_is_a_no_op(vadd_mod):
    before = kjit.jax.registered_targets()
    assert kjit.jax.register(vadd_mod) == kjit.jax.register(vadd_mod) == ["tj_vadd.vadd", "tj_vadd.sumdiff"]
    assert kjit.jax.registered_targets() == before
    assert before[("tj_vadd.vadd", "cpu")] == vadd_mod.key


def test_jitted_ffi_call_matches_numpy(vadd_mod):
    x = np.arange(8, dtype=F32)
    y = np.linspace(-1, 1, 8, dtype=F32)
    out = jax.jit(lambda a, b: vadd_call(a, b, np.float32(2.0)))(x, y)
    np.testing.assert_allclose(np.asarray(out), 2.0 * (x + y), rtol=1e-6)


def test_tokens_take_any_rank(vadd_mod):
    x = np.arange(12, dtype=F32).reshape(3, 2, 2)
    out = vadd_call(x, np.ones_like(x), np.float32(0.5))
    np.testing.assert_allclose(np.asarray(out), 0.5 * (x + 1))


def test_vmap_broadcast_all(vadd_mod):
    xs = np.arange(12, dtype=F32).reshape(3, 4)
    y = np.full(4, 10, dtype=F32)
    out = jax.vmap(lambda a: vadd_call(a, y, np.float32(3.0)))(xs)
    np.testing.assert_allclose(np.asarray(out), 3.0 * (xs + y))


def test_multi_output(vadd_mod):
    x = np.arange(5, dtype=F32)
    y = np.full(5, 2, dtype=F32)
    s, d = jax.jit(lambda a, b: jax.ffi.ffi_call("tj_vadd.sumdiff", (sds(a.shape), sds(a.shape)))(a, b))(x, y)
    np.testing.assert_array_equal(np.asarray(s), x + y)
    np.testing.assert_array_equal(np.asarray(d), x - y)


def test_missing_attr(vadd_mod):
    x = np.zeros(3, F32)
    with raises_jax("INVALID_ARGUMENT: vadd: missing attribute 'scale' (pass it as a keyword argument of the callable "
                    "jax.ffi.ffi_call returns: ffi_call(...)(x, scale=...); its attrs: scale)"):
        jax.ffi.ffi_call("tj_vadd.vadd", sds((3,)))(x, x)


def test_unexpected_attr(vadd_mod):
    x = np.zeros(3, F32)
    with raises_jax("INVALID_ARGUMENT: vadd: unexpected attribute 'extra' (its attrs: scale)"):
        jax.ffi.ffi_call("tj_vadd.vadd", sds((3,)))(x, x, scale=np.float32(1.25), extra=np.int32(1))


def test_wrong_number_of_inputs_and_results(vadd_mod):
    x = np.zeros(3, F32)
    with raises_jax("INVALID_ARGUMENT: sumdiff: expected 2 inputs (x, y) and 2 results (s, d), got 1 input and 2 "
                    "results"):
        jax.ffi.ffi_call("tj_vadd.sumdiff", (sds((3,)), sds((3,))))(x)
    with raises_jax("INVALID_ARGUMENT: sumdiff: expected 2 inputs (x, y) and 2 results (s, d), got 2 inputs and 1 "
                    "result"):
        jax.ffi.ffi_call("tj_vadd.sumdiff", sds((3,)))(x, x)


# ---------------------------------------------------------------------------
# every attr dtype, end to end
# ---------------------------------------------------------------------------

_CPP = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
        "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t", "float32": "float",
        "float64": "double", "float16": "uint16_t", "bfloat16": "uint16_t", "complex64": "std::complex<float>"}


def _attrs_source_and_functions():
    src = "#include <kjit/kernel.h>\n#include <cstdint>\n#include <complex>\n"
    fns = {}
    for dtype, cpp in _CPP.items():
        # Each kernel stores its attr, as received, in element 0 of the output.
        src += f"void get_{dtype}(const kjit::TensorView x, kjit::TensorView y, {cpp} a) {{ *y.data<{cpp}>() = a; }}\n"
        explicit = dtype in ("float16", "bfloat16")
        fns[f"get_{dtype}"] = ["arg", "ret", f"attr.a:{dtype}" if explicit else "attr.a"]
    return src, fns


@pytest.fixture(scope="module")
def attrs_mod():
    src, fns = _attrs_source_and_functions()
    mod = build("tj_attrs", src, fns, jax=True)
    kjit.jax.register(mod)
    return mod


def get_attr(dtype, out_dtype, value, call=jax.ffi.ffi_call):
    out = call(f"tj_attrs.get_{dtype}", sds((1,), out_dtype))(np.zeros(1, F32), a=value)
    return np.asarray(out)[0]


def test_attrs_module_specs(attrs_mod):
    assert attrs_mod.arg_specs["get_float16"] == ["arg", "ret", "attr.a:float16"]
    assert attrs_mod.arg_specs["get_uint64"] == ["arg", "ret", "attr.a:uint64"]
    assert attrs_mod.functions["get_bool"] == "x: any[...], y: any[...] out, a: bool"


@pytest.mark.parametrize(
    "value",
    [np.bool_(True), np.int8(-128), np.int8(127), np.int16(-32768), np.int16(32767), np.int32(-2**31),
     np.int32(2**31 - 1), np.int64(-2**63), np.int64(2**63 - 1), np.uint8(255), np.uint16(65535),
     np.uint32(2**32 - 1), np.uint64(2**63 - 1), np.float32(1.25), np.float64(-2.5e300)],
    ids=lambda v: f"{type(v).__name__}({v})",
)
def test_attr_matching_numpy_scalar(attrs_mod, value):
    dtype = np.dtype(type(value)).name
    got = get_attr(dtype, np.dtype(type(value)), value)
    assert got == value


def test_bool_false(attrs_mod):
    assert not get_attr("bool", np.bool_, np.bool_(False))


def test_float32_attr_from_float64_rounds(attrs_mod):
    assert get_attr("float32", F32, np.float64(0.1)) == np.float32(0.1)


def test_float16_as_raw_bits(attrs_mod):
    bits = np.float16(1.5).view(np.uint16)
    assert get_attr("float16", np.uint16, bits) == bits


@pytest.mark.parametrize("value", [np.float32(2.5), np.float32(0.1), np.float64(3.75), np.float32(-65504.0)])
def test_float16_from_a_wider_float_rounds_to_half(attrs_mod, value):
    assert get_attr("float16", np.uint16, value) == np.float16(value).view(np.uint16)


def test_float16_through_kjit_ffi_call(attrs_mod):
    assert get_attr("float16", np.uint16, np.float16(5.5), kjit.jax.ffi_call) == np.float16(5.5).view(np.uint16)


def test_bfloat16_as_raw_bits(attrs_mod):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bits = ml_dtypes.bfloat16(1.75).view(np.uint16)
    assert get_attr("bfloat16", np.uint16, bits) == bits


@pytest.mark.parametrize("value", [np.float32(2.75), np.float32(0.3), np.float64(-7.0e10)])
def test_bfloat16_from_a_wider_float_rounds(attrs_mod, value):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert get_attr("bfloat16", np.uint16, value) == ml_dtypes.bfloat16(value).view(np.uint16)


def test_bfloat16_through_kjit_ffi_call(attrs_mod):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    value = ml_dtypes.bfloat16(6.5)
    assert get_attr("bfloat16", np.uint16, value, kjit.jax.ffi_call) == value.view(np.uint16)


def test_xla_itself_rejects_16bit_float_attrs(attrs_mod):
    # Why kjit.jax.ffi_call exists: plain jax.ffi.ffi_call cannot encode np.float16.
    with raises_jax("Unsupported float attribute bit width"):
        get_attr("float16", np.uint16, np.float16(4.25))


def test_complex_attr_takes_a_real_number(attrs_mod):
    assert get_attr("complex64", np.complex64, np.float32(3.0)) == np.complex64(3.0)


def test_complex_attr_through_kjit_ffi_call_says_what_to_do(attrs_mod):
    # jax rejects complex scalar attrs when lowering; kjit.jax.ffi_call says so up front.
    with pytest.raises(TypeError, match=r"^kjit\.jax: JAX cannot pass the complex attr value .*; pass the real and "
                                        r"imaginary parts as two float attrs$"):
        get_attr("complex64", np.complex64, np.complex64(1 + 2j), kjit.jax.ffi_call)


def test_int_attr_out_of_range(attrs_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: get_int8: argument #2 'a': 300 is out of range for int8 "
                    "[-128, 127]"):
        get_attr("int8", np.int8, np.int32(300))
    with raises_jax("INVALID_ARGUMENT: ValueError: get_uint8: argument #2 'a': -1 is out of range for uint8 [0, 255]"):
        get_attr("uint8", np.uint8, np.int32(-1))


def test_float_passed_to_an_int_attr(attrs_mod):
    with raises_jax("INVALID_ARGUMENT: TypeError: get_int32: argument #2 'a': expected an int (int32), got float 2"):
        get_attr("int32", np.int32, np.float32(2.0))


def test_bool_attr_rejects_other_ints(attrs_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: get_bool: argument #2 'a': expected a bool (True/False or 0/1), "
                    "got int 2"):
        get_attr("bool", np.bool_, np.int32(2))


# ---------------------------------------------------------------------------
# kjit's checks through XLA
# ---------------------------------------------------------------------------

CHECKS_SOURCE = r"""
#include <kjit/kernel.h>
#include <stdexcept>
void typed(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i]; }
void pair(const kjit::TensorView x, kjit::TensorView y) {}
void same(const kjit::TensorView x, const kjit::TensorView y, kjit::TensorView z) {}
void blocks(const kjit::TensorView x, kjit::TensorView y) {}
void boom(const kjit::TensorView x, kjit::TensorView y, int32_t k) {
  if (k < 0) throw std::invalid_argument("boom: k must be >= 0, got " + std::to_string(k));
}
void crash(const kjit::TensorView x, kjit::TensorView y) { throw std::runtime_error("crash: kernel failed"); }
"""
CHECKS_FUNCTIONS = {
    "typed": ["arg", "ret", "attr.n"],
    "pair": "x: float32[n], y: float32[n] out",
    "same": "x: float32[n], y: float32[n], z: float32[n] out",
    "blocks": "x: float32[n], y: float32[n] out; n % 4 == 0",
    "boom": ["arg", "ret", "attr.k"],
    "crash": ["arg", "ret"],
}


@pytest.fixture(scope="module")
def checks_mod():
    mod = build("tj_checks", CHECKS_SOURCE, CHECKS_FUNCTIONS, jax=True)
    kjit.jax.register(mod)
    return mod


def call(fn, out, *args, **attrs):
    return np.asarray(jax.ffi.ffi_call(f"tj_checks.{fn}", out)(*args, **attrs))


def test_typed_pointer_kernel_runs(checks_mod):
    x = np.arange(3, dtype=F32)
    np.testing.assert_array_equal(call("typed", sds((3,)), x, n=np.int64(3)), x)


def test_wrong_dtype_against_a_typed_pointer(checks_mod):
    # (float64 would be silently cast to float32 by JAX without x64, so use int32.)
    with raises_jax("INVALID_ARGUMENT: TypeError: typed: argument #0 'x': dtype must be float32, got int32"):
        call("typed", sds((3,)), np.arange(3, dtype=np.int32), n=np.int64(3))


def test_wrong_output_dtype_against_a_typed_pointer(checks_mod):
    with raises_jax("INVALID_ARGUMENT: TypeError: typed: argument #1 'y': dtype must be float32, got int32"):
        call("typed", sds((3,), np.int32), np.arange(3, dtype=F32), n=np.int64(3))


def test_wrong_rank_against_a_signature_string(checks_mod):
    with raises_jax("INVALID_ARGUMENT: TypeError: pair: argument #0 'x': ndim must be 1 (float32[n]), got 2"):
        call("pair", sds((3,)), np.zeros((3, 1), F32))


def test_shape_mismatch_between_inputs(checks_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: same: argument #1 'y': shape[0] must equal n = 3 (bound by "
                    "x.shape[0]), got 4"):
        call("same", sds((3,)), np.zeros(3, F32), np.zeros(4, F32))


def test_result_shape_is_checked_too(checks_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: pair: argument #1 'y': shape[0] must equal n = 3 (bound by "
                    "x.shape[0]), got 5"):
        call("pair", sds((5,)), np.zeros(3, F32))


def test_constraint_from_a_signature_string(checks_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: blocks: constraint 'n % 4 == 0' failed with n = 6 (bound by "
                    "x.shape[0])"):
        call("blocks", sds((6,)), np.zeros(6, F32))
    assert call("blocks", sds((8,)), np.zeros(8, F32)).shape == (8,)


def test_kernel_invalid_argument_reaches_python(checks_mod):
    with raises_jax("INVALID_ARGUMENT: ValueError: boom: k must be >= 0, got -3"):
        call("boom", sds((1,)), np.zeros(1, F32), k=np.int32(-3))


def test_kernel_runtime_error_is_internal(checks_mod):
    with raises_jax("INTERNAL: RuntimeError: crash: kernel failed"):
        call("crash", sds((1,)), np.zeros(1, F32))


# ---------------------------------------------------------------------------
# registration rules
# ---------------------------------------------------------------------------

SMALL_SOURCE = "#include <kjit/kernel.h>\nvoid h(const kjit::TensorView x, kjit::TensorView y) {\n" \
               "  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = 2 * x.data<float>()[i];\n}\n"


def test_module_without_handlers_is_rebuilt_by_register():
    mod = build("tj_plain", SMALL_SOURCE, {"h": ["arg", "ret"]})
    assert not mod.has_xla_handlers
    assert kjit.jax.register(mod) == ["tj_plain.h"]
    x = np.arange(4, dtype=F32)
    np.testing.assert_array_equal(np.asarray(jax.ffi.ffi_call("tj_plain.h", sds((4,)))(x)), 2 * x)
    # the same code loaded with jax=True is the build register made: a no-op
    # (in one process a repeated load returns the already-loaded module, whose cache_hit is that first load's)
    again = build("tj_plain", SMALL_SOURCE, {"h": ["arg", "ret"]}, jax=True)
    assert again.has_xla_handlers
    assert kjit.jax.registered_targets()[("tj_plain.h", "cpu")] == again.key != mod.key
    assert kjit.jax.register(again) == ["tj_plain.h"]


def test_different_build_under_a_registered_name_is_an_error_on_cpu():
    first = build("tj_clash", SMALL_SOURCE, {"h": ["arg", "ret"]}, jax=True)
    assert kjit.jax.register(first) == ["tj_clash.h"]
    second = build("tj_clash", SMALL_SOURCE + "// changed\n", {"h": ["arg", "ret"]}, jax=True)
    assert second.key != first.key
    with pytest.raises(SpecError) as info:
        kjit.jax.register(second)
    assert str(info.value) == (
        f"XLA target 'tj_clash.h' is already registered for platform 'cpu' by a different build of 'tj_clash' "
        f"(key {first.key[:12]}, now {second.key[:12]}); XLA keeps the first handler, so register the new code "
        "under another prefix= or module name")
    # another prefix is the way out
    assert kjit.jax.register(second, prefix="tj_clash2") == ["tj_clash2.h"]


CUDA_SOURCE = "#include <kjit/kernel.h>\nvoid cp(const kjit::TensorView x, kjit::TensorView y, kjit::Stream s) {}\n"
CUDA_FUNCTIONS = {"cp": "x: float32[n] @cuda, y: float32[n] out @cuda, s: stream"}


@pytest.fixture(scope="module")
def cuda_mod():
    return build("tj_cuda", CUDA_SOURCE, CUDA_FUNCTIONS, jax=True)


def test_cuda_module_compiles_with_jax_handlers(cuda_mod):
    assert cuda_mod.has_xla_handlers
    assert cuda_mod.devices == {"cp": "cuda"}
    assert cuda_mod.arg_specs == {"cp": ["arg", "ret", "stream"]}
    assert "__kjit_xla_cp" in cuda_mod.source
    assert "const DLDevice device{kDLCUDA, device_ordinal(frame)};" in cuda_mod.source
    assert "get_stream(frame, &ctx.stream)" in cuda_mod.source


def test_cuda_module_cannot_register_for_cpu(cuda_mod):
    with pytest.raises(SpecError) as info:
        kjit.jax.register(cuda_mod)
    assert str(info.value) == (
        "module 'tj_cuda': function 'cp' takes @cuda tensors, so it cannot be registered for platform 'cpu' "
        "(declare its tensors @cpu, or register with platform='cuda')")


def test_different_build_under_a_registered_name_is_an_error_on_cuda(cuda_mod):
    # jax without CUDA still accepts CUDA targets (XLA's CUDA registry is just a table), so
    # registration succeeds; nothing runs. kjit's own check fires for a different build.
    assert kjit.jax.register(cuda_mod, platform="cuda") == ["tj_cuda.cp"]
    assert kjit.jax.register(cuda_mod, platform="gpu") == ["tj_cuda.cp"]  # alias, same registration
    assert kjit.jax.registered_targets()[("tj_cuda.cp", "CUDA")] == cuda_mod.key
    other = build("tj_cuda", CUDA_SOURCE + "// changed\n", CUDA_FUNCTIONS, jax=True)
    with pytest.raises(SpecError, match=re.escape(
            "XLA target 'tj_cuda.cp' is already registered for platform 'CUDA' by a different build of 'tj_cuda' "
            f"(key {cuda_mod.key[:12]}, now {other.key[:12]})")):
        kjit.jax.register(other, platform="cuda")


def test_cpu_module_cannot_register_for_cuda():
    mod = build("tj_cpuonly", SMALL_SOURCE, {"h": "x: float32[n] @cpu, y: float32[n] out"})
    with pytest.raises(SpecError) as info:
        kjit.jax.register(mod, platform="cuda")
    assert str(info.value) == (
        "module 'tj_cpuonly': function 'h' takes @cpu tensors, so it cannot be registered for platform 'CUDA' "
        "(declare its tensors @cuda, or register with platform='cpu')")
    assert ("tj_cpuonly.h", "CUDA") not in kjit.jax.registered_targets()


@pytest.mark.parametrize("platform", ["tpu", "", "rocm", 3, None])
def test_bad_platform(vadd_mod, platform):
    with pytest.raises(ValueError) as info:
        kjit.jax.register(vadd_mod, platform=platform)
    assert str(info.value) == f"platform must be 'cpu' or 'cuda' (alias 'gpu'), got {platform!r}"
    assert not isinstance(info.value, SpecError)


def test_register_rejects_non_modules():
    with pytest.raises(TypeError, match=r"^register\(\) takes a kjit.Module, got str$"):
        kjit.jax.register("tj_vadd")


def test_targets_outlive_a_collected_module(tmp_path):
    """XLA keeps calling a registered target after its Module was garbage
    collected: the library stays loaded (run in a subprocess: a dlclose would crash)."""
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
    import gc, numpy as np, jax, kjit
    src = '''
    #include <kjit/kernel.h>
    void vadd(const kjit::TensorView x, const kjit::TensorView y, kjit::TensorView z) {
      for (int64_t i = 0; i < z.numel(); ++i) z.data<float>()[i] = x.data<float>()[i] + y.data<float>()[i];
    }
    '''
    mod = kjit.load_inline("gc_jax", cpp_sources=src,
                           functions={"vadd": "x: float32[n], y: float32[n], z: float32[n] out"}, jax=True)
    kjit.jax.register(mod)
    f = mod.jax.vadd
    del mod
    gc.collect()
    x = np.arange(4, dtype=np.float32)
    print(jax.jit(lambda a: jax.ffi.ffi_call("gc_jax.vadd", jax.ShapeDtypeStruct((4,), np.float32))(a, a))(x).tolist())
    print(jax.jit(lambda a: f(a, a, np.zeros(4, np.float32)))(x).tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["[0.0, 2.0, 4.0, 6.0]", "[0.0, 2.0, 4.0, 6.0]"]
