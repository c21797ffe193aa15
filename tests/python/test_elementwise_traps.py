"""Integer traps in computation strings (issue 27): `a / b` and `a % b` of integers
with b == 0, or of the most negative integer by -1, raise SIGFPE on x86. kjit's
rule: a ZeroDivisionError naming the function, for NumPy and torch inputs alike,
on the calling thread and on pool workers; never a signal. Each case runs in a
fresh interpreter, so a regression kills that process, not the test run."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import numpy as np
import kjit
divmod_ = kjit.elementwise(
    "template <typename T> void divmod(T a, T b, T& q, T& r) { q = a / b; r = a % b; }", num_outputs=2)
gcd = kjit.elementwise('''
template <typename T> T gcd(T a, T b) {
  while (b != 0) { T t = a % b; a = b; b = t; }
  return a < 0 ? -a : a;
}''')

def message(call):
    try:
        call()
    except ZeroDivisionError as e:
        return str(e)
    return "no error"
"""


def run(body: str, faulthandler: bool = True) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    argv = [sys.executable] + (["-X", "faulthandler"] if faulthandler else []) + ["-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


EXPECTED = ("divmod: integer division by zero, or of the most negative integer by -1, in the computation "
            "(SIGFPE); the outputs hold what the loop wrote before it")


@pytest.mark.parametrize("faulthandler", [True, False])
def test_division_by_zero_is_a_zero_division_error(faulthandler):
    proc = run("""
    print(message(lambda: divmod_(np.array([7]), 0)))
    print(message(lambda: divmod_(np.array([-2**31], np.int32), np.int32(-1))))
    print(message(lambda: divmod_(np.int8(-128), np.int8(-1))))
    q, r = divmod_(np.array([7, 9]), 4)  # the next call works
    print(q.tolist(), r.tolist())
    """, faulthandler)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [EXPECTED, EXPECTED]
    # int8 / int8 computes in int (C++ promotion): -128 / -1 is 128, no trap
    assert lines[2] == "no error"
    assert lines[3] == "[1, 2] [3, 1]"


def test_a_trap_on_a_pool_worker_reaches_the_caller():
    proc = run("""
    kjit.set_num_threads(2)
    b = np.ones(1 << 20, np.int64)
    b[-1] = 0  # in the last chunk: a worker's block
    for _ in range(20):
        assert message(lambda: divmod_(np.arange(1 << 20), b)).startswith("divmod: integer division by zero")
    print("ok")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_gcd_of_the_most_negative_int_and_minus_one():
    proc = run("""
    print(message(lambda: gcd(np.array([-2**31], np.int32), np.int32(-1))))
    print(gcd(np.array([12, -18], np.int32), np.int32(8)).tolist())
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gcd: integer division by zero, or of the most negative integer by -1"), lines
    assert lines[1] == "[4, 2]"


def test_torch_inputs_get_the_same_error():
    pytest.importorskip("torch")
    proc = run("""
    import torch
    print(message(lambda: divmod_(torch.tensor([7]), 0)))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == EXPECTED


def test_a_sigfpe_outside_a_kernel_keeps_its_default_action():
    proc = run("""
    import os, signal
    divmod_(np.array([7]), 1)  # kjit's handler is installed
    os.kill(os.getpid(), signal.SIGFPE)
    print("survived")
    """, faulthandler=False)
    assert "survived" not in proc.stdout
    if "AddressSanitizer:DEADLYSIGNAL" in proc.stderr:  # the sanitizer suite: ASan's handler was there before
        assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr)
    else:
        assert proc.returncode == -signal.SIGFPE, (proc.returncode, proc.stdout, proc.stderr)


def test_an_exception_from_a_guarded_kernel_leaves_no_armed_guard():
    """A computation string's own exception leaves a guarded (integer) kernel
    through the guard: the guard disarms, so a later SIGFPE outside any kernel on
    that thread still takes the default action instead of jumping into the frame
    the exception left."""
    proc = run("""
    import os, signal
    thrower = kjit.elementwise(
        "#include <stdexcept>\\n"
        "template <typename T> T thrower(T a) { if (a < 0) throw std::invalid_argument(\\"negative\\"); return a; }")
    try:
        thrower(np.array([1, -1], np.int64))
    except ValueError as err:
        print("raised:", err)
    os.kill(os.getpid(), signal.SIGFPE)
    print("survived")
    """, faulthandler=False)
    assert "raised: thrower: negative" in proc.stdout, (proc.stdout, proc.stderr)
    assert "survived" not in proc.stdout
    if "AddressSanitizer:DEADLYSIGNAL" in proc.stderr:
        assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr)
    else:
        assert proc.returncode == -signal.SIGFPE, (proc.returncode, proc.stdout, proc.stderr)


def test_a_division_the_compiler_sees_is_a_zero_division_error_not_sigill():
    """A literal `/ T(0)` and the docs' integer mean over an empty slice (post_code
    called with n = 0): GCC would make both a trap instruction (SIGILL, which killed
    the process); kjit compiles them as divisions, which the guard turns into a
    ZeroDivisionError naming the function."""
    proc = run("""
    by_zero = kjit.elementwise("template <typename T> T by_zero(T a) { return a / T(0); }")
    print(message(lambda: by_zero(np.array([7, 8]))))
    mean = kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0,
                          post_code="template <typename T> T mean(T acc, int64_t n) { return acc / n; }",
                          upcast_integers=False, name="imean")
    print(message(lambda: mean(np.zeros((2, 0), np.int32), axis=1)))
    print(mean(np.array([[2, 4]], np.int32), axis=1).tolist())
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == EXPECTED.replace("divmod", "by_zero")
    assert lines[1] == EXPECTED.replace("divmod", "imean")
    assert lines[2] == "[3]"


def test_a_trap_instruction_is_a_runtime_error_naming_the_function():
    """Any other trap instruction in an integer kernel (__builtin_trap) is a
    RuntimeError naming the function, never SIGILL."""
    proc = run("""
    trap = kjit.elementwise("template <typename T> T trapping(T a) { if (a == 3) __builtin_trap(); return a; }")
    try:
        trap(np.array([1, 2, 3]))
    except RuntimeError as e:
        print(str(e))
    print(trap(np.array([1, 2])).tolist())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "trapping: the kernel executed a trap instruction (SIGILL): the compiler found undefined behaviour on this "
        "path of the code (such as a division by a literal zero) and made it a trap; the outputs hold what the loop "
        "wrote before it",
        "[1, 2]"]
