"""scripts/fuzz's failure summary, which `scripts/run test` prints as its last lines
(docs/reliability.md, "In CI"). Run against stand-in fuzzer binaries in a copy of
the script's tree, so no fuzzer is built here."""

import base64
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fake_tree(tmp_path, fuzzer_body):
    """A tree with scripts/fuzz and a `stub` fuzzer that runs `fuzzer_body`."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "fuzz", tmp_path / "scripts" / "fuzz")
    (tmp_path / "tests" / "fuzz" / "corpus" / "stub").mkdir(parents=True)
    binary = tmp_path / "build" / "fuzz" / "tests" / "fuzz" / "kjit_fuzz_stub"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/bash\ncase \"$*\" in *-runs=0*) exit 0;; esac\n" + fuzzer_body)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _run(tree):
    env = dict(os.environ, KJIT_FUZZ_KEEP_GOING="0")
    return subprocess.run(["bash", str(tree / "scripts" / "fuzz"), "run", "1", "stub"], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("base64") is None, reason="needs bash and base64")
def test_a_crash_is_summarised_with_its_report_line_and_its_input(tmp_path):
    crash = tmp_path / "crash-1"
    crash.write_bytes(b"f(\x00\xff)")
    tree = _fake_tree(tmp_path, f'echo "INFO: seed"\necho "==7==ERROR: AddressSanitizer: heap-use-after-free"\n'
                      f'echo "Test unit written to {crash}"\nexit 1\n')
    result = _run(tree)
    assert result.returncode == 1, result.stderr
    summary = (tree / "build" / "fuzz" / "failures.txt").read_text()
    assert "stub fuzzing: ==7==ERROR: AddressSanitizer: heap-use-after-free" in summary
    assert f"Test unit written to {crash}" in summary
    encoded = summary.split("the input, base64: ")[1].split()[0]
    assert base64.b64decode(encoded) == b"f(\x00\xff)"
    assert "fuzz-stub.log" in summary


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_crash_without_a_report_line_or_input_says_so(tmp_path):
    tree = _fake_tree(tmp_path, "exit 3\n")
    result = _run(tree)
    assert result.returncode == 1
    summary = (tree / "build" / "fuzz" / "failures.txt").read_text()
    assert "stub fuzzing: no report line; see the log" in summary
    assert "no input saved" in summary
    assert "base64" not in summary


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_passing_run_leaves_no_summary_of_an_earlier_failure(tmp_path):
    tree = _fake_tree(tmp_path, "echo 'stat::number_of_executed_units: 5'\nexit 0\n")
    stale = tree / "build" / "fuzz" / "failures.txt"
    stale.write_text("  stub fuzzing: an earlier crash\n")
    result = _run(tree)
    assert result.returncode == 0, result.stderr
    assert not stale.exists()
