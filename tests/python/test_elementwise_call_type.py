"""kjit._call.Computation, the object kjit.elementwise returns: which calls run in C
(NumPy arrays and CPU torch tensors straight into the call function's C ABI, other
torch calls through tvm-ffi's call), which go to the checked path in Python, and what
the C path must keep: the errors and their types, results that own their memory, the
same values and dtypes. `_direct_calls`, `_ffi_calls` and `_checked_calls` count the
paths."""

from __future__ import annotations

import gc
import inspect
import sys
import threading

import numpy as np
import pytest

import kjit
from kjit._lib import call_type

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
DIVMOD = "template <typename T> void dm(T a, T b, T& q, T& r) { q = a / b; r = a - q * b; }"
AXPY = "template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"


@pytest.fixture(scope="module")
def add():
    return kjit.elementwise(ADD)


@pytest.fixture(scope="module")
def axpy():
    return kjit.elementwise("template <typename T> T axpy(T x, T y, double alpha) { return T(alpha) * x + y; }")


@pytest.fixture(scope="module")
def divmod_kernel():
    return kjit.elementwise(DIVMOD, num_outputs=2)


def paths(f):
    return f._direct_calls, f._ffi_calls, f._checked_calls


def moved(f, before):
    return tuple(b - a for a, b in zip(before, paths(f)))


def test_the_function_is_the_c_call_type(add):
    assert type(add) is call_type.Computation
    assert add.name == "add" and add.__name__ == "add" and add.__qualname__ == "kjit.elementwise[add]"
    assert repr(add) == "<function kjit.elementwise[add]>"
    assert str(inspect.signature(add)) == "(*inputs, out=None, **extras)"


@pytest.mark.parametrize("repeat", range(2))  # the first call makes the class's call function
def test_common_numpy_calls_run_in_c(add, axpy, divmod_kernel, repeat):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones(3, np.float32)
    before = paths(add)
    np.testing.assert_array_equal(add(x, y), x + y)
    out = np.empty_like(x)
    assert add(x, y, out=out) is out
    np.testing.assert_array_equal(out, x + y)
    assert add(x, 2.5).dtype == np.float32  # a Python scalar stays weak
    np.testing.assert_array_equal(add(x, y, out=None), x + y)
    assert moved(add, before) == (4, 0, 0)

    before = paths(axpy)
    np.testing.assert_array_equal(axpy(x, y, alpha=2.0), 2 * x + y)
    assert axpy(x, y, out=out, alpha=3) is out
    np.testing.assert_array_equal(out, 3 * x + y)
    assert moved(axpy, before) == (2, 0, 0)

    a, b = np.arange(1, 7, dtype=np.int64), np.full(6, 4, np.int64)
    before = paths(divmod_kernel)
    q, r = divmod_kernel(a, b)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)
    outs = (np.empty_like(a), np.empty_like(a))
    assert divmod_kernel(a, b, out=outs) is outs
    np.testing.assert_array_equal(outs[1], a % b)
    assert moved(divmod_kernel, before) == (2, 0, 0)


class Sub(np.ndarray):
    pass


@pytest.mark.parametrize("case", ["read-only", "numpy scalar", "subclass", "big int", "uint64 int", "0-d",
                                  "strided bytes", "list out", "str extra", "tuple out of one"])
def test_calls_the_c_path_does_not_take_go_to_the_checked_path(add, axpy, case):
    x = np.arange(4, dtype=np.float32)
    before = paths(add)
    if case == "read-only":  # an input the kernel only reads: the C path since issue 38; a read-only out is not
        ro = x.copy()
        ro.flags.writeable = False
        np.testing.assert_array_equal(add(x, ro), x + x)
        assert moved(add, before) == (1, 0, 0)
        with pytest.raises(ValueError, match="read-only"):
            add(x, x, out=ro)
        assert moved(add, before)[2] == 1
        return
    elif case == "numpy scalar":  # strong under NumPy's rules: float64
        assert add(x, np.float64(1.0)).dtype == np.float64
    elif case == "subclass":
        got = add(x.view(Sub), x)
        np.testing.assert_array_equal(got, x + x)
    elif case == "big int":
        with pytest.raises(OverflowError, match="Python integer 18446744073709551616 out of bounds for int64"):
            add(np.arange(3), 2**64)
    elif case == "uint64 int":
        got = add(np.arange(3, dtype=np.uint64), 2**63)
        assert got.dtype == np.uint64 and got[1] == 2**63 + 1
    elif case == "0-d":  # NumPy returns a NumPy scalar for 0-d results
        got = add(np.array(1.5), np.array(2.0))
        assert type(got) is np.float64 and got == 3.5
    elif case == "strided bytes":  # a record field: strides that are not whole elements
        rec = np.zeros(4, dtype=[("a", "<f4"), ("b", "i1")])
        with pytest.raises(ValueError, match="argument #0 has a byte stride 5 that is not a multiple of its element "
                                             "size 4"):
            add(rec["a"], x)
    elif case == "list out":
        out = [np.empty(4, np.float32)]
        assert add(x, x, out=out) is out
        np.testing.assert_array_equal(out[0], x + x)
    elif case == "str extra":
        before = paths(axpy)
        with pytest.raises(TypeError, match="extra argument 'alpha' must be a scalar, got str"):
            axpy(x, x, alpha="2")
        assert moved(axpy, before)[2] == 1
        return
    elif case == "tuple out of one":
        out = np.empty(4, np.float32)
        assert add(x, x, out=(out,)) == (out,)
        np.testing.assert_array_equal(out, x + x)
    assert moved(add, before)[2] == 1


def test_non_native_byte_order_is_named(add):
    x = np.arange(3, dtype=">f4")
    with pytest.raises(TypeError, match=r"input #0 has dtype >f4, a non-native byte order"):
        add(x, x)


@pytest.mark.parametrize("repeat", range(2))
def test_errors_of_the_c_path_keep_their_types_and_messages(add, repeat):
    x = np.arange(8, dtype=np.float32)
    before = paths(add)
    with pytest.raises(ValueError, match="partially overlaps"):
        add(x[:4], x[:4], out=x[1:5])
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(4,\) do not broadcast"):
        add(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"add: the result type float64 cannot be cast safely to the output type "
                                        r"int32 of out\[0\]"):
        add(np.ones(3), np.ones(3), out=np.empty(3, np.int32))
    assert moved(add, before) == (0, 0, 0)  # raised from the C path, not retried


def test_a_compile_error_raised_from_the_c_path_carries_command_and_log():
    f = kjit.elementwise("template <typename T> T bad(T a) { return a + undefined_name; }")
    before = paths(f)
    for _ in range(2):
        with pytest.raises(kjit.CompileError) as info:
            f(np.arange(3.0))
        assert "undefined_name" in info.value.log and info.value.command
        assert isinstance(info.value, RuntimeError)
    assert moved(f, before) == (0, 0, 0)


def test_new_results_own_their_memory():
    f = kjit.elementwise(ADD)
    x = np.arange(1 << 16, dtype=np.float64)
    got = f(x, x)
    assert got.flags.writeable and got.flags.c_contiguous and got.flags.aligned
    assert got.base is not None  # the capsule that holds kjit's tensor
    del f
    gc.collect()
    got += 1  # still writable memory of its own after the function is gone
    np.testing.assert_array_equal(got, 2 * x + 1)


def test_new_results_are_freed(add):
    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    x = np.ones(1 << 20, np.float64)  # 8 MiB results
    for _ in range(64):  # ASan keeps the last 256 MB freed in quarantine: fill it first
        add(x, x)
    start = rss_mb()
    for _ in range(200):  # 1.6 GB in all if none were freed
        add(x, x)
    assert rss_mb() - start < 200


def test_permuted_results_keep_numpy_layout(add):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = add(a.T, a.T)
    want = a.T + a.T
    np.testing.assert_array_equal(got, want)
    assert got.strides == want.strides


def test_bfloat16_results_of_numpy_inputs_are_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f = kjit.elementwise(ADD, compute="bfloat16")
    x = np.arange(4, dtype=np.float32)
    got = f(x, x)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), x + x)


@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1, 0, -1, True, 1e308, float("nan")])
def test_python_scalars_at_their_limits(add, value):
    x = np.zeros(2, np.float64)
    got = add(x, value)
    np.testing.assert_array_equal(got, x + value)


def test_empty_and_high_rank_arrays(add):
    e = np.empty((0, 3), np.float32)
    assert add(e, e).shape == (0, 3)
    hi = np.ones((1,) * 32 + (2,), np.float32)
    got = add(hi, hi)
    assert got.shape == hi.shape and got.sum() == 4


def test_calls_from_threads_agree(add):
    x = np.arange(1 << 18, dtype=np.float32)
    want = x + x
    errors = []

    def work():
        for _ in range(20):
            if not np.array_equal(add(x, x), want):
                errors.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("repeat", range(2))
def test_cpu_torch_calls_run_in_c(add, axpy, divmod_kernel, repeat):
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    before = paths(add)
    got = add(x, x)
    assert type(got) is torch.Tensor and torch.equal(got, x + x)
    out = torch.empty_like(x)
    assert add(x, x, out=out) is out and torch.equal(out, x + x)
    assert add(x, 2.5).dtype == torch.float32  # a Python scalar stays weak
    assert torch.equal(add(x.t(), x.t()), x.t() + x.t())  # strides and a storage offset below
    assert torch.equal(add(x[1:], x[1:]), x[1:] + x[1:])
    assert torch.equal(axpy(x, x, alpha=2.0), 2 * x + x)
    assert moved(add, before) == (5, 0, 0)
    a, b = torch.arange(1, 7), torch.full((6,), 4)
    before = paths(divmod_kernel)
    q, r = divmod_kernel(a, b)
    assert type(q) is torch.Tensor and torch.equal(q, a // b) and torch.equal(r, a % b)
    outs = (torch.empty_like(a), torch.empty_like(a))
    assert divmod_kernel(a, b, out=outs) is outs and torch.equal(outs[1], a % b)
    assert moved(divmod_kernel, before) == (2, 0, 0)


def test_torch_results_survive_the_function():
    torch = pytest.importorskip("torch")
    f = kjit.elementwise(ADD)
    x = torch.arange(1 << 16, dtype=torch.float64)
    got = f(x, x)
    del f
    gc.collect()
    got += 1
    assert torch.equal(got, 2 * x + 1)


@pytest.mark.parametrize("case", ["numpy scalar", "numpy int scalar", "requires grad"])
def test_other_torch_calls_go_through_tvm_ffi_with_the_same_results(add, case):
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32)
    before = paths(add)
    if case == "numpy scalar":  # weak, as in torch; tvm-ffi passes it as a number
        got = add(x, np.float32(2.5))
        assert got.dtype == torch.float32 and torch.equal(got, x + 2.5)
    elif case == "numpy int scalar":
        got = add(x, np.int64(3))
        assert got.dtype == torch.float32 and torch.equal(got, x + 3)
    elif case == "requires grad":  # as torch's DLPack export treats it, on either path
        g = x.clone().requires_grad_(True)
        direct = _outcome(lambda: add(g, g))
        through_ffi = _outcome(lambda: add(g, np.float32(0.0)))
        assert direct[0] == through_ffi[0]
        return
    assert moved(add, before)[1] == 1


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_torch_conjugate_and_negative_views_are_read_with_their_bit(add, bit):
    torch = pytest.importorskip("torch")
    z = torch.tensor([1 + 2j, 3 - 1j])
    x = z.conj() if bit == "conj" else z.conj().imag  # .imag of a conjugate view has the negative bit
    assert x.is_conj() or x.is_neg()
    want = x.resolve_conj().resolve_neg()
    before = paths(add)
    for other in (x, 1.0, np.float32(1.0)):  # direct, and the forms tvm-ffi's call would take
        got = add(x, other)
        assert torch.equal(got, want + (want if other is x else other))
    assert moved(add, before)[2] == 3  # the checked path materialises them
    out = torch.empty_like(want)
    assert add(x, x, out=out) is out and torch.equal(out, want + want)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_torch_conjugate_or_negative_out_is_rejected(add, bit):
    torch = pytest.importorskip("torch")
    z = torch.zeros(2, dtype=torch.complex64)
    out = z.conj() if bit == "conj" else z.conj().imag
    x = torch.ones(2, dtype=out.dtype)
    name = "conjugate (is_conj())" if bit == "conj" else r"negative (is_neg())"
    with pytest.raises(ValueError, match=r"add: out\[0\] is a " + name.replace("(", r"\(").replace(")", r"\)")
                       + " view of a torch tensor; DLPack cannot carry that bit"):
        add(x, x, out=out)
    assert torch.equal(z, torch.zeros(2, dtype=torch.complex64))  # nothing written


@pytest.fixture
def is_neg_calls(monkeypatch):
    """Counts the is_neg() calls torch tensors receive (kjit asks through the method)."""
    torch = pytest.importorskip("torch")
    calls = []
    original = torch.Tensor.is_neg

    def counted(self):
        calls.append(id(self))
        return original(self)

    monkeypatch.setattr(torch.Tensor, "is_neg", counted)
    return calls


def test_torch_tensors_found_plain_are_not_asked_again(add, is_neg_calls):
    import torch  # noqa: PLC0415 (the fixture skips without it)
    a, b, out = torch.ones(3), torch.full((3,), 2.0), torch.empty(3)
    before = paths(add)
    add(a, b, out=out)
    assert sorted(is_neg_calls) == sorted([id(a), id(b), id(out)])
    is_neg_calls.clear()
    for _ in range(5):
        assert add(a, b, out=out) is out and torch.equal(out, torch.full((3,), 3.0))
    assert is_neg_calls == []
    assert moved(add, before)[0] == 6
    c = torch.ones(3)  # a new tensor is asked
    add(c, b, out=out)
    assert is_neg_calls == [id(c)]


def test_a_remembered_tensors_negative_view_of_the_same_data_is_asked(add, is_neg_calls):
    import torch  # noqa: PLC0415
    z = torch.tensor([1 + 2j, 3 - 1j])
    plain = z.imag
    assert torch.equal(add(plain, plain), torch.tensor([4.0, -2.0]))
    negative = z.conj().imag  # another object over the same data, with the negative bit
    assert negative.data_ptr() == plain.data_ptr() and negative.is_neg()
    is_neg_calls.clear()
    assert torch.equal(add(negative, negative), torch.tensor([-4.0, 2.0]))
    assert id(negative) in is_neg_calls


def test_a_tensor_at_a_dead_tensors_address_is_asked(add):
    """A dead tensor's entry never matches a new object, even at the same address."""
    torch = pytest.importorskip("torch")
    z = torch.tensor([1 + 2j, 3 - 1j])
    conjugate = z.conj()
    for _ in range(200):
        plain = z.imag  # the same data as `negative` below: only the object tells them apart
        address = id(plain)
        add(plain, plain)  # remembered
        del plain
        negative = conjugate.imag  # the next tensor object: usually at the freed address
        if id(negative) == address:
            assert negative.is_neg()
            assert torch.equal(add(negative, negative), torch.tensor([-4.0, 2.0]))
            return
    pytest.skip("CPython did not reuse the address in 200 tries")


def test_a_tensor_whose_data_was_replaced_is_asked_again(add, is_neg_calls):
    import torch  # noqa: PLC0415
    x = torch.ones(2)
    add(x, x)
    z = torch.tensor([1 + 2j, 3 - 1j])
    x.data = z.conj().imag  # new data, and with it the negative bit
    assert x.is_neg()
    is_neg_calls.clear()
    assert torch.equal(add(x, x), torch.tensor([-4.0, 2.0]))
    assert id(x) in is_neg_calls


def test_tensors_a_call_remembered_can_be_swapped_and_are_freed(add, is_neg_calls):
    """The memo holds no weak reference (torch.utils.swap_tensors refuses tensors
    with one) and never the tensor: a swapped tensor is asked again, and a dead
    tensor's memory and attributes go as soon as it dies."""
    import gc  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    import torch  # noqa: PLC0415
    a, b = torch.ones(2), torch.full((2,), 5.0)
    add(a, a)
    assert weakref.getweakrefs(a) == []
    z = torch.tensor([1 + 2j, 3 - 1j])
    negative = z.conj().imag
    torch.utils.swap_tensors(a, negative)  # `a` now stands for [-2, 1]
    assert a.is_neg()
    is_neg_calls.clear()
    assert torch.equal(add(a, a), torch.tensor([-4.0, 2.0]))
    assert id(a) in is_neg_calls
    torch.utils.swap_tensors(a, b)  # and back to plain data
    assert torch.equal(add(a, a), torch.tensor([10.0, 10.0]))

    class Attribute:
        pass
    big = torch.ones(1 << 20)
    attribute = Attribute()
    big.note = attribute
    add(big, big)
    note = weakref.ref(attribute)
    del big, attribute
    gc.collect()
    add(b, b)  # the next call lets the dead tensor's entry go
    assert note() is None


def test_numpy_and_torch_mixed_give_the_first_inputs_framework(add):
    torch = pytest.importorskip("torch")
    t, a = torch.tensor([1.0, 2.0]), np.array([10.0, 20.0], np.float32)
    got = add(t, a)
    assert isinstance(got, torch.Tensor) and torch.equal(got, torch.tensor([11.0, 22.0]))
    got = add(a, t)
    assert isinstance(got, np.ndarray) and np.array_equal(got, np.array([11.0, 22.0], np.float32))
    out = np.empty(2, np.float32)
    assert add(t, a, out=out) is out and np.array_equal(out, [11.0, 22.0])


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 (the kind is compared)
        return (type(e).__name__, str(e))


def test_calls_without_inputs_or_of_other_types_are_checked(add):
    with pytest.raises(TypeError, match="^add: expected at least one input$"):
        add(out=np.empty(1))
    with pytest.raises(TypeError, match=r"input #0 must be a tensor"):
        add("ab", np.ones(2))
    assert "torch" in sys.modules or add(1.0, 2.0) == 3.0
