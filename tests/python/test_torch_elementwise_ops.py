"""kjit.elementwise functions of several outputs, and with extra scalars, as torch
ops (kjit.torch.op, docs/torch.md "Elementwise functions"): the schema returns one
tensor per output and takes the declared extras as keyword-only arguments; the fake
implementation gives each output the broadcast shape and the function's own
result_types; opcheck, torch.compile(fullgraph=True, dynamic=True) and the values
equal eager kjit calls and torch's own ops."""

import math

import pytest

torch = pytest.importorskip("torch")

import kjit  # noqa: E402
import kjit.torch  # noqa: E402


def _count_compiles():
    """A torch.compile backend that counts the graphs it is given."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend, graphs


def _schema(call) -> str:
    return str(call.op._opoverload._schema)


# one output of the template's type, one declared bool: each output has its own dtype
SGN = "template <typename T> void sgn(T a, T b, bool& pos, T& twice) { pos = a + b > 0; twice = (a + b) * 2; }"
# extras after the inputs, in the entry's order: a double, an int64_t and a bool
AXPY = ("template <typename T> T axpy(T x, T y, double alpha, int64_t shift, bool neg) {"
        " T r = static_cast<T>(alpha) * x + y + static_cast<T>(shift); return neg ? -r : r; }")


@pytest.fixture(scope="module")
def sgn():
    return kjit.elementwise(SGN, num_outputs=2)


@pytest.fixture(scope="module")
def sgn_op(sgn):
    return kjit.torch.op(sgn, name="tew_sgn")


@pytest.fixture(scope="module")
def axpy():
    return kjit.elementwise(AXPY)


@pytest.fixture(scope="module")
def axpy_op(axpy):
    return kjit.torch.op(axpy, name="tew_axpy", extras={"alpha": float, "shift": 0, "neg": False})


def test_several_outputs_are_a_tuple_in_the_schema(sgn_op):
    assert _schema(sgn_op) == "kjit::tew_sgn(Tensor[] inputs) -> (Tensor, Tensor)"


def test_several_outputs_broadcast_and_take_each_outputs_dtype(sgn, sgn_op):
    a = torch.tensor([[-3], [1], [2]], dtype=torch.int32)
    b = torch.tensor([1.0, -0.5, 4.0], dtype=torch.float32)
    pos, twice = sgn_op(a, b)
    want_pos, want_twice = sgn(a, b)  # the eager kjit call
    assert (pos.dtype, twice.dtype) == (torch.bool, torch.float32) == sgn.result_types(a, b)
    assert pos.shape == twice.shape == (3, 3)
    torch.testing.assert_close(pos, want_pos)
    torch.testing.assert_close(twice, want_twice)
    torch.testing.assert_close(pos, a + b > 0)  # torch's own ops
    torch.testing.assert_close(twice, (a + b) * 2)


@pytest.mark.parametrize("dtype, want", [(torch.float32, torch.float32), (torch.int16, torch.float64)])
def test_several_outputs_follow_torchs_promotion_of_0d_tensors(sgn_op, dtype, want):
    a = torch.arange(4, dtype=dtype)
    b = torch.tensor(2.5, dtype=torch.float64)  # 0-d: its dtype counts only for a higher kind, as in torch's add
    pos, twice = sgn_op(a, b)
    assert twice.dtype == (a + b).dtype == want
    torch.testing.assert_close(twice, (a + b) * 2)


@pytest.mark.parametrize("args", [
    lambda: [torch.randn(3, 4), torch.randn(4)],
    lambda: [torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.tensor(1, dtype=torch.int64)],
])
def test_opcheck_several_outputs(sgn_op, args):
    result = torch.library.opcheck(sgn_op.op, (args(),))
    assert set(result.values()) == {"SUCCESS"}, result


def test_several_outputs_under_compile_fullgraph_dynamic(sgn_op):
    backend, graphs = _count_compiles()

    @torch.compile(fullgraph=True, dynamic=True, backend=backend)
    def f(x, y):
        pos, twice = sgn_op(x, y)
        return pos.sum(), twice + 1

    for n in (2, 5, 9):
        x, y = torch.randn(n, 3), torch.randn(3, dtype=torch.float64)
        count, plus = f(x, y)
        assert plus.dtype == torch.float64
        assert count == (x + y > 0).sum()
        torch.testing.assert_close(plus, (x + y) * 2 + 1)
    assert len(graphs) == 1


def test_extras_are_keyword_arguments_with_their_types_and_defaults(axpy_op):
    assert _schema(axpy_op) == ("kjit::tew_axpy(Tensor[] inputs, *, float alpha, SymInt shift=0, bool neg=False) "
                                "-> Tensor")


def test_extras_reach_the_entry_in_its_order(axpy, axpy_op):
    x, y = torch.arange(4, dtype=torch.float32), torch.ones(4)
    torch.testing.assert_close(axpy_op(x, y, alpha=2.0), 2 * x + y)
    got = axpy_op(x, y, alpha=0.5, shift=3, neg=True)
    torch.testing.assert_close(got, axpy(x, y, alpha=0.5, shift=3, neg=True))  # the eager kjit call
    torch.testing.assert_close(got, -(0.5 * x + y + 3))
    # an int passed for the float extra still reaches the entry as a double
    xi = torch.arange(4, dtype=torch.int32)
    torch.testing.assert_close(axpy_op(xi, xi, alpha=3), axpy(xi, xi, alpha=3.0, shift=0, neg=False))


def test_opcheck_with_extras(axpy_op):
    args = ([torch.randn(2, 3), torch.randn(3)],)
    for kwargs in ({"alpha": 1.5}, {"alpha": -2.0, "shift": 4, "neg": True}):
        result = torch.library.opcheck(axpy_op.op, args, kwargs)
        assert set(result.values()) == {"SUCCESS"}, result


def test_extras_under_compile_fullgraph_dynamic(axpy_op):
    backend, graphs = _count_compiles()

    @torch.compile(fullgraph=True, dynamic=True, backend=backend)
    def f(x, y, alpha, shift):
        return axpy_op(x, y, alpha=alpha, shift=shift, neg=False) * 2

    for n, shift in ((3, 1), (6, 7), (11, 2)):
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(f(x, y, 2.0, shift), (2.0 * x + y + shift) * 2)
    assert len(graphs) == 1  # sizes and SymInt extras: one graph for every value
    for alpha in (0.5, -1.0):  # a float extra is specialised (a schema has no symbolic float): a graph per value
        x, y = torch.randn(4), torch.randn(4)
        torch.testing.assert_close(f(x, y, alpha, 3), (alpha * x + y + 3) * 2)
    assert len(graphs) == 3


def test_several_outputs_with_extras():
    split = kjit.elementwise("template <typename T> void split(T x, double at, T& lo, T& hi) {"
                             " lo = x < at ? x : T(0); hi = x < at ? T(0) : x; }", num_outputs=2)
    split_op = kjit.torch.op(split, name="tew_split", extras={"at": 0.0})
    assert _schema(split_op) == "kjit::tew_split(Tensor[] inputs, *, float at=0.) -> (Tensor, Tensor)"
    x = torch.linspace(-2, 2, 9)
    lo, hi = torch.compile(lambda t: split_op(t, at=1.0), fullgraph=True)(x)
    torch.testing.assert_close(lo, torch.where(x < 1.0, x, 0.0))
    torch.testing.assert_close(hi, torch.where(x < 1.0, 0.0, x))
    result = torch.library.opcheck(split_op.op, ([x],), {"at": -0.5})
    assert set(result.values()) == {"SUCCESS"}, result


def test_the_same_function_again_is_the_same_op_and_other_code_is_refused(axpy):
    extras = {"alpha": float, "shift": 0, "neg": False}
    first = kjit.torch.op(axpy, name="tew_again", extras=extras)
    again = kjit.torch.op(kjit.elementwise(AXPY), name="tew_again", extras=extras)  # the same code: the same op
    assert _schema(again) == _schema(first)
    with pytest.raises(kjit.SpecError, match=r"op 'kjit::tew_again' is already registered by a different build"):
        kjit.torch.op(axpy, name="tew_again", extras={"alpha": 1.0})  # other extras: another schema
    with pytest.raises(kjit.SpecError, match=r"op 'kjit::tew_again' is already registered by a different build"):
        kjit.torch.op(kjit.elementwise(AXPY, compute="float64"), name="tew_again", extras=extras)


@pytest.mark.parametrize("extras, message", [
    ([("alpha", float)], "kjit.torch.op: extras of 'axpy' must be a mapping of name to bool, int or float (or a "
                         "default value of one), got list"),
    ({"alpha": str}, "kjit.torch.op: extras['alpha'] of 'axpy' must be bool, int or float (a required extra) or a "
                     "finite bool, int or float value (its default), got <class 'str'>"),
    ({"alpha": math.nan}, "kjit.torch.op: extras['alpha'] of 'axpy' must be bool, int or float (a required extra) "
                          "or a finite bool, int or float value (its default), got nan"),
    ({"out": 1.0}, "kjit.torch.op: extra 'out' of 'axpy' must be a Python identifier other than 'inputs' and 'out' "
                   "(the op's own arguments)"),
    ({"lambda": 1.0}, "kjit.torch.op: extra 'lambda' of 'axpy' must be a Python identifier other than 'inputs' and "
                      "'out' (the op's own arguments)"),
])
def test_bad_extras_are_refused_by_name(axpy, extras, message):
    with pytest.raises(TypeError) as info:
        kjit.torch.op(axpy, name="tew_bad", extras=extras)
    assert str(info.value) == message


def test_calls_with_unknown_extras_or_no_inputs_are_refused(axpy_op, sgn_op):
    x = torch.ones(2)
    with pytest.raises(TypeError) as info:
        axpy_op(x, x, alpha=1.0, beta=2.0)
    assert str(info.value) == ("kjit::tew_axpy: unexpected extra argument 'beta'; the op takes 'alpha', 'shift', "
                               "'neg' (kjit.torch.op(f, extras=...))")
    with pytest.raises(TypeError) as info:
        sgn_op(x, x, alpha=1.0)
    assert str(info.value) == ("kjit::tew_sgn: unexpected extra argument 'alpha'; the op takes no extras "
                               "(kjit.torch.op(f, extras=...))")
    with pytest.raises(TypeError, match=r"^sgn: expected at least one input$"):
        sgn_op()


def test_op_takes_only_kjit_computations_and_reductions_take_no_extras():
    with pytest.raises(TypeError) as info:
        kjit.torch.op(lambda x: x)
    assert str(info.value) == ("kjit.torch.op takes a kjit.elementwise, kjit.reduction or kjit.arg_reduction "
                               "function, got function")
    total = kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0)
    with pytest.raises(TypeError) as info:
        kjit.torch.op(total, name="tew_total", extras={"alpha": 1.0})
    assert str(info.value) == "kjit.torch.op: extras are for kjit.elementwise functions; reduction 'add' takes none"
