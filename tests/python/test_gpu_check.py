"""scripts/gpu_check (issue 29, docs/gpu.md) without a GPU: its dry run end to end,
the section runner (a crash fails one check, the rest still run), the comparison
and poisoning logic that the GPU run relies on (it must catch a wrong element, an
unwritten one, a write outside the output), and the bundle packer's file logic."""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import torch
except ImportError:
    torch = None

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"kjit_scripts_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gpu_check = _load("gpu_check")
gpu_pack = _load("gpu_pack")


# ---- the dry run -----------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_dry_run_prints_the_table_last_and_passes(tmp_path):
    pytest.importorskip("torch")
    bundle = ROOT / ".gpu_bundle"
    env = dict(os.environ)
    args = ["bash", str(SCRIPTS / "gpu_check"), "--dry-run", "--out", str(tmp_path / "out"), "--build-dir", "none",
            "--python", sys.executable]
    if not (bundle / gpu_pack.MANIFEST).exists():
        env["KJIT_GPU_BUNDLE"] = str(tmp_path / "bundle")  # packed there (pip download from PyPI)
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, f"{out[-6000:]}\n{proc.stderr[-3000:]}"
    lines = out.rstrip().splitlines()
    assert lines[-1].startswith("summary: ") and lines[-1].endswith("-- no failures"), out[-3000:]
    header = next(i for i, line in enumerate(lines) if line.startswith("name ") and "| result | figure" in line)
    rows = {line.split(" | ")[0].strip(): line.split(" | ")[1].strip() for line in lines[header + 2:-1]}
    for name, status in [("setup: bundle", "PASS"), ("setup: wheels for CPython 3.12", "PASS"),
                         ("setup: xxHash headers", "PASS"), ("checked: build (nvcc)", "PASS"),
                         ("checked: current stream", "SKIP"), ("elementwise: harness self-test on CPU", "PASS"),
                         ("timing: (all)", "SKIP"), ("simulation: C++ CUDA simulation tests", "SKIP")]:
        if "nvcc" in name and not gpu_check.have_nvcc():
            status = "SKIP"
        assert rows.get(name) == status, f"{name}: {rows.get(name)}\n{out[-8000:]}"
    assert not [n for n, s in rows.items() if s == "FAIL"]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["dry_run"] is True and len(results["rows"]) == len(rows)
    assert (tmp_path / "out" / "table.txt").read_text().strip().endswith(lines[-1])
    assert len(list((tmp_path / "out").iterdir())) <= 8  # what the device run brings back


def test_a_crash_fails_its_check_and_the_section_goes_on(tmp_path):
    env = dict(os.environ, GPU_CHECK_SELFTEST_CRASH="1")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--dry-run", "--sections", "selftest",
                           "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["check"]: r for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
    assert [rows[c]["status"] for c in ("passes", "fails", "crashes", "after the crash")] == [
        "PASS", "FAIL", "FAIL", "PASS"]
    assert rows["crashes"]["figure"] == "crashed the process (killed by SIGABRT)"
    assert proc.stdout.rstrip().splitlines()[-1] == "summary: 2 PASS, 2 FAIL, 0 MISS, 0 SKIP, 0 INFO -- FAILED"


def test_simulation_rows_come_from_the_gtest_binaries(tmp_path):
    tests = tmp_path / "build" / "tests" / "cpp"
    tests.mkdir(parents=True)
    for name, body in (("kjit_cuda_sim_tests", 'echo "[  PASSED  ] 14 tests."\nexit 0\n'),
                       ("kjit_tests", 'echo "$1" >&2\necho "[  FAILED  ] ElementwiseCudaSplit.Halves"\nexit 1\n')):
        (tests / name).write_text("#!/bin/sh\n" + body)
        (tests / name).chmod(0o755)
    proc = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--dry-run", "--sections", "simulation",
                           "--build-dir", str(tmp_path / "build"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["check"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["rows"]}
    assert rows["kjit_cuda_sim_tests"]["status"] == "PASS" and rows["kjit_cuda_sim_tests"]["figure"].startswith(
        "14 tests (*)")
    assert rows["kjit_tests"]["status"] == "FAIL"
    assert rows["kjit_tests"]["figure"] == "exit 1; failed: ElementwiseCudaSplit.Halves"
    assert "--gtest_filter=CudaCompile*:CudaNoDriver*:ElementwiseCuda*" in (tmp_path / "out" / "checks.log").read_text()


def test_table_format_and_setup_rows(tmp_path):
    tsv = tmp_path / "rows.tsv"
    tsv.write_text("bundle\tPASS\t5 MiB\nkjit build\tMISS\t130 s (target <= 120 s)\nbad line\n")
    rows = gpu_check.read_setup_rows(str(tsv))
    assert [(r["name"], r["status"]) for r in rows] == [("setup: bundle", "PASS"), ("setup: kjit build", "MISS")]
    rows.append(gpu_check.row("timing", "add float32 2^24", "INFO", "x" * 400))
    text = gpu_check.format_table(rows, "title")
    lines = text.splitlines()
    assert lines[0] == "title" and lines[1].startswith("name") and lines[1].endswith("| result | figure")
    assert lines[3].startswith("setup: bundle") and "| PASS   | 5 MiB" in lines[3]
    assert lines[-2].endswith("...") and len(lines[-2]) < 250
    assert lines[-1] == "summary: 1 PASS, 0 FAIL, 1 MISS, 0 SKIP, 1 INFO -- no failures"


# ---- comparison, poison, guards -------------------------------------------------------

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (the harness compares torch tensors)")


@needs_torch
def test_mismatch_is_bitwise_and_names_the_first_element():
    ref = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert gpu_check.mismatch(torch, ref.clone(), ref) is None
    got = ref.clone()
    got[1, 2] = 5.000001
    msg = gpu_check.mismatch(torch, got, ref, (ref, 1.5))
    assert msg.startswith("1 of 6 elements differ; first at index (1, 2): got 5.000000953674316 (0x40a00002), "
                          "expected 5.0 (0x40a00000); input #0 = 5.0 (0x40a00000)"), msg
    assert "input #1 = 1.5 (Python scalar)" in msg
    assert gpu_check.mismatch(torch, -torch.zeros(3), torch.zeros(3)) is not None  # -0.0 is not 0.0
    nan = torch.full((3,), float("nan"))
    assert gpu_check.mismatch(torch, nan, nan.clone()) is None
    assert gpu_check.mismatch(torch, ref.double(), ref).startswith("dtype float64")
    assert gpu_check.mismatch(torch, ref.t(), ref).startswith("shape (3, 2)")


@needs_torch
def test_poisoned_bool_elements_are_seen_even_where_true_is_expected():
    buf, out, pad = gpu_check.guarded(torch, 8, torch.bool, "cpu", 0xFF)
    out[:7] = True
    msg = gpu_check.mismatch(torch, out, torch.ones(8, dtype=torch.bool))
    assert msg is not None and msg.startswith("1 of 8 elements differ; first at index (7,)"), msg
    odd = buf[pad + 1:pad + 8:2]  # a strided view ending at out[7]: torch's copy would write its 0xFF as 1
    assert gpu_check.raw_bytes(torch, odd).reshape(-1).tolist() == [1, 1, 1, 0xFF]
    assert gpu_check.guards_intact(torch, buf, pad, 8, 0xFF) is None
    buf[pad + 8] = False
    assert gpu_check.guards_intact(torch, buf, pad, 8, 0xFF).startswith("wrote outside the output: element 8")


@needs_torch
def test_fused_tolerance_accepts_an_fma_and_rejects_a_wrong_value():
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.rand(1000, generator=g, dtype=torch.float64) - 0.5 for _ in range(3))
    a, b, c = a.float(), b.float(), c.float()
    separate = a * b + c
    fused = (a.double() * b.double() + c.double()).float()  # one rounding, as an FMA
    runner = gpu_check.EwRunner(None, "cpu")
    tol = runner.tolerance("madd", "float32", [a, b, c], {})
    assert gpu_check.mismatch(torch, fused, separate, (a, b, c), tol) is None
    wrong = fused.clone()
    wrong[17] += 1e-3
    assert gpu_check.mismatch(torch, wrong, separate, (a, b, c), tol).startswith("1 of 1000 elements differ; first "
                                                                                 "at index (17,)")
    assert runner.tolerance("add", "float32", [a, b], {}) is None  # one rounding: bit for bit


import kjit  # noqa: E402

ADD = "template <typename T> T add(T a, T b) { return a + b; }"


@pytest.fixture(scope="module")
def add():
    return kjit.elementwise(ADD)


class _Sec:
    def remaining(self):
        return 1e9


def _cases(label, nin=2, dtype="float32"):
    return [c for c in gpu_check.ew_layouts(torch, dtype, nin, False) if c.label == label]


def _run(f, label, dtype="float32"):
    runner = gpu_check.EwRunner(_Sec(), "cpu")
    return runner.group(f, "add", dtype, _cases(label, dtype=dtype))


@needs_torch
def test_the_harness_passes_the_right_function(add):
    for label in ("contiguous n=1003", "strided x[::2] n=1003", "out= strided", "out= misaligned", "0-d",
                  "empty (4,0)", "in place (out=input 0)", "Python scalar"):
        count, failures = _run(add, label)
        assert count == 1 and failures == [], (label, failures)


@needs_torch
def test_the_harness_catches_an_unwritten_element(add):
    def lazy(*args, out=None, **kw):
        if out is None:
            return add(*args, **kw)
        full = add(*args, **kw)
        out.reshape(-1)[:-1] = full.reshape(-1)[:-1]  # the last element left as it was
        return out

    _, failures = _run(lazy, "out= contiguous")
    assert len(failures) == 1 and "elements differ; first at index (1002,)" in failures[0], failures
    assert "[minimal failing size n=1:" in failures[0]


@needs_torch
def test_the_harness_catches_a_write_past_the_output_and_into_gaps(add):
    def writer(where):
        def f(*args, out=None, **kw):
            full = add(*args, **kw)
            if out is None:
                return full
            out.copy_(full)
            if where == "past the end":
                out.as_strided((1,), (1,), out.storage_offset() + out.stride(0) * out.numel())[0] = 0
            else:  # the element after the first, a gap of a strided out=
                out.as_strided((1,), (1,), out.storage_offset() + 1)[0] = 0
            return out
        return f

    _, failures = _run(writer("past the end"), "out= contiguous")
    assert len(failures) == 1 and "wrote outside the output: element 1003" in failures[0], failures
    _, failures = _run(writer("gap"), "out= strided")
    assert len(failures) == 1 and "wrote into the gap after element 0" in failures[0], failures


@needs_torch
def test_the_harness_catches_a_wrong_new_output_and_a_changed_input(add):
    calls = []

    def off_by_one(*args, **kw):
        calls.append(1)
        full = add(*args, **kw)
        if len(calls) % 2 == 0:  # every second call: the one under test (the first is the reference)
            full.reshape(-1)[5] += 1
        return full

    _, failures = _run(off_by_one, "contiguous n=1003")
    assert failures and "first at index (5,)" in failures[0], failures

    def scribbles(*args, **kw):
        full = add(*args, **kw)
        args[1].reshape(-1)[3] = 0
        return full

    _, failures = _run(scribbles, "contiguous n=7")
    assert failures and "input #1 was changed" in failures[0], failures


@needs_torch
def test_the_large_cases_run_small_on_cpu(add):
    # The GPU run's > 2^31-element and 2.4 GB strided cases, at a size the CPU takes.
    assert gpu_check.big_add_case(torch, add, "cpu", 100003) == []
    assert gpu_check.strided_offsets_case(torch, add, "cpu", 300, 6001, 600) == []

    def wrong(*args, out=None):
        got = add(*args, out=out)
        got.reshape(-1)[-1] += 1
        return got

    problems = gpu_check.big_add_case(torch, wrong, "cpu", 1000)
    assert len(problems) == 3 and problems[0].startswith("int8 add out=, n=1000: 1 elements differ, first at 999")


# ---- the packer's file logic --------------------------------------------------------


def _wheel(path, name, version, requires=()):
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta)
    return path


def test_wheel_tags():
    assert gpu_pack.wheel_fits("apache_tvm_ffi-0.1.15.post2-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl")
    assert not gpu_pack.wheel_fits("apache_tvm_ffi-0.1.15.post2-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert not gpu_pack.wheel_fits("x-1.0-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert gpu_pack.wheel_fits("x-1.0-cp38-abi3-manylinux_2_17_x86_64.whl")  # the stable ABI, from 3.8 on
    assert not gpu_pack.wheel_fits("x-1.0-cp313-abi3-manylinux_2_17_x86_64.whl")
    assert gpu_pack.wheel_fits("brainevent-0.2.1-py3-none-any.whl")
    assert gpu_pack.wheel_filename_info("scikit_build_core-1.1.2-py3-none-any.whl")["name"] == "scikit-build-core"


def test_requirements_and_what_is_missing_there(tmp_path):
    w = _wheel(tmp_path / "a-1.0-py3-none-any.whl", "a", "1.0",
               ["numpy>=2", "Brain_Unit>=0.5", "tomli; python_version < '3.11'", "pytest; extra == 'test'",
                "pywin32; sys_platform == 'win32'", "opt_einsum"])
    assert gpu_pack.wheel_requirements(str(w)) == ["numpy", "brain-unit", "opt-einsum"]
    missing = gpu_pack.missing_requirements({"a": ["numpy", "brain-unit", "opt-einsum"]}, bundled=["a"])
    assert missing == {"a": ["brain-unit"]}
    assert gpu_pack.missing_requirements({"a": ["brain-unit"]}, bundled=["a", "brain_unit"]) == {}


def test_install_plan_installs_if_missing_wheels_only_when_needed():
    manifest = {"wheels": {"apache-tvm-ffi": {"file": "w/t.whl", "version": "0.1.15", "install": "always"},
                           "typing-extensions": {"file": "w/te.whl", "version": "4.16.0", "install": "if-missing",
                                                 "min_version": "4.13"}}}
    plan = gpu_pack.install_plan(manifest, {"apache-tvm-ffi": "0.1.15", "typing-extensions": "4.15.0"})
    assert [p["name"] for p in plan] == ["apache-tvm-ffi"]
    plan = gpu_pack.install_plan(manifest, {"apache-tvm-ffi": None, "typing-extensions": "4.12.2"})
    assert [p["name"] for p in plan] == ["apache-tvm-ffi", "typing-extensions"]
    assert [p["name"] for p in gpu_pack.install_plan(manifest, {})] == ["apache-tvm-ffi", "typing-extensions"]


def test_check_bundle_names_what_is_wrong(tmp_path):
    bundle = tmp_path / "b"
    assert gpu_pack.check_bundle(str(bundle))[0].startswith("no ")
    (bundle / "wheels").mkdir(parents=True)
    (bundle / "xxhash" / "usr" / "include").mkdir(parents=True)
    files = {}
    for name in ("xxhash.h", "xxh3.h"):
        p = bundle / "xxhash" / "usr" / "include" / name
        p.write_text("/* header */\n")
    wheels = {}
    for w in gpu_pack.WHEELS:
        if not w.required:
            continue
        fn = f"{w.name.replace('-', '_')}-1.0-" + ("cp312-cp312-manylinux_2_28_x86_64.whl" if w.name == "apache-tvm-ffi"
                                                    else "py3-none-any.whl")
        _wheel(bundle / "wheels" / fn, w.name.replace("-", "_"), "1.0")
        wheels[gpu_pack.normalize(w.name)] = {"file": f"wheels/{fn}", "version": "1.0", "install": w.install}
    for p in bundle.rglob("*"):
        if p.is_file():
            files[str(p.relative_to(bundle))] = hashlib.sha256(p.read_bytes()).hexdigest()
    manifest = {"wheels": wheels, "xxhash_include": "xxhash/usr/include", "files": files}
    (bundle / gpu_pack.MANIFEST).write_text(json.dumps(manifest))
    assert gpu_pack.check_bundle(str(bundle)) == []
    (bundle / "xxhash" / "usr" / "include" / "xxh3.h").write_text("changed\n")
    tvm = next(iter(bundle.glob("wheels/apache_tvm_ffi*")))
    tvm.unlink()
    problems = gpu_pack.check_bundle(str(bundle))
    assert f"missing wheels/{tvm.name}" in problems
    assert "xxhash/usr/include/xxh3.h: checksum differs from MANIFEST.json (damaged or replaced)" in problems
    assert any("does not install on CPython 3.11" in p for p in gpu_pack.check_bundle(str(bundle), "3.11"))
