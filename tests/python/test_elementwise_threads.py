"""kjit.elementwise's thread pool from Python: fork after threaded calls, several
Python threads calling at once, and the thread-count setting. The fork cases run
in a subprocess with a timeout, so a regression fails instead of hanging."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import kjit
import tvm_ffi
from conftest import run_bounded

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
TIMEOUT_S = 120  # far above the seconds these scripts take; a hang hits it


def run_script(*parts: str) -> subprocess.CompletedProcess:
    """Runs the code `parts` in a fresh interpreter (this test's kjit and cache); fails on a timeout."""
    code = "\n".join(textwrap.dedent(p) for p in parts)
    # Its own process group, so that a hung forked child is killed with it.
    # These scripts count the threads regions use: the governor must not make them
    # serial because the other test process loads the machine.
    env = dict(os.environ, KJIT_ADAPTIVE_THREADS="0")
    return run_bounded([sys.executable, "-c", code], env, TIMEOUT_S)


PRELUDE = f"""
import os, sys
import numpy as np
import kjit
kjit.elementwise.set_num_threads(2)
add = kjit.elementwise({ADD!r})
big = np.arange(1 << 20, dtype=np.float32)

def threaded_call_ok(k):
    return np.array_equal(add(big, np.float32(k)), big + np.float32(k))

assert threaded_call_ok(1)  # the pool now has a worker
"""


def test_fork_after_a_threaded_call_runs_threaded_calls_in_the_child():
    proc = run_script(PRELUDE, """
    pid = os.fork()
    if pid == 0:
        os._exit(0 if all(threaded_call_ok(k) for k in range(5)) else 3)
    _, status = os.waitpid(pid, 0)
    assert threaded_call_ok(2)  # the parent's pool still works
    print("child exit", os.waitstatus_to_exitcode(status))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "child exit 0"


def test_multiprocessing_fork_pool_maps_threaded_calls():
    proc = run_script(PRELUDE, """
    import multiprocessing as mp
    with mp.get_context("fork").Pool(2) as pool:
        print(pool.map(threaded_call_ok, range(6)))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str([True] * 6)


def test_set_num_threads_1_starts_no_pool_thread():
    proc = run_script("""
    import os
    import numpy as np
    import kjit
    kjit.elementwise.set_num_threads(1)
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    x = np.ones(1 << 20, np.float32)
    add(x, x)  # compiles the kernel (the compiler's threads come and go)
    before = len(os.listdir("/proc/self/task"))
    for _ in range(3):
        assert np.array_equal(add(x, x), x + x)
    print(len(os.listdir("/proc/self/task")) - before)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


def test_threads_setting_bounds_the_pool():
    proc = run_script("""
    import os
    import numpy as np
    import kjit
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    x = np.ones(1 << 20, np.float32)
    kjit.elementwise.set_num_threads(1)
    add(x, x)
    before = len(os.listdir("/proc/self/task"))
    kjit.elementwise.set_num_threads(3)
    assert np.array_equal(add(x, x), x + x)
    print(len(os.listdir("/proc/self/task")) - before)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"  # the caller and two workers


@pytest.mark.parametrize("n_threads", [2, 3])
def test_concurrent_python_threads_with_large_arrays(n_threads):
    kjit.elementwise.set_num_threads(n_threads)
    try:
        add = kjit.elementwise(ADD)
        n = (1 << 20) + 3  # not a multiple of any chunk count
        base = np.arange(n, dtype=np.float64)
        strided = np.arange(2 * n, dtype=np.float32)[::2]
        errors = []

        def work(k):
            try:
                for round_ in range(20):
                    v = float(k * 100 + round_)
                    out = np.empty(n)
                    add(base, v, out=out)
                    np.testing.assert_array_equal(out, base + v)
                    np.testing.assert_array_equal(add(strided, np.float32(v)), strided + np.float32(v))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert not errors, errors[0]
    finally:
        kjit.elementwise.set_num_threads(0)


TORCH_FIRST = f"""
import os
import numpy as np
import torch
import kjit
torch.set_num_threads(2)
kjit.elementwise.set_num_threads(2)
t = torch.arange(1 << 20, dtype=torch.float32)
assert torch.equal(torch.add(t, 1.0), t + 1.0)  # torch's OpenMP team exists now
add = kjit.elementwise({ADD!r})
big = np.arange(1 << 20, dtype=np.float32)
add(big[:4], big[:4])  # compiles the kernel (the compiler's threads come and go)
before = len(os.listdir("/proc/self/task"))

def threaded_call_ok(k):
    return np.array_equal(add(big, np.float32(k)), big + np.float32(k))
"""


def test_with_torch_loaded_regions_run_on_torchs_openmp_threads():
    """One set of worker threads per process: after torch's own parallel calls,
    kjit's regions wake torch's OpenMP threads instead of starting its pool."""
    pytest.importorskip("torch")
    proc = run_script(TORCH_FIRST, """
    assert all(threaded_call_ok(k) for k in range(5))
    tt = torch.ones(1 << 20)
    assert torch.equal(add(tt, tt), tt + tt)
    print(len(os.listdir("/proc/self/task")) - before)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


def test_with_torch_loaded_kjit_openmp_0_keeps_kjits_pool():
    pytest.importorskip("torch")
    proc = run_script("import os; os.environ['KJIT_OPENMP'] = '0'", TORCH_FIRST, """
    assert all(threaded_call_ok(k) for k in range(3))
    print(len(os.listdir("/proc/self/task")) - before)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"  # kjit's one pool worker


def test_fork_after_torch_and_kjit_threaded_calls():
    """The parent's OpenMP threads do not exist in a forked child: kjit's calls
    there run on a new pool of its own instead of waiting for them."""
    pytest.importorskip("torch")
    proc = run_script(TORCH_FIRST, """
    assert threaded_call_ok(1)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if all(threaded_call_ok(k) for k in range(5)) else 3)
    _, status = os.waitpid(pid, 0)
    assert threaded_call_ok(2)
    print("child exit", os.waitstatus_to_exitcode(status))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "child exit 0"


@pytest.mark.parametrize("threads", [1, 2])
def test_long_rows_split_into_runs_compute_every_element(threads):
    # Rows longer than the longest kernel run (4 MiB of output, when the operands
    # fit in the last-level cache; loop_driver.cc's longest_run) are cut into runs
    # within a row: contiguous, and column slices whose rows are not contiguous
    # with each other. The result must be every element's sum either way.
    add = kjit.elementwise(ADD)
    rng = np.random.default_rng(7)
    a = rng.random((2, 1_300_003), dtype=np.float32)
    b = rng.random((2, 1_300_003), dtype=np.float32)
    before = kjit.elementwise.get_num_threads()
    kjit.elementwise.set_num_threads(threads)
    try:
        np.testing.assert_array_equal(add(a, b), a + b)
        sliced_a, sliced_b = a[:, 3:1_250_000], b[:, 1:1_249_998]
        out = np.empty_like(sliced_a)
        add(sliced_a, sliced_b, out=out)
        np.testing.assert_array_equal(out, sliced_a + sliced_b)
    finally:
        kjit.elementwise.set_num_threads(before)


set_adaptive_threads = tvm_ffi.get_global_func("kjit.set_adaptive_threads")

TID = """
#include <unistd.h>
#include <sys/syscall.h>
template <typename T> T tid(T) { return static_cast<T>(syscall(SYS_gettid)); }
"""


@pytest.mark.parametrize(("n", "threads_used"), [(1 << 15, 1), ((1 << 15) + 1, 2), (1 << 16, 2)])
def test_a_loop_of_one_grain_runs_on_the_calling_thread(n, threads_used):
    """One thread per started grain of 32768 elements, as torch counts them
    (loop_driver.cc's threads_for): each element records the thread that ran it.
    A loop of one grain runs on the caller alone; a larger one on two threads,
    once the worker is awake (a late worker leaves its chunk to the caller, so
    that case may take a few tries on a loaded machine)."""
    f = kjit.elementwise(TID)
    kjit.set_num_threads(2)
    set_adaptive_threads(False)  # the other test process may load the machine
    deadline = time.monotonic() + 10  # the sanitizer suite runs beside another loaded process
    try:
        while True:
            f(np.zeros(1 << 16, np.float64))  # the worker exists and is awake
            ids = set(np.unique(f(np.zeros(n, np.float64))).astype(int).tolist())
            if len(ids) == threads_used or time.monotonic() > deadline:
                break
    finally:
        kjit.set_num_threads(0)
        set_adaptive_threads(True)
    assert len(ids) == threads_used, ids
    if threads_used == 1:
        assert ids == {threading.get_native_id()}


def test_on_an_oversubscribed_machine_regions_run_on_the_caller_alone():
    """Two busy processes per core hold the machine: a loop of two grains, which
    gets two threads on a quiet machine (above), runs on the calling thread alone,
    as the pool's governor sees the runnable threads that are not its own."""
    f = kjit.elementwise(TID)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(2 * (os.cpu_count() or 1))]
    try:
        time.sleep(0.3)  # they are running
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:  # past the governor's last reading of the quiet machine
            f(np.zeros(1 << 16, np.float64))
        ids = set(np.unique(f(np.zeros(1 << 16, np.float64))).astype(int).tolist())
    finally:
        for p in busy:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert ids == {threading.get_native_id()}


@pytest.mark.parametrize("n", [2**32 + 3, -1, 4097, 2**62])
def test_thread_counts_outside_the_range_are_refused(n):
    before = kjit.get_num_threads()
    with pytest.raises(ValueError) as err:
        kjit.set_num_threads(n)
    assert str(err.value) == (f"kjit.set_num_threads: n must be a thread count in [1, 4096], or 0 for the default, "
                              f"got {n}")
    assert kjit.get_num_threads() == before


@pytest.mark.parametrize("value", ["99999999999", "-3", "4097", "2x", "0"])
def test_a_bad_thread_count_in_the_environment_is_ignored_with_a_warning(value):
    code = "import os, kjit; print(kjit.get_num_threads(), os.cpu_count())"
    env = dict(os.environ, KJIT_NUM_THREADS=value)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    threads, cores = proc.stdout.split()
    assert threads == cores
    assert f"[kjit] KJIT_NUM_THREADS='{value}' is not a thread count in [1, 4096]; ignored" in proc.stderr


def test_num_outputs_outside_the_range_is_a_spec_error():
    for n in (2**32 + 1, 65):
        with pytest.raises(kjit.SpecError, match=rf"^kjit.elementwise: num_outputs must be between 1 and 64, got {n}$"):
            kjit.elementwise("template <typename T> T f(T a) { return a; }", num_outputs=n)


@pytest.mark.parametrize(("name", "shown"), [("../../escape", "../../escape"), ("a b", "a b"), ("1x", "1x"),
                                             ("x\x00y", "x\\0y"), ("é", "é")])
def test_an_entry_name_that_is_not_an_identifier_is_a_spec_error(name, shown):
    with pytest.raises(kjit.SpecError) as err:
        kjit.elementwise("template <typename T> T f(T a) { return a; }", name=name)
    assert str(err.value) == (f"kjit.elementwise: name '{shown}' is not a C identifier (letters, digits and '_', not "
                              "starting with a digit): it names the entry function of the code")


CONCURRENT = 'import threading, numpy as np, sys\nimport kjit\nm = kjit.load_inline("conc", cpp_sources="""\n#include <kjit/kernel.h>\nvoid axpy(const float* x, float* y, int64_t n, float a) { for (int64_t i = 0; i < n; ++i) y[i] += a * x[i]; }\nvoid twice(const kjit::TensorView x, kjit::TensorView y) { const float* p = x.data<float>(); float* q = y.data<float>(); for (int64_t i = 0; i < x.size(0); ++i) q[i] = 2 * p[i]; }\n""", functions={"axpy": "x: float32[n], y: float32[n] out, n: int64 symbol, a: float32 = 1.0",\n                "twice": "x: float32[n], y: float32[n] return"})\nadd = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")\nerrors = []\nstop = threading.Event()\ndef worker(k):\n    rng = np.random.default_rng(k)\n    try:\n        for i in range(60):\n            n = int(rng.choice([1, 100, 1 << 16, 1 << 18]))\n            x = rng.random(n, dtype=np.float32)\n            y = np.zeros(n, np.float32)\n            m.axpy(x, y, a=2.0)\n            assert np.array_equal(y, 2 * x)\n            assert np.array_equal(m.twice(x), 2 * x)\n            assert np.array_equal(add(x, x), x + x)\n            out = np.empty_like(x); add(x, 1.0, out=out); assert np.array_equal(out, x + 1)\n            if TORCH:\n                t = torch.from_numpy(x); assert torch.equal(add(t, t), t + t)\n    except Exception as e:\n        errors.append(repr(e))\ndef toggler():\n    i = 0\n    while not stop.is_set():\n        kjit.set_num_threads(i % 4); i += 1\nts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]\ntg = threading.Thread(target=toggler)\ntg.start(); [t.start() for t in ts]; [t.join() for t in ts]; stop.set(); tg.join()\nkjit.set_num_threads(0)\nprint("errors", errors[:3], len(errors))\n'


@pytest.mark.parametrize("with_torch", [False, True])
def test_eight_threads_call_checked_kernels_and_elementwise_while_the_thread_count_changes(with_torch):
    """Eight Python threads call checked kernels (out, returned, keyword default)
    and elementwise functions (new outputs, out=, torch inputs) of every size while
    another thread sets the thread count 0..3 in a loop; every value is checked."""
    if with_torch:
        pytest.importorskip("torch")
    proc = run_script(("import torch\nTORCH = True\n" if with_torch else "TORCH = False\n") + CONCURRENT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "errors [] 0"
