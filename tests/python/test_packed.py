"""Packed sub-byte storage as TileLang defines it (bits * lanes < 8): an `int4[n]`
tensor accepts int4 itself or the bytes that carry it (uint8/int8, two values per
byte), its last dim counted in values, and is checked by total bits."""

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <cstdint>
#include <kjit/kernel.h>
// n int4 values, low nibble first, two per byte.
int64_t sum_int4(const uint8_t* x, int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) {
    int v = (x[i / 2] >> (4 * (i % 2))) & 0xF;
    s += v >= 8 ? v - 16 : v;
  }
  return s;
}
int64_t rows_values(const kjit::TensorView w, int64_t k, int64_t n) { return k * 1000 + n + 0 * w.ndim(); }
int64_t after(const float* y, const uint8_t* x) { (void)y; (void)x; return 0; }
int64_t fixed(const uint8_t* x) { (void)x; return 8; }
int64_t fp6(const uint8_t* x, int64_t n) { (void)x; return n; }
int64_t fp4(const kjit::TensorView x, int64_t n) { return n * 10 + x.dtype().lanes; }
"""

FUNCTIONS = {
    "sum_int4": "x: int4[n], n: int64 symbol",
    "rows_values": "w: int4|uint4[k, n] strided, k: int64 symbol, n: int64 symbol",
    "after": "y: float32[n], x: int4[n]",
    "fixed": "x: uint4[8]",
    "fp6": "x: float6_e2m3fn[n], n: int64 symbol",
    "fp4": "x: float4_e2m1fn[n], n: int64 symbol",
}


@pytest.fixture(scope="module")
def mod():
    return build("packed", SRC, FUNCTIONS)


def nibbles(values):
    """int4 values packed two per byte, low nibble first (an even count)."""
    v = np.asarray(values, dtype=np.int64) & 0xF
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8)


def test_bytes_carry_two_int4_values_each(mod):
    x = nibbles([1, -2, 3, 7, -8, 0])
    assert mod.sum_int4(x) == 1
    assert mod.sum_int4(x.view(np.int8)) == 1  # int8 bytes too
    assert mod.rows_values(np.zeros((3, 4), np.uint8)) == 3008  # the last dim counts values


def test_torch_uint8_and_float4_x2(mod):
    torch = pytest.importorskip("torch")
    assert mod.sum_int4(torch.from_numpy(nibbles([5, 6, -1, 0]))) == 10
    if hasattr(torch, "float4_e2m1fn_x2"):  # one byte holding two fp4 values, lanes 2 in DLPack
        assert mod.fp4(torch.empty(3, dtype=torch.float4_e2m1fn_x2)) == 62
    assert mod.fp4(torch.zeros(3, dtype=torch.uint8)) == 61


def test_outer_dims_may_be_strided_the_packed_dim_not(mod):
    big = np.zeros((4, 10), np.uint8)
    assert mod.rows_values(big[::2, :3]) == 2006
    with pytest.raises(ValueError) as err:
        mod.rows_values(big[:, ::2])
    assert str(err.value) == (
        "rows_values: argument #0 'w': strides[1] must be 1: the last dim packs int4|uint4 values and must be "
        "contiguous, got 2 (pass a contiguous copy)")
    with pytest.raises(ValueError) as err:
        mod.sum_int4(np.zeros(8, np.uint8)[::2])
    assert "strides[0] must be 1: the last dim packs int4 values and must be contiguous, got 2" in str(err.value)


def test_total_bits_must_match(mod):
    with pytest.raises(ValueError) as err:
        mod.after(np.zeros(5, np.float32), np.zeros(3, np.uint8))
    assert str(err.value) == (
        "after: argument #1 'x': shape[0] counts int4 values and must equal n = 5 (bound by y.shape[0]), got 6: "
        "3 bytes of uint8 hold 24 bits, not the 20 bits of 5 int4 values")
    assert mod.after(np.zeros(6, np.float32), np.zeros(3, np.uint8)) == 0
    with pytest.raises(ValueError) as err:
        mod.fixed(np.zeros(3, np.uint8))
    assert str(err.value) == (
        "fixed: argument #0 'x': shape[0] counts uint4 values and must equal 8 (fixed by the signature), got 6: "
        "3 bytes of uint8 hold 24 bits, not the 32 bits of 8 uint4 values")
    assert mod.fixed(np.zeros(4, np.uint8)) == 8


def test_six_bit_values_fill_whole_bytes_in_threes(mod):
    assert mod.fp6(np.zeros(6, np.uint8)) == 8
    with pytest.raises(ValueError) as err:
        mod.fp6(np.zeros(4, np.uint8))
    assert str(err.value) == (
        "fp6: argument #0 'x': its last dim of 4 bytes of uint8 holds 32 bits, not a whole number of 6-bit "
        "float6_e2m3fn values (pass a multiple of 3 bytes)")


@pytest.mark.parametrize("dtype, got", [(np.float32, "float32"), (np.uint16, "uint16")])
def test_wrong_carrier_dtype(mod, dtype, got):
    with pytest.raises(TypeError) as err:
        mod.sum_int4(np.zeros(4, dtype))
    assert str(err.value) == (
        f"sum_int4: argument #0 'x': dtype must be int4 (or int8/uint8 bytes packing its values, 2 per byte), got {got}")


def test_builder_and_canonical_text():
    spec = kjit.Spec("sum_int4").tensor("x", "int4", ["n"]).symbol("n")
    assert spec.signature() == "x: int4[n], n: int64 symbol"
    assert kjit.parse_signature("w: uint4|int4[k, 2*m] strided") == "w: uint4|int4[k, 2*m] strided"


@pytest.mark.parametrize(
    "signature, message",
    [
        ("x: int4|int8[n]",
         "tensor 'x': packed dtype int4 cannot be listed with int8 (a uint8/int8 tensor would hold either); list "
         "packed dtypes of one width only"),
        ("x: int4|int2[n]", "packed dtype int4 cannot be listed with int2"),
        ("x: int4[]", "tensor 'x' is packed (int4) and needs rank >= 1: its last dim counts the packed values"),
        ("x: int4[m, n] strides[s, 1]",
         "tensor 'x' is packed (int4): strides[...] would mix bytes and values; declare it 'strided' (its last dim "
         "stays contiguous)"),
        ("x: float32[n], y: int4[n] return",
         "returned tensor 'y' is packed (int4), which kjit cannot allocate (NumPy and torch have no such dtype); "
         "pass it as an out tensor of uint8 bytes"),
        ("x: int4[n], y: dtype(x)[n] return",
         "returned tensor 'y': dtype(x) names packed tensor 'x', whose storage dtype says nothing of its values; "
         "write the returned dtype"),
        ("x: int4[n], y: float32[n] return",
         "returned tensor 'y': symbol 'n' of its shape must be a whole dim of an input tensor"),
    ],
)
def test_spec_errors(signature, message):
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature(signature, name="f")
    assert message in str(err.value)


def test_jax_passes_int4_itself_or_bytes():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp  # noqa: PLC0415

    import kjit.jax  # noqa: PLC0415

    src = ("#include <kjit/kernel.h>\n"
           "void cnt(const kjit::TensorView x, int64_t n, kjit::TensorView out) {\n"
           "  out.data<int32_t>()[0] = static_cast<int32_t>(n * 100 + x.dtype().bits);\n}\n")
    mod = build("tj_packed", src, {"cnt": "x: int4[n], n: int64 symbol, out: int32[1] out"}, jax=True)
    kjit.jax.register(mod)
    call = jax.ffi.ffi_call("tj_packed.cnt", jax.ShapeDtypeStruct((1,), jnp.int32))
    assert int(call(jnp.zeros(5, dtype=jnp.int4))[0]) == 504  # XLA's S4: shape in values
    assert int(call(jnp.zeros(3, dtype=jnp.uint8))[0]) == 608  # bytes: two values each
