"""C++ exceptions thrown by a kernel arrive in Python as the matching builtin, message == what()."""

import builtins

import pytest
import tvm_ffi

import kjit

from conftest import build

SOURCE = r"""
#include <kjit/kernel.h>
#include <new>
#include <stdexcept>

int64_t thrower(int64_t which) {
  switch (which) {
    case 0: throw std::invalid_argument("bad argument 0");
    case 1: throw std::domain_error("outside the domain");
    case 2: throw std::out_of_range("index 9 out of range");
    case 3: throw std::bad_alloc();
    case 4: throw kjit::ValueError("kjit value error");
    case 5: throw kjit::TypeError("kjit type error");
    case 6: throw kjit::IndexError("kjit index error");
    case 7: throw std::runtime_error("plain runtime error");
    case 8: throw 42;
    case 9: kjit::check_value(false, "check_value failed");
    case 10: throw kjit::NotImplementedError("not there yet");
    case 11: throw std::logic_error("some logic error");
    case 12: throw kjit::RuntimeError("kjit runtime error");
    case 13: throw kjit::AxisError("axis 3 is out of bounds for array of dimension 2");
  }
  return which;
}
"""


@pytest.fixture(scope="module")
def mod():
    return build("exceptions", SOURCE, {"thrower": "which: int64"})


@pytest.mark.parametrize(
    "which, exc, message",
    [
        (0, ValueError, "bad argument 0"),
        (1, ValueError, "outside the domain"),
        (2, IndexError, "index 9 out of range"),
        (3, MemoryError, "std::bad_alloc"),
        (4, ValueError, "kjit value error"),
        (5, TypeError, "kjit type error"),
        (6, IndexError, "kjit index error"),
        (7, RuntimeError, "plain runtime error"),
        (8, RuntimeError, "thrower: the kernel threw an exception that is not a std::exception"),
        (9, ValueError, "check_value failed"),
        (10, NotImplementedError, "not there yet"),
        (11, RuntimeError, "some logic error"),
        (12, RuntimeError, "kjit runtime error"),
        (13, kjit.errors.AxisError, "axis 3 is out of bounds for array of dimension 2"),  # also an IndexError
    ],
)
def test_exception_maps_to_python(mod, which, exc, message):
    """The kind maps to the builtin; the message names the function, as kjit's own
    errors do ("thrower: ...")."""
    with pytest.raises(exc) as info:
        mod.thrower(which)
    assert str(info.value) == (message if message.startswith("thrower: ") else f"thrower: {message}")


def test_a_kernel_message_that_names_its_function_is_named_once():
    named = build("exceptions_named", "#include <stdexcept>\n#include <cstdint>\n"
                  "void rmsnorm(double eps) { if (eps <= 0) throw std::invalid_argument(\"rmsnorm: eps must be "
                  "positive\"); if (eps > 1) throw std::invalid_argument(\"rmsnormx: eps too big\"); }\n",
                  {"rmsnorm": "eps: float64"})
    with pytest.raises(ValueError) as info:
        named.rmsnorm(-1.0)
    assert str(info.value) == "rmsnorm: eps must be positive"
    with pytest.raises(ValueError) as info:
        named.rmsnorm(2.0)
    assert str(info.value) == "rmsnorm: rmsnormx: eps too big"


def test_no_exception_returns_value(mod):
    assert mod.thrower(99) == 99


def test_function_usable_after_exception(mod):
    with pytest.raises(ValueError):
        mod.thrower(0)
    assert mod.thrower(100) == 100


# ---- the boundary's own errors ----


def test_every_error_kind_is_a_registered_python_exception():
    kjit_own = {
        "SpecError": kjit.SpecError,
        "CompileError": kjit.CompileError,
        "ToolchainError": kjit.ToolchainError,
        "CacheError": kjit.CacheError,
        "InternalError": kjit.InternalError,
        "AxisError": kjit.errors.AxisError,  # NumPy's: a ValueError and an IndexError
    }
    names = [str(n) for n in tvm_ffi.get_global_func("kjit.error_kind_names")()]
    assert set(kjit_own) | {"NotImplementedError", "MemoryError"} <= set(names)
    for name in names:  # the others are the builtins of the same name
        expected = kjit_own[name] if name in kjit_own else getattr(builtins, name)
        assert tvm_ffi.core.ERROR_NAME_TO_TYPE.get(name) is expected, name


def test_an_unknown_option_field_is_an_internal_error():
    from kjit._lib import api

    with pytest.raises(kjit.InternalError, match=r"^kjit internal error: kjit\.load_inline options has an unknown "
                                                 r"field 'cflags'$"):
        api.load_inline({"name": "m", "cflags": ["-O2"]})


def test_a_compile_error_made_in_python_has_empty_command_and_log():
    err = kjit.CompileError("no compiler output")
    assert (err.command, err.log) == ("", "")
    err.command, err.log = "c++ x.cc", "x.cc:1: error"
    assert (err.command, err.log) == ("c++ x.cc", "x.cc:1: error")
