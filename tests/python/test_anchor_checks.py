"""Checks TileLang and CuTe DSL have that kjit adds: constraints over plain
scalars and TileLang's tfloat32, which accepts float32 storage."""

import numpy as np
import pytest

import kjit
from conftest import build

SRC = """
#include <cstdint>
int64_t tile(int32_t k, int64_t n) { return k * n; }
float first(const float* x) { return x[0]; }
"""


def module():
    return build("anchor_checks", SRC, {"tile": "k: int32, n: int64; k % 8 == 0, n > k", "first": "x: tfloat32[n]"})


def test_constraint_over_plain_scalars_passes():
    mod = module()
    assert mod.functions["tile"] == "k: int32, n: int64; k % 8 == 0, n > k"
    assert mod.tile(16, 20) == 320


@pytest.mark.parametrize(
    "k, n, message",
    [
        (12, 20, "tile: constraint 'k % 8 == 0' failed with k = 12 (bound by argument 'k')"),
        (16, 3, "tile: constraint 'n > k' failed with k = 16 (bound by argument 'k'), n = 3 (bound by argument 'n')"),
    ],
)
def test_constraint_over_plain_scalars_fails_with_its_values(k, n, message):
    with pytest.raises(ValueError) as err:
        module().tile(k, n)
    assert str(err.value) == message


def test_non_integer_scalar_in_a_constraint_is_a_spec_error():
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature("x: float32; x > 0", name="h")
    assert str(err.value) == (
        "signature of 'h': scalar 'x' is used in a constraint but has type float32; constraints compare integers, "
        "so it must be an integer type\n  x: float32; x > 0\n  ^~~~~~~~~~"
    )


def test_unknown_name_in_a_constraint_is_still_named():
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature("k: int32; q % 8 == 0", name="h")
    assert "constraint uses 'q', which no parameter or dimension binds" in str(err.value)


def test_tfloat32_accepts_float32_storage():
    mod = module()
    assert mod.functions["first"] == "x: tfloat32[n]"
    assert mod.first(np.full(3, 2.5, dtype=np.float32)) == 2.5
    with pytest.raises(TypeError) as err:
        mod.first(np.ones(3, dtype=np.float64))
    assert str(err.value) == "first: argument #0 'x': dtype must be tfloat32, got float64"
