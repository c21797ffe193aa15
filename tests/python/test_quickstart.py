"""The README's first command runs examples/quickstart.py: it must keep working."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_quickstart_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "rejected call: ValueError: axpy: argument #1 'y': shape[1] must equal n = 4" in proc.stdout
    assert "elementwise hypot: shape (3, 4), dtype float64" in proc.stdout
