"""Shared fixtures: an isolated build cache and a small helper to build modules."""

import os
import re
import shutil
import signal
import subprocess

import pytest

import kjit


@pytest.fixture(scope="session", autouse=True)
def kjit_cache_dir(tmp_path_factory):
    """Every test builds into a private cache, never ~/.cache/kjit."""
    path = tmp_path_factory.mktemp("kjit-cache")
    old = os.environ.get("KJIT_CACHE_DIR")
    os.environ["KJIT_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KJIT_CACHE_DIR", None)
    else:
        os.environ["KJIT_CACHE_DIR"] = old


def build(name, source, functions, **kwargs):
    """kjit.load_inline with the test suite's defaults (one call = one compile)."""
    return kjit.load_inline(name, cpp_sources=source, functions=functions, **kwargs)


@pytest.fixture(scope="session")
def build_module():
    """The `build` helper as a fixture, for tests that prefer injection."""
    return build


def run_bounded(args, env, timeout, cwd=None) -> subprocess.CompletedProcess:
    """``args`` in a session (process group) of its own, so that a hung run, and
    every process it started, is killed past ``timeout`` seconds; then the test fails."""
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{args[1:3]} did not finish within {timeout} s (a hang):\n{out[-2000:]}\n{err[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def loop_vectorised(source, loop_prefix, after=None):
    """Whether g++ -fopt-info reports the first loop of the kept kernel source
    starting with `loop_prefix` (after a line starting with `after`) vectorised."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ to report vectorised loops")
    lines = source.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if line == '#line 1 "kjit_elementwise_loop"')
    first = 0 if after is None else next(i for i, line in enumerate(lines) if line.startswith(after))
    loop = next(i for i, line in enumerate(lines) if i > first and line.startswith(loop_prefix))
    report = subprocess.run([gxx, "-std=c++17", "-O3", "-fno-math-errno", "-fopt-info-vec-optimized", "-c",
                             str(source), "-o", os.devnull], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    return re.search(rf"kjit_elementwise_loop:{loop - start}:\d+: optimized: loop vectorized", report.stderr), (
        loop - start, report.stderr)
