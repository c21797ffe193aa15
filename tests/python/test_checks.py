"""Every check of the generated host stub: what passes, and the exact error when not.

One module holds all the kernels (one compile). Error tests assert the exception type
and the full message, which names the kernel, `#index`, 'name', the field, the
expected value with where it came from, and the value received.
"""

import ctypes

import numpy as np
import pytest

from conftest import build

SOURCE = r"""
#include <kjit/kernel.h>
using kjit::TensorView;

void pair(const TensorView, const TensorView) {}
int64_t as_int(int64_t x) { return x; }
double as_f64(double x) { return x; }
double as_f32(float x) { return x; }
bool as_bool(bool x) { return x; }
int64_t narrow(int8_t a, uint8_t b, int32_t c, uint64_t d) {
  return int64_t{a} + int64_t{b} + int64_t{c} + static_cast<int64_t>(d);
}
void fixed(const TensorView) {}
int64_t bools(const TensorView a) { return a.numel(); }
void f8(const TensorView, const TensorView) {}
void half(const TensorView) {}
int64_t anyt(const TensorView a) { return a.dtype().bits; }
void concat(const TensorView, const TensorView, const TensorView) {}
int64_t odd(const TensorView) { return 0; }
void prod(const TensorView, const TensorView) {}
void late(const TensorView, const TensorView, const TensorView) {}
int64_t sym_after(const TensorView a, int64_t n) { return a.size(0) + n; }
int64_t sym_first(int64_t n, const TensorView a) { return a.size(0) + n; }
void compact(const TensorView) {}
int64_t strided(const TensorView a) { return a.stride(0); }
int64_t lead(const TensorView a) { return a.stride(0); }
void lead2(const TensorView, const TensorView) {}
int64_t offset(const TensorView a) { return static_cast<int64_t>(a.dltensor()->byte_offset); }
void al16(const TensorView) {}
void al64(const TensorView) {}
bool opt(const TensorView, const TensorView bias) { return bias.defined(); }
void unbound(const TensorView, const TensorView) {}
void cons(const TensorView, const TensorView) {}
void divz(const TensorView, const TensorView) {}
void divdim(const TensorView, int64_t, const TensorView) {}
void optdim(const TensorView, const TensorView) {}
"""

FUNCTIONS = {
    "pair": "a: float32[n], b: float32[n]",
    "as_int": "x: int64",
    "as_f64": "x: float64",
    "as_f32": "x: float32",
    "as_bool": "x: bool",
    "narrow": "a: int8, b: uint8, c: int32, d: uint64",
    "fixed": "a: float32[3, 4]",
    "bools": "a: bool[n]",
    "f8": "a: float8_e4m3[n], b: float8_e5m2[n]",
    "half": "a: float16|bfloat16[n]",
    "anyt": "a: any[n]",
    "concat": "a: float32[m], b: float32[n], c: float32[m + n]",
    "odd": "a: float32[2*k + 1]",
    "prod": "a: float32[n], b: float32[n*k]",
    "late": "c: float32[m + n], a: float32[m], b: float32[n]",
    "sym_after": "a: float32[n], n: int64",
    "sym_first": "n: int64, a: float32[n]",
    "compact": "a: float32[m, n]",
    "strided": "a: float32[m, n] strided",
    "lead": "a: float32[m, n] strides[ld, 1]",
    "lead2": "a: float32[m, n] strides[ld, 1], b: float32[m, n] strides[ld, 1]",
    "offset": "a: float32[n]",
    "al16": "a: float32[n] align(16)",
    "al64": "a: float32[n] align(64)",
    "opt": "a: float32[n], bias: float32[n] optional",
    "unbound": "x: float32[m] optional, y: float32[m] optional; m <= 4096",
    "cons": "a: float32[m, k], b: float32[n]; k % 8 == 0, n <= 4096",
    "divz": "a: float32[n], b: float32[d]; n % d == 0",
    "divdim": "a: float32[d], n: int64, b: float32[n / d]",
    "optdim": "x: float32[m] optional, c: float32[m + 1]",
}


@pytest.fixture(scope="module")
def mod():
    return build("checks", SOURCE, FUNCTIONS)


def f32(*shape):
    return np.zeros(shape, np.float32)


def fails(exc, message, fn, *args):
    """Calls fn(*args), expecting exactly `exc(message)`."""
    with pytest.raises(exc) as info:
        fn(*args)
    assert str(info.value) == message
    return info.value


def aligned_f32(n, align, offset_elems=0):
    """A float32 array of n elements whose data sits `offset_elems` past an `align` boundary."""
    raw = np.zeros(n + align, np.float32)
    skip = (-raw.ctypes.data % align) // 4
    out = raw[skip + offset_elems : skip + offset_elems + n]
    assert (out.ctypes.data - offset_elems * 4) % align == 0
    return out


# ---- argument count and kinds ----


def test_count(mod):
    mod.pair(f32(2), f32(2))
    # The stub's own count check, for callers of its tvm-ffi function ...
    fails(TypeError, "pair: expected 2 arguments (a: float32[n], b: float32[n]), got 1", mod.pair.ffi_function, f32(2))
    fails(TypeError, "pair: expected 2 arguments (a: float32[n], b: float32[n]), got 3",
          mod.pair.ffi_function, f32(2), f32(2), f32(2))
    fails(TypeError, "as_int: expected 1 argument (x: int64), got 0", mod.as_int.ffi_function)
    # ... and the call model's, for mod.fn (tests/python/test_call_model.py)
    fails(TypeError, "pair() missing required argument: 'b'", mod.pair, f32(2))
    fails(TypeError, "pair() takes 2 arguments (a, b) but 3 were given", mod.pair, f32(2), f32(2), f32(2))
    fails(TypeError, "as_int() missing required argument: 'x'", mod.as_int)


@pytest.mark.parametrize(
    "value, got",
    [(3, "int 3"), ("x", "a string"), (1.5, "float 1.5"), (True, "bool True")],
)
def test_tensor_kind(mod, value, got):
    fails(TypeError, f"pair: argument #1 'b': expected a tensor (float32[n]), got {got}", mod.pair, f32(2), value)


def test_tensor_none_hints_optional(mod):
    fails(TypeError,
          "pair: argument #0 'a': expected a tensor (float32[n]), got None (declare it 'optional' to accept None)",
          mod.pair, None, f32(2))


def test_optional_tensor(mod):
    assert mod.opt(f32(3), None) is False
    assert mod.opt(f32(3), f32(3)) is True
    fails(TypeError, "opt: argument #1 'bias': expected a tensor or None (float32[n] optional), got int 7",
          mod.opt, f32(3), 7)
    fails(ValueError, "opt: argument #1 'bias': shape[0] must equal n = 3 (bound by a.shape[0]), got 4",
          mod.opt, f32(3), f32(4))
    fails(TypeError, "opt: argument #1 'bias': dtype must be float32, got float64",
          mod.opt, f32(3), np.zeros(3, np.float64))


# ---- scalars ----


def test_int_scalar_accepts(mod):
    assert mod.as_int(5) == 5
    assert mod.as_int(-(2**63)) == -(2**63)
    assert mod.as_int(True) == 1
    assert mod.as_int(np.int64(7)) == 7


def test_int_scalar_rejects_float(mod):
    fails(TypeError, "as_int: argument #0 'x': expected an int (int64), got float 1.5", mod.as_int, 1.5)
    fails(TypeError, "as_int: argument #0 'x': expected an int (int64), got None", mod.as_int, None)
    fails(TypeError, "as_int: argument #0 'x': expected an int (int64), got a numpy.ndarray", mod.as_int, f32(1))


def test_float_scalar_accepts(mod):
    assert mod.as_f64(2.5) == 2.5
    assert mod.as_f64(3) == 3.0
    assert mod.as_f64(True) == 1.0
    assert mod.as_f32(np.float32(1.5)) == 1.5
    assert mod.as_f32(0.1) == float(np.float32(0.1))  # narrowed to the declared float32


def test_float_scalar_rejects(mod):
    fails(TypeError, "as_f64: argument #0 'x': expected a float (float64), got a string", mod.as_f64, "1.0")
    fails(TypeError, "as_f32: argument #0 'x': expected a float (float32), got None", mod.as_f32, None)


def test_bool_scalar(mod):
    assert mod.as_bool(True) is True
    assert mod.as_bool(False) is False
    assert mod.as_bool(1) is True
    assert mod.as_bool(0) is False
    fails(ValueError, "as_bool: argument #0 'x': expected a bool (True/False or 0/1), got int 2", mod.as_bool, 2)
    fails(TypeError, "as_bool: argument #0 'x': expected a bool (bool), got float 1", mod.as_bool, 1.0)


def test_narrow_int_ranges(mod):
    assert mod.narrow(-128, 255, 2**31 - 1, 5) == -128 + 255 + 2**31 - 1 + 5
    assert mod.narrow(127, 0, -(2**31), 2**63 - 1) == 127 - 2**31 + 2**63 - 1
    fails(ValueError, "narrow: argument #0 'a': 300 is out of range for int8 [-128, 127]",
          mod.narrow, 300, 0, 0, 0)
    fails(ValueError, "narrow: argument #1 'b': -1 is out of range for uint8 [0, 255]", mod.narrow, 0, -1, 0, 0)
    fails(ValueError, "narrow: argument #2 'c': 2147483648 is out of range for int32 [-2147483648, 2147483647]",
          mod.narrow, 0, 0, 2**31, 0)
    fails(ValueError, "narrow: argument #3 'd': -1 is out of range for uint64 [0, 18446744073709551615]",
          mod.narrow, 0, 0, 0, -1)


# ---- rank and dtype ----


def test_ndim(mod):
    fails(TypeError, "pair: argument #1 'b': ndim must be 1 (float32[n]), got 2", mod.pair, f32(2), f32(2, 1))
    fails(TypeError, "fixed: argument #0 'a': ndim must be 2 (float32[3, 4]), got 0", mod.fixed, f32())


def test_dtype(mod):
    fails(TypeError, "pair: argument #0 'a': dtype must be float32, got float64",
          mod.pair, np.zeros(2, np.float64), f32(2))
    fails(TypeError, "pair: argument #1 'b': dtype must be float32, got int32",
          mod.pair, f32(2), np.zeros(2, np.int32))


def test_bool_dtype_tolerance(mod):
    assert mod.bools(np.zeros(3, np.bool_)) == 3
    assert mod.bools(np.zeros(3, np.int8)) == 3
    assert mod.bools(np.zeros(3, np.uint8)) == 3
    fails(TypeError, "bools: argument #0 'a': dtype must be bool, got int16", mod.bools, np.zeros(3, np.int16))
    fails(TypeError, "bools: argument #0 'a': dtype must be bool, got float32", mod.bools, f32(3))


def test_dtype_alternatives(mod):
    mod.half(np.zeros(2, np.float16))
    fails(TypeError, "half: argument #0 'a': dtype must be one of float16, bfloat16, got float32", mod.half, f32(2))


def test_any_dtype(mod):
    assert mod.anyt(np.zeros(2, np.int64)) == 64
    assert mod.anyt(np.zeros(2, np.complex64)) == 64
    assert mod.anyt(np.zeros(2, np.bool_)) == 8
    fails(TypeError, "anyt: argument #0 'a': ndim must be 1 (any[n]), got 2", mod.anyt, np.zeros((1, 1), np.int8))


# ---- shapes ----


def test_shape_literal(mod):
    mod.fixed(f32(3, 4))
    fails(ValueError, "fixed: argument #0 'a': shape[1] must equal 4 (fixed by the signature), got 5",
          mod.fixed, f32(3, 5))
    fails(ValueError, "fixed: argument #0 'a': shape[0] must equal 3 (fixed by the signature), got 2",
          mod.fixed, f32(2, 4))


def test_symbol_bound_by_earlier_tensor(mod):
    mod.pair(f32(5), f32(5))
    mod.pair(f32(0), f32(0))
    fails(ValueError, "pair: argument #1 'b': shape[0] must equal n = 5 (bound by a.shape[0]), got 4",
          mod.pair, f32(5), f32(4))


def test_linear_sum(mod):
    mod.concat(f32(2), f32(3), f32(5))
    fails(ValueError,
          "concat: argument #2 'c': shape[0] must equal m + n = 5 with m = 2 (bound by a.shape[0]), "
          "n = 3 (bound by b.shape[0]), got 6",
          mod.concat, f32(2), f32(3), f32(6))


def test_linear_solve(mod):
    mod.odd(f32(7))
    mod.odd(f32(1))
    fails(ValueError, "odd: argument #0 'a': shape[0] = 4 does not match 2*k + 1 for any integer k >= 0",
          mod.odd, f32(4))
    fails(ValueError, "odd: argument #0 'a': shape[0] = 0 does not match 2*k + 1 for any integer k >= 0",
          mod.odd, f32(0))


def test_product_solve(mod):
    mod.prod(f32(3), f32(12))
    mod.prod(f32(3), f32(0))
    fails(ValueError,
          "prod: argument #1 'b': shape[0] = 10 does not match n*k for any integer k >= 0 "
          "(with n = 3 (bound by a.shape[0]))",
          mod.prod, f32(3), f32(10))


def test_product_solve_zero_coefficient(mod):
    # 0 == 0*k holds for every k, so an empty b must be accepted when n = 0.
    mod.prod(f32(0), f32(0))


def test_product_solve_zero_coefficient_nonzero_dim(mod):
    fails(ValueError,
          "prod: argument #1 'b': shape[0] = 3 does not match n*k for any integer k >= 0 "
          "(with n = 0 (bound by a.shape[0]))",
          mod.prod, f32(0), f32(3))


def test_two_unknowns_solved_after_later_params(mod):
    mod.late(f32(5), f32(2), f32(3))
    fails(ValueError,
          "late: argument #0 'c': shape[0] must equal m + n = 5 with m = 2 (bound by a.shape[0]), "
          "n = 3 (bound by b.shape[0]), got 6",
          mod.late, f32(6), f32(2), f32(3))


def test_scalar_named_like_symbol(mod):
    assert mod.sym_after(f32(3), 3) == 6
    fails(ValueError, "sym_after: argument #1 'n': value must equal n = 3 (bound by a.shape[0]), got 4",
          mod.sym_after, f32(3), 4)
    assert mod.sym_first(3, f32(3)) == 6
    fails(ValueError, "sym_first: argument #1 'a': shape[0] must equal n = 4 (bound by argument 'n'), got 3",
          mod.sym_first, 4, f32(3))


def test_dim_division_by_zero(mod):
    mod.divdim(f32(2), 6, f32(3))
    fails(ValueError, "divdim: argument #2 'b': shape[0] must equal n / d = 3 with d = 2 (bound by a.shape[0]), "
                      "n = 6 (bound by argument 'n'), got 4", mod.divdim, f32(2), 6, f32(4))
    fails(ValueError, "divdim: b.shape[0] divides by zero: d = 0 (bound by a.shape[0])",
          mod.divdim, f32(0), 6, f32(3))


# ---- strides ----


def test_compact_default(mod):
    mod.compact(f32(3, 4))
    mod.compact(f32(6, 4)[::2][:1])  # one row: its stride never matters
    mod.compact(f32(0, 4).T)  # empty tensors always pass
    fails(ValueError,
          "compact: argument #0 'a': strides[1] must be 1 for a compact row-major tensor, got 4 "
          "(pass a contiguous copy, or declare 'a' strided to accept any layout)",
          mod.compact, f32(3, 4).T)
    fails(ValueError,
          "compact: argument #0 'a': strides[0] must be 4 for a compact row-major tensor, got 8 "
          "(pass a contiguous copy, or declare 'a' strided to accept any layout)",
          mod.compact, f32(6, 4)[::2])


def test_strided_accepts_any_layout(mod):
    assert mod.strided(f32(3, 4).T) == 1
    assert mod.strided(f32(6, 4)[::2]) == 8
    assert mod.strided(f32(3, 4)) == 4


def test_explicit_strides_bind_ld(mod):
    assert mod.lead(f32(3, 4)) == 4
    assert mod.lead(f32(3, 10)[:, :4]) == 10
    fails(ValueError, "lead: argument #0 'a': strides[1] must equal 1 (fixed by the signature), got 3",
          mod.lead, f32(4, 3).T)


def test_explicit_stride_symbol_shared(mod):
    mod.lead2(f32(3, 8)[:, :4], f32(3, 8)[:, 2:6])
    fails(ValueError, "lead2: argument #1 'b': strides[0] must equal ld = 8 (bound by a.strides[0]), got 4",
          mod.lead2, f32(3, 8)[:, :4], f32(3, 4))


def test_align(mod):
    mod.al16(aligned_f32(8, 16))
    mod.al64(aligned_f32(8, 64))
    bad = aligned_f32(8, 64, offset_elems=1)
    with pytest.raises(ValueError) as info:
        mod.al16(bad)
    msg = str(info.value)
    assert msg.startswith("al16: argument #0 'a': data pointer 0x")
    assert msg.endswith(" must be aligned to 16 bytes, but is aligned to 4")
    assert f"{bad.ctypes.data:x}" in msg
    bad16 = aligned_f32(8, 64, offset_elems=4)  # 16-byte but not 64-byte aligned
    mod.al16(bad16)
    with pytest.raises(ValueError, match=r"^al64: argument #0 'a': data pointer 0x[0-9a-f]+ must be aligned to "
                                         r"64 bytes, but is aligned to 16$"):
        mod.al64(bad16)


# ---- hand-built DLTensors: byte_offset and NULL data ----


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class RawF32Vector:
    """A DLPack producer over a hand-built 1-D float32 DLTensor (no deleter; keep it alive)."""

    def __init__(self, data, n, byte_offset=0):
        self._shape = (ctypes.c_int64 * 1)(n)
        self._managed = _DLManagedTensor()
        self._managed.dl_tensor = _DLTensor(data, _DLDevice(1, 0), 1, _DLDataType(2, 32, 1), self._shape, None,
                                            byte_offset)

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)


def raw_tensor(data, n, byte_offset=0):
    tvm_ffi = pytest.importorskip("tvm_ffi")
    producer = RawF32Vector(data, n, byte_offset)
    tensor = tvm_ffi.from_dlpack(producer)
    return producer, tensor


def test_byte_offset(mod):
    buf = f32(8)
    keep, ok = raw_tensor(buf.ctypes.data, 4, byte_offset=8)
    if mod.offset(ok) != 8:
        pytest.skip("tvm_ffi.from_dlpack folds byte_offset into the data pointer; cannot build the case")
    keep2, bad = raw_tensor(buf.ctypes.data, 4, byte_offset=2)
    fails(ValueError, "offset: argument #0 'a': byte_offset must be a multiple of the element size 4, got 2",
          mod.offset, bad)


def test_null_data(mod):
    keep, empty = raw_tensor(None, 0)
    mod.offset(empty)  # an empty tensor may have no data
    keep2, null = raw_tensor(None, 4)
    fails(ValueError, "offset: argument #0 'a': data pointer is NULL but the tensor is not empty", mod.offset, null)


# Device checks (device_type, device_id) need a GPU or a second device: not tested here.


# ---- optional carriers and constraints ----


def test_symbol_only_in_optional_tensors(mod):
    mod.unbound(f32(3), None)
    mod.unbound(None, f32(3))
    mod.unbound(f32(3), f32(3))
    fails(ValueError, "unbound: argument #1 'y': shape[0] must equal m = 3 (bound by x.shape[0]), got 2",
          mod.unbound, f32(3), f32(2))
    fails(ValueError, "unbound: constraint 'm <= 4096' failed with m = 5000 (bound by y.shape[0])",
          mod.unbound, None, f32(5000))
    fails(ValueError, "unbound: symbol 'm' is needed but no argument determined it (it is carried by x, y; "
                      "a None tensor or a zero factor such as n = 0 in n*k leaves it open)",
          mod.unbound, None, None)


def test_symbol_from_optional_then_required_dim(mod):
    mod.optdim(f32(2), f32(3))
    mod.optdim(None, f32(3))  # c is present and carries m: m = 2, nothing is unbound


def test_constraints(mod):
    mod.cons(f32(2, 16), f32(4096))
    fails(ValueError, "cons: constraint 'k % 8 == 0' failed with k = 12 (bound by a.shape[1])",
          mod.cons, f32(2, 12), f32(1))
    fails(ValueError, "cons: constraint 'n <= 4096' failed with n = 4097 (bound by b.shape[0])",
          mod.cons, f32(2, 8), f32(4097))


def test_constraint_division_by_zero(mod):
    mod.divz(f32(6), f32(3))
    fails(ValueError, "divz: constraint 'n % d == 0' failed with d = 4 (bound by b.shape[0]), "
                      "n = 6 (bound by a.shape[0])", mod.divz, f32(6), f32(4))
    fails(ValueError, "divz: constraint 'n % d == 0' divides by zero: d = 0 (bound by b.shape[0])",
          mod.divz, f32(6), f32(0))


# ---- the same checks with PyTorch tensors ----


def test_torch_tensors(mod):
    torch = pytest.importorskip("torch")
    z = lambda *s: torch.zeros(*s, dtype=torch.float32)  # noqa: E731
    mod.pair(z(4), z(4))
    fails(TypeError, "pair: argument #1 'b': dtype must be float32, got float64",
          mod.pair, z(4), torch.zeros(4, dtype=torch.float64))
    fails(TypeError, "pair: argument #1 'b': ndim must be 1 (float32[n]), got 2", mod.pair, z(4), z(4, 1))
    fails(ValueError, "pair: argument #1 'b': shape[0] must equal n = 4 (bound by a.shape[0]), got 3",
          mod.pair, z(4), z(3))
    fails(ValueError, "fixed: argument #0 'a': shape[1] must equal 4 (fixed by the signature), got 5",
          mod.fixed, z(3, 5))
    fails(ValueError,
          "compact: argument #0 'a': strides[1] must be 1 for a compact row-major tensor, got 4 "
          "(pass a contiguous copy, or declare 'a' strided to accept any layout)",
          mod.compact, z(3, 4).t())
    assert mod.strided(z(3, 4).t()) == 1
    assert mod.opt(z(2), None) is False
    assert mod.opt(z(2), z(2)) is True
    fails(ValueError, "cons: constraint 'k % 8 == 0' failed with k = 12 (bound by a.shape[1])",
          mod.cons, z(2, 12), z(1))
    assert mod.bools(torch.zeros(3, dtype=torch.bool)) == 3
    mod.half(torch.zeros(2, dtype=torch.bfloat16))
    mod.half(torch.zeros(2, dtype=torch.float16))


def test_torch_extent_one_strides_never_fail(mod):
    torch = pytest.importorskip("torch")
    row = torch.zeros(5).expand(1, 5)  # strides (0, 1)
    mod.compact(row)
    sliced = torch.zeros(3, 10)[1:2, :5]  # shape (1, 5), strides (10, 1)
    mod.compact(sliced)
    col = torch.zeros(100).as_strided((4, 1), (1, 7))  # shape (4, 1), strides (1, 7)
    mod.compact(col)
    assert mod.lead(torch.zeros(100).as_strided((4, 1), (9, 3))) == 9  # strides[1] == 1 skipped on extent 1


def test_torch_float8_families(mod):
    torch = pytest.importorskip("torch")
    e4 = lambda dt: torch.zeros(2, dtype=dt)  # noqa: E731
    mod.f8(e4(torch.float8_e4m3fn), e4(torch.float8_e5m2))
    mod.f8(e4(torch.float8_e4m3fnuz), e4(torch.float8_e5m2fnuz))
    fails(TypeError, "f8: argument #0 'a': dtype must be float8_e4m3, got float8_e5m2",
          mod.f8, e4(torch.float8_e5m2), e4(torch.float8_e5m2))
    fails(TypeError, "f8: argument #1 'b': dtype must be float8_e5m2, got float8_e4m3fn",
          mod.f8, e4(torch.float8_e4m3fn), e4(torch.float8_e4m3fn))


# ---- and with tvm_ffi tensors ----


def test_tvm_ffi_tensors(mod):
    tvm_ffi = pytest.importorskip("tvm_ffi")
    t = lambda a: tvm_ffi.from_dlpack(a)  # noqa: E731
    mod.pair(t(f32(4)), f32(4))
    fails(TypeError, "pair: argument #0 'a': dtype must be float32, got int64",
          mod.pair, t(np.zeros(4, np.int64)), f32(4))
    fails(ValueError, "pair: argument #1 'b': shape[0] must equal n = 4 (bound by a.shape[0]), got 2",
          mod.pair, t(f32(4)), t(f32(2)))
    fails(ValueError, "concat: argument #2 'c': shape[0] must equal m + n = 5 with m = 2 (bound by a.shape[0]), "
                      "n = 3 (bound by b.shape[0]), got 4", mod.concat, t(f32(2)), t(f32(3)), t(f32(4)))
    fails(ValueError,
          "compact: argument #0 'a': strides[1] must be 1 for a compact row-major tensor, got 4 "
          "(pass a contiguous copy, or declare 'a' strided to accept any layout)",
          mod.compact, t(f32(3, 4).T))
    assert mod.opt(t(f32(2)), None) is False
    assert mod.opt(t(f32(2)), t(f32(2))) is True
