"""brainevent's real kernels resolve as brainevent itself reads them.

For every CUDA source of the installed brainevent 0.2.1 wheel, loaded verbatim with
functions=None (as brainevent's ``load_cuda_file`` does), kjit's arg_spec tokens
of every function equal those of brainevent's own parser
(``brainevent._op.kernix_codegen.parse_annotations``), in the same order.
"""

import importlib.util
import os

import pytest

import kjit

BE_SPEC = importlib.util.find_spec("brainevent")
BE_ROOT = os.path.dirname(BE_SPEC.origin) if BE_SPEC else None


FILES = [os.path.relpath(p, BE_ROOT) for p in kjit.module.brainevent_sources()] if BE_ROOT else []
pytestmark = pytest.mark.skipif(BE_SPEC is None, reason="brainevent is not installed (scripts/run installs it)")


def read(rel):
    with open(os.path.join(BE_ROOT, rel), encoding="utf-8") as f:
        return f.read()


def brainevent_arg_specs(source):
    from brainevent._op.kernix_codegen import parse_annotations

    return parse_annotations(source)


def test_the_wheel_is_the_one_measured():
    import brainevent

    assert brainevent.__version__ == "0.2.1"
    assert len(FILES) == 45
    folders = sorted({f.split(os.sep)[0] for f in FILES})
    assert folders == ["_csr", "_dense", "_event", "_fcn", "_jit_normal", "_jit_scalar", "_jit_uniform"]


@pytest.mark.parametrize("rel", FILES)
def test_arg_specs_equal_brainevents(rel):
    source = read(rel)
    want = brainevent_arg_specs(source)
    got = kjit.resolve_arg_specs(cuda_sources=[source])
    assert list(got) == list(want)
    for name, tokens in want.items():
        assert got[name] == tokens, name
    # Device code: every tensor is @cuda.
    for name, sig in kjit.resolve(cuda_sources=[source]).items():
        assert "@cpu" not in sig, name


def test_all_functions_counted():
    # The 0.2.1 wheel annotates 499 functions (`// @BE`): 2 with inline tokens,
    # 62 read from a written definition and 435 from the parameter list inside a
    # macro's #define, which kjit expands at the annotated call.
    total = 0
    for rel in FILES:
        total += len(kjit.resolve_arg_specs(cuda_sources=[read(rel)]))
    assert total == 499
