"""Issue 12's guarantees for specs and checks, end to end from Python.

Crash-prone calls run in a subprocess that must exit 0 having seen the right
exception, so a regression fails one test instead of killing pytest.
"""

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kjit
from kjit import Spec, SpecError

from conftest import build

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def run_isolated(code):
    """Runs `code` in a fresh interpreter; returns (exit status, stdout)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


# ---- crashes: each one in a subprocess ----

CRASHERS = {
    "fold INT64_MIN / -1": ('kjit.parse_signature("a: float32[(-9223372036854775807 - 1) / -1]")',
                            "'(-9223372036854775807 - 1) / -1' overflows int64"),
    "20,000 parentheses": ('kjit.parse_signature("a: float32[" + "(" * 20000 + "n" + ")" * 20000 + "]")',
                           "nests more than 256 levels deep"),
    "100,000 unary minuses": ('kjit.parse_signature("a: float32[n], b: float32[" + "-" * 100000 + "n]")',
                              "nests more than 256 levels deep"),
    "100,000 '+ 1' terms": ('kjit.parse_signature("a: float32[n" + " + 1" * 100000 + "]")',
                            "more than 256 operators deep"),
    "a deep constraint": ('kjit.parse_signature("a: float32[n]; " + "n*" * 50000 + "n > 0")',
                          "more than 256 operators deep"),
    "a deep builder dim": ('kjit.Spec("f").tensor("a", "float32", ["(" * 30000 + "n" + ")" * 30000]).signature()',
                           "nests more than 256 levels deep"),
}


@pytest.mark.parametrize("call, message", CRASHERS.values(), ids=CRASHERS.keys())
def test_parser_crashers_are_spec_errors_in_a_subprocess(call, message):
    status, out = run_isolated(f"""
        import kjit
        try:
            {call}
        except kjit.SpecError as err:
            assert {message!r} in str(err), str(err)[:300]
            print("SpecError")
        """)
    assert status == 0, out[-2000:]
    assert out.strip() == "SpecError"


def test_stub_division_trap_is_a_value_error_in_a_subprocess():
    status, out = run_isolated("""
        import numpy as np
        import kjit
        mod = kjit.load_inline("guarantee_div_trap", cpp_sources=r'''
        #include <kjit/kernel.h>
        void f(int64_t, int64_t, kjit::TensorView) {}
        void g(int64_t, int64_t, kjit::TensorView) {}
        ''', functions={"f": "n: int64, d: int64, a: int8[n / d] strided",
                        "g": "n: int64, d: int64, a: int8[n % d + 1] strided"})
        a = np.zeros(1, np.int8)
        try:
            mod.f(-2**63, -1, a)
        except ValueError as err:
            assert str(err) == ("f: argument #2 'a': shape[0] must equal n / d, which overflows int64 with "
                                "d = -1 (bound by argument 'd'), n = -9223372036854775808 (bound by argument 'n')"), str(err)
            print("ValueError")
        mod.g(-2**63, -1, a)  # x % -1 is 0: no trap and nothing to reject
        print("ok")
        """)
    assert status == 0, out[-2000:]
    assert out.split() == ["ValueError", "ok"]


# ---- overflow-checked shape arithmetic at call time ----

@pytest.fixture(scope="module")
def checks():
    return build("guarantee_checks", r"""
#include <kjit/kernel.h>
int64_t scaled(int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t limited(int64_t n, const kjit::TensorView) { return n; }
int64_t e1(int64_t, int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t e2(int64_t, int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t e3(int64_t, int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t solved(const kjit::TensorView a, const kjit::TensorView b, int64_t k) { return a.size(0) + b.size(0) + k; }
int64_t halves(const kjit::TensorView a, const kjit::TensorView b) { return a.size(0) + b.size(0); }
""", {
        "scaled": "n: int64, a: int8[4*n] strided",
        "limited": "n: int64, a: int8[n] strided; n*4 < 100",
        "e1": "n: int64, d: int64, a: int8[n / d] strided",
        "e2": "n: int64, k: int64, a: int8[4*n - k] strided; n*k % 7 != 3",
        "e3": "n: int64, d: int64, a: int8[(n + d) % d * -3 + n] strided; n - d >= -5",
        "solved": "a: int8[n] strided, b: int8[2*n + k] strided, k: int64",
        "halves": Spec("halves").tensor("a", "int8", ["n*(k/2)"]).tensor("b", "int8", ["n", "k"]),
    })


def extent(n):
    """An int8 vector of n elements that occupies one byte (stride 0): shapes up to 2**63 - 1."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape=(n,), strides=(0,))


def test_overflowing_dims_and_constraints_are_value_errors(checks):
    with pytest.raises(ValueError) as info:
        checks.scaled(2**62 + 1, extent(4))
    assert str(info.value) == ("scaled: argument #1 'a': shape[0] must equal 4*n, which overflows int64 with "
                               "n = 4611686018427387905 (bound by argument 'n')")
    with pytest.raises(ValueError) as info:
        checks.limited(2**62, extent(2**62))
    assert str(info.value) == ("limited: constraint 'n*4 < 100' needs n*4, which overflows int64 with "
                               "n = 4611686018427387904 (bound by argument 'n')")
    assert checks.limited(24, extent(24)) == 24
    with pytest.raises(ValueError) as info:
        checks.solved(extent(INT64_MAX), extent(3), 1)
    assert str(info.value) == ("solved: argument #1 'b': solving shape[0] == 2*n + k for k, which overflows int64 "
                               "with n = 9223372036854775807 (bound by a.shape[0])")


def test_spec_built_module_checks_the_expression_it_was_given(checks):
    assert checks.functions["halves"] == "a: int8[n*(k / 2)], b: int8[n, k]"
    assert checks.halves(np.zeros(6, np.int8), np.zeros((3, 5), np.int8)) == 9  # a: 3*(5 // 2) = 6, b: 3
    with pytest.raises(ValueError, match=r"shape\[0\] must equal n\*\(k / 2\) = 6"):
        checks.halves(np.zeros(7, np.int8), np.zeros((3, 5), np.int8))


# ---- the checks against a reference model (hypothesis) ----

class Overflow(Exception):
    pass


def fits(v):
    if not INT64_MIN <= v <= INT64_MAX:
        raise Overflow
    return v


def floordiv(a, b):
    if b == 0:
        raise Overflow  # the stub checks divisors for zero first (a ValueError as well)
    return fits(a // b)


# Each function of the fixture as exact integer arithmetic: the value its tensor's
# dim must have, and its constraint; any intermediate outside int64 rejects.
MODELS = {
    "e1": (lambda n, d: floordiv(n, d), lambda n, d: True),
    "e2": (lambda n, k: fits(fits(4 * n) - k), lambda n, k: fits(n * k) % 7 != 3),
    "e3": (lambda n, d: fits(fits(fits((fits(n + d) % d) if d else floordiv(0, 0)) * -3) + n),
           lambda n, d: fits(n - d) >= -5),
}

interesting = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-20, 20),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 2**62, 2**62 + 1, -2**62, 2**61, 2**31]),
)


def reference_accepts(fn, x, y, shape):
    dim, constraint = MODELS[fn]
    try:
        return dim(x, y) == shape and constraint(x, y)
    except Overflow:
        return False


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fn=st.sampled_from(sorted(MODELS)), x=interesting, y=interesting, exact=st.booleans(),
       other=st.integers(0, INT64_MAX))
def test_checks_agree_with_the_reference_model(checks, fn, x, y, exact, other):
    try:
        value = MODELS[fn][0](x, y)
    except Overflow:
        value = None
    shape = value if exact and value is not None and value >= 0 else other
    expected = reference_accepts(fn, x, y, shape)
    try:
        getattr(checks, fn)(x, y, extent(shape))
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == expected, (fn, x, y, shape)


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=interesting.filter(lambda v: v >= 0), m=st.one_of(st.integers(0, INT64_MAX), st.integers(0, 50)),
       k=interesting)
def test_solving_agrees_with_the_reference_model(checks, n, m, k):
    # b: int8[2*n + k] solves k = m - 2*n (which must be >= 0), then the scalar k must equal it.
    try:
        solved = fits(m - fits(2 * n))
        expected = solved >= 0 and solved == k
    except Overflow:
        expected = False
    try:
        checks.solved(extent(n), extent(m), k)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == expected, (n, m, k)


# ---- canonical text round-trips (hypothesis) ----

def exprs():
    leaves = st.one_of(st.integers(-10, 10), st.sampled_from([INT64_MIN, INT64_MAX, 2**40]), st.sampled_from("nkm"))

    def extend(inner):
        return st.one_of(st.tuples(st.just("neg"), inner),
                         st.tuples(st.sampled_from(["+", "-", "*", "/", "%"]), inner, inner))
    return st.recursive(leaves, extend, max_leaves=12)


def full_text(e):
    """Fully parenthesised text; "(-5)" is the literal -5, "-(x)" a negation."""
    if isinstance(e, int):
        return str(e) if e >= 0 else f"({e})"
    if isinstance(e, str):
        return e
    if e[0] == "neg":
        return f"-({full_text(e[1])})"
    return f"({full_text(e[1])} {e[0]} {full_text(e[2])})"




class Reader:
    """A reference parser of the canonical grammar, to rebuild the tree kjit printed."""

    def __init__(self, text):
        import re
        self.toks = re.findall(r"\d+|[A-Za-z_]\w*|[-+*/%()]", text)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        self.i += 1
        return self.toks[self.i - 1]

    def expr(self):
        e = self.term()
        while self.peek() in ("+", "-"):
            e = (self.take(), e, self.term())
        return e

    def term(self):
        e = self.unary()
        while self.peek() in ("*", "/", "%"):
            e = (self.take(), e, self.unary())
        return e

    def unary(self):
        t = self.take()
        if t == "-":
            if self.peek().isdigit():
                return -int(self.take())
            return ("neg", self.unary())
        if t == "(":
            e = self.expr()
            assert self.take() == ")"
            return e
        return int(t) if t.isdigit() else t


def constant_trouble(e):
    """Whether kjit must reject e: a constant part overflows, or divides by a constant 0."""
    def value(x):
        if isinstance(x, int):
            return x
        if isinstance(x, str):
            return None
        if x[0] == "neg":
            v = value(x[1])
            return None if v is None else fits(-v)
        a, b = value(x[1]), value(x[2])
        if x[0] in "/%" and b == 0:
            raise Overflow
        if a is None or b is None:
            return None
        if x[0] == "/":
            return fits(a // b)
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "%": lambda: a % b}
        return fits(ops[x[0]]())
    try:
        value(e)
        return False
    except Overflow:
        return True


@settings(max_examples=400, derandomize=True, deadline=None)
@given(e=exprs())
def test_canonical_text_parses_back_to_the_same_tree(e):
    assume(not constant_trouble(e))
    signature = f"a: float32[n, k, m]; {full_text(e)} >= 0"
    canonical = kjit.parse_signature(signature)
    printed = canonical.split("; ", 1)[1][:-len(" >= 0")]
    assert Reader(printed).expr() == e, printed
    assert kjit.parse_signature(canonical) == canonical


# ---- float16 / bfloat16 scalars ----

@pytest.fixture(scope="module")
def halves():
    return build("guarantee_halves", r"""
#include <cstdint>
int64_t h(uint16_t bits) { return bits; }
int64_t b(uint16_t bits) { return bits; }
""", {"h": "x: float16", "b": "x: bfloat16"})


def midpoints(bits_to_float, count):
    """Every midpoint between neighbouring finite values and the doubles just beside it."""
    values = np.arange(count, dtype=np.uint16).view(bits_to_float).astype(np.float64)
    finite = values[np.isfinite(values)]
    mids = (finite[:-1] + finite[1:]) / 2
    out = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), finite])
    return np.concatenate([out, -out])


def test_float16_scalars_round_once_like_numpy(halves):
    xs = midpoints(np.float16, 0x7c01)
    xs = np.concatenate([xs, [65519.99, 65520.0, 1e300, -1e300, np.inf, -np.inf, 5e-324, 2.0**-25]])
    got = np.array([halves.h(float(x)) for x in xs], dtype=np.uint16)
    with np.errstate(over="ignore"):  # 1e300 -> inf is the point
        want = xs.astype(np.float16).view(np.uint16)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(xs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]
    assert halves.h(float("nan")) == 0x7e00
    assert xs.size > 120_000


def test_bfloat16_scalars_match_ml_dtypes(halves):
    xs = midpoints(ml_dtypes.bfloat16, 0x7f81)[::7]  # a seventh of them: ~40,000 values, a few seconds
    xs = np.concatenate([xs, [1 + 2**-8 + 2**-40, 3.4e38, 3.5e38, 1e300, -1e300]])
    got = np.array([halves.b(float(x)) for x in xs], dtype=np.uint16)
    want = np.array([np.array(ml_dtypes.bfloat16(float(x))).view(np.uint16) for x in xs], dtype=np.uint16)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(xs[i], hex(got[i]), hex(want[i])) for i in bad[:5]]


# ---- clear errors instead of raw ones ----

@pytest.mark.parametrize("call, message", [
    (lambda: kjit.parse_signature("a: float32[\u00e9]"),
     "signature of 'fn': unexpected non-ASCII character '\u00e9' (U+00E9): a signature is ASCII (names are C "
     "identifiers)\n  a: float32[\u00e9]\n             ^"),
    (lambda: kjit.parse_signature("a: float32[n]\0, b"),
     "signature of 'fn': unexpected NUL byte ('\\0')\n  a: float32[n]\\0, b\n               ^~"),
    (lambda: kjit.parse_signature("a: float32[n]", name="f\u00e9"),
     "function name 'f\u00e9' is not a C identifier (letters, digits and '_', not starting with a digit); it has a "
     "non-ASCII character '\u00e9' (U+00E9)"),
    (lambda: kjit.resolve("// @kjit f\u00e9 arg ret\n", None),
     "cpp_sources:1 (// @kjit annotation): unexpected non-ASCII character '\u00e9' (U+00E9) in 'f\u00e9 arg ret'; "
     "an annotation is ASCII (names are C identifiers)"),
    (lambda: kjit.resolve("// @kjit f\0 arg ret\n", None),
     "cpp_sources:1 (// @kjit annotation): unexpected NUL byte ('\\0') in 'f\\0 arg ret'; an annotation is ASCII "
     "(names are C identifiers)"),
    (lambda: kjit.resolve("void f(int);", {"f": ["arg", "ret", "attr.\u00e9"]}),
     "arg_spec of 'f' (functions['f']): token #2 'attr.\u00e9': attr name '\u00e9' is not a C identifier (letters, "
     "digits and '_', not starting with a digit); it has a non-ASCII character '\u00e9' (U+00E9)"),
    (lambda: kjit.load_inline("m\u00e9", cpp_sources="", functions={"f": "a: float32[n]"}),
     "module name 'm\u00e9' is not a C identifier (letters, digits and '_', not starting with a digit); it has a "
     "non-ASCII character '\u00e9' (U+00E9)"),
    (lambda: Spec("f").tensor("a", "float32", ["n"], align=2**63).signature(),
     "builder of 'f': tensor('a', ...): align(9223372036854775808) does not fit in int64; it must be a power of "
     "two below 2**63"),
    (lambda: kjit.parse_signature("a: float32[n] align(9223372036854775808)"),
     "signature of 'fn': number '9223372036854775808' does not fit in int64 (at most 2**63 - 1)\n"
     "  a: float32[n] align(9223372036854775808)\n                      ^~~~~~~~~~~~~~~~~~~"),
    (lambda: kjit.parse_signature("a: float32[n] align(16) align(32)"),
     "signature of 'fn': 'align(32)' conflicts with 'align(16)' given before: tensor 'a' takes one 'align' "
     "attribute\n  a: float32[n] align(16) align(32)\n                          ^~~~~~~~~"),
    (lambda: kjit.parse_signature("a: float32[n] @cpu @cuda"),
     "signature of 'fn': '@cuda' conflicts with '@cpu' given before: tensor 'a' takes one device\n"
     "  a: float32[n] @cpu @cuda\n                     ^~~~~"),
    (lambda: Spec("f").tensor("a: float32[n], b", "float32", ["n"]).signature(),
     "builder of 'f': tensor('a: float32[n], b', ...): the name must be an identifier (letters, digits and '_', "
     "not starting with a digit)"),
    (lambda: Spec("f").tensor("a", "float32", ["n"]).scalar("x: float32[n], y", "float32").signature(),
     "builder of 'f': scalar('x: float32[n], y', ...): the name must be an identifier (letters, digits and '_', "
     "not starting with a digit)"),
    (lambda: Spec("f").tensor("a", "float32", ["n] out strides[1"]).signature(),
     "builder of 'f': tensor('a', ...): dim 'n] out strides[1' is not one expression: ']' cannot appear in it"),
    (lambda: Spec("f").tensor("a", "float32", ["n"]).constraint("n > 0, n < 9").signature(),
     "builder of 'f': constraint('n > 0, n < 9', ...): constraint 'n > 0, n < 9' is not one constraint: ',' "
     "cannot appear in it"),
])
def test_rejections_name_what_was_wrong(call, message):
    with pytest.raises(SpecError) as info:
        call()
    assert str(info.value) == message

