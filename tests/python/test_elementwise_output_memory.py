"""Host memory of kjit.elementwise's new CPU outputs (src/cpu/output_memory.cc):
blocks from 32 MiB are faulted in on the calling thread, and up to two freed ones
are kept for the next output of their size. Page faults are counted with
getrusage, so these tests see what the kernel did, not what kjit says it did."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kjit

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
MIB32 = 1 << 23  # float32 elements in 32 MiB: the smallest block kjit faults in and keeps


def _linux_at_least(major: int, minor: int) -> bool:
    """Whether this is Linux major.minor or later; False when the release string
    does not start with two numbers (a custom kernel's "6.1rc", say)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        release = os.uname().release.split("-")[0].split(".")
        return (int(release[0]), int(release[1])) >= (major, minor)
    except (IndexError, ValueError):
        return False


needs_populate = pytest.mark.skipif(not _linux_at_least(5, 14), reason="MADV_POPULATE_WRITE needs Linux 5.14")


@pytest.fixture(scope="module")
def add():
    return kjit.elementwise(ADD)


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_freed_large_result_serves_the_next_one_of_its_size(add):
    """Its block comes back without a page fault, and every element is written anew."""
    x = np.arange(MIB32, dtype=np.float32)
    first = add(x, x)
    address = first.ctypes.data
    del first
    y = np.ones(MIB32, np.float32)
    before = faults()
    second = add(x, y)
    assert faults() - before < 16, "the kept block's pages faulted again"
    assert second.ctypes.data == address
    np.testing.assert_array_equal(second, x + y)


def test_torch_results_are_kept_too(add):
    torch = pytest.importorskip("torch")
    x = torch.arange(MIB32, dtype=torch.float32)
    first = add(x, x)
    address = first.data_ptr()
    del first
    before = faults()
    second = add(x, x)
    assert faults() - before < 16, "the kept block's pages faulted again"
    assert second.data_ptr() == address
    assert torch.equal(second, x + x)


def test_a_block_of_another_size_is_not_taken(add):
    x = np.ones(MIB32, np.float32)
    kept = add(x, x)
    address = kept.ctypes.data
    del kept
    y = np.ones(MIB32 + (1 << 20), np.float32)  # 36 MiB: the next size class but one
    other = add(y, y)
    assert other.ctypes.data != address
    again = add(x, x)  # the 32 MiB block is still kept
    assert again.ctypes.data == address
    np.testing.assert_array_equal(again, x + x)
    np.testing.assert_array_equal(other, y + y)


def test_concurrent_callers_never_share_a_block(add):
    """Four threads make and free 32 MiB results at once: each result must hold its
    own thread's values, which a block handed to two callers would not."""
    x = np.arange(MIB32, dtype=np.float32)
    errors = []

    def work(k):
        for _ in range(6):
            got = add(x, np.float32(k))
            if got[0] != k or got[-1] != x[-1] + k or got[MIB32 // 2] != x[MIB32 // 2] + k:
                errors.append((k, got[0], got[-1]))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


SCRIPT_PRELUDE = f"""
import os, resource
import numpy as np
import kjit
add = kjit.elementwise({ADD!r})
x = np.arange({MIB32}, dtype=np.float32)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
"""


def run_script(body: str, **env) -> subprocess.CompletedProcess:
    code = SCRIPT_PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **env))


@needs_populate
def test_kjit_output_cache_0_keeps_no_block():
    proc = run_script("""
    del_me = add(x, x)
    del del_me
    before = faults()
    got = add(x, x)
    print(faults() - before)
    assert np.array_equal(got, x + x)
    """, KJIT_OUTPUT_CACHE="0")
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 16


@needs_populate
def test_large_new_results_fault_in_on_the_calling_thread():
    """A fresh block from 32 MiB is faulted in by the calling thread before the loop,
    so the loop's other thread faults none of it (docs/elementwise.md: concurrent
    faults from two threads were 5-15x slower on this project's VM). Every result
    stays alive, so each call needs a new block; a fresh interpreter, because
    glibc serves a block from its heap, already faulted, when the heap has one
    free (as after other tests' smaller results)."""
    proc = run_script("""
    kjit.set_num_threads(2)
    alive = [add(x, x)]  # also the worker's own first-use faults (stack, TLS)
    for _ in range(3):
        self_before = faults()
        caller_before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        alive.append(add(x, x))
        caller = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - caller_before
        others = faults() - self_before - caller
        assert caller >= 16, caller  # at least one fault per 2 MiB of the 32 MiB
        assert others <= 2, f"the loop's other thread faulted {others} times (the caller {caller})"
        assert np.array_equal(alive[-1], x + x)
    """)
    assert proc.returncode == 0, proc.stderr


@needs_populate
def test_at_most_two_freed_blocks_are_kept():
    """Three blocks of three sizes freed in turn: the first was let go (its size
    faults afresh), the two newest come back without faults."""
    proc = run_script("""
    inputs = [np.ones(n, np.float32) for n in (x.size, x.size + (1 << 19), x.size + (1 << 20))]  # 32, 34, 36 MiB
    r32, r34, r36 = (add(v, v) for v in inputs)
    del r32  # freed in this order
    del r34
    del r36

    def faults_of(v):
        before = faults()
        out = add(v, v)
        return faults() - before, out

    kept_34, out34 = faults_of(inputs[1])
    kept_36, out36 = faults_of(inputs[2])
    fresh_32, out32 = faults_of(inputs[0])
    assert kept_34 < 16 and kept_36 < 16, (kept_34, kept_36)
    assert fresh_32 >= 16, fresh_32
    for v, out in zip(inputs, (out32, out34, out36)):
        assert np.array_equal(out, v + v)
    """)
    assert proc.returncode == 0, proc.stderr


def test_a_forked_child_takes_the_parents_kept_block():
    """The child has its own copy of the kept block's pages: both use it."""
    proc = run_script("""
    first = add(x, x)
    address = first.ctypes.data
    del first
    three = np.full_like(x, 3)
    pid = os.fork()
    if pid == 0:
        got = add(x, three)
        os._exit(0 if got.ctypes.data == address and np.array_equal(got, x + 3) else 3)
    _, status = os.waitpid(pid, 0)
    got = add(x, x)
    assert got.ctypes.data == address and np.array_equal(got, x + x)
    print(os.waitstatus_to_exitcode(status))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"
