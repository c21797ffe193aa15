"""Malformed DLPack tensors from Python (issue 12): an object whose __dlpack__
hands out a DLTensor with a negative extent, 0 bits, 0 lanes or a size beyond
int64 is a ValueError naming the argument; the kernel never runs.

The capsules are built with ctypes, as a buggy or hostile producer would make
them. Each call runs in a subprocess, so a regression fails one test instead of
killing pytest. Two shapes of malformed tensor (negative ndim, a NULL shape with
ndim > 0) are left out: tvm-ffi's own DLPack import corrupts the heap on them
before any kjit code runs (docs/reliability.md); kjit's stubs reject them when
they arrive by C++ (tests/cpp/test_check_guarantees.cc).
"""

import pytest

from test_check_guarantees import run_isolated

PRODUCER = '''
import ctypes
import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]
NO_DELETE = DELETER(lambda p: None)
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class Crafted:
    """A CPU float32-coded tensor over 16 zeros with the given (bad) fields."""

    def __init__(self, shape, bits=32, lanes=1):
        self.buf = np.zeros(16, np.float32)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        m = DLManagedTensor()
        m.dl_tensor.data = self.buf.ctypes.data
        m.dl_tensor.device = DLDevice(1, 0)
        m.dl_tensor.ndim = len(shape)
        m.dl_tensor.dtype = DLDataType(2, bits, lanes)
        m.dl_tensor.shape = self.shape
        m.deleter = NO_DELETE
        self.m = m

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        return capsule_new(ctypes.addressof(self.m), b"dltensor", None)
'''

CALL = '''
import kjit
mod = kjit.load_inline(
    "malformed_py",
    cpp_sources="""
        #include <kjit/kernel.h>
        int64_t first(const kjit::TensorView a) { throw std::runtime_error("the kernel ran"); }
        int64_t any_rank(const kjit::TensorView a) { throw std::runtime_error("the kernel ran"); }
    """,
    functions={"first": "a: float32[n] strided", "any_rank": "a: any[...] strided"})
try:
    getattr(mod, FN)(Crafted(SHAPE, BITS, LANES))
except ValueError as e:
    print("ValueError:", e)
'''

CASES = {
    "negative extent": ("first", (-3,), 32, 1,
                        "first: argument #0 'a': malformed DLTensor: an extent (shape[i]) is negative (ndim 1, "
                        "shape [-3], dtype code 2 bits 32 lanes 1)"),
    "zero bits": ("any_rank", (4,), 0, 1,
                  "any_rank: argument #0 'a': malformed DLTensor: dtype has 0 bits (ndim 1, shape [4], dtype code 2 "
                  "bits 0 lanes 1)"),
    "zero lanes": ("any_rank", (4,), 32, 0,
                   "any_rank: argument #0 'a': malformed DLTensor: dtype has 0 lanes (ndim 1, shape [4], dtype code "
                   "2 bits 32 lanes 0)"),
    "size beyond int64": ("any_rank", (2**40, 2**40), 32, 1,
                          "any_rank: argument #0 'a': malformed DLTensor: the size in bytes (product of the extents "
                          "and the element size) overflows int64 (ndim 2, shape [1099511627776, 1099511627776], "
                          "dtype code 2 bits 32 lanes 1)"),
}


@pytest.mark.parametrize("fn, shape, bits, lanes, message", CASES.values(), ids=list(CASES))
def test_malformed_dlpack_is_a_value_error_naming_the_argument(fn, shape, bits, lanes, message):
    code = PRODUCER + f"FN, SHAPE, BITS, LANES = {fn!r}, {shape!r}, {bits}, {lanes}\n" + CALL
    status, out = run_isolated(code)
    assert status == 0, out
    assert "the kernel ran" not in out, out
    assert f"ValueError: {message}" in out, out
