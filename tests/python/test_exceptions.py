"""C++ exceptions thrown by a kernel arrive in Python as the matching builtin, message == what()."""

import pytest

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
    ],
)
def test_exception_maps_to_python(mod, which, exc, message):
    with pytest.raises(exc) as info:
        mod.thrower(which)
    assert str(info.value) == message


def test_no_exception_returns_value(mod):
    assert mod.thrower(99) == 99


def test_function_usable_after_exception(mod):
    with pytest.raises(ValueError):
        mod.thrower(0)
    assert mod.thrower(100) == 100
