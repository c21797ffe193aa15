"""Every ```python block in README.md and docs/*.md runs and its asserts hold."""

import pathlib
import re
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks():
    for doc in DOCS:
        for i, code in enumerate(BLOCK.findall(doc.read_text())):
            yield pytest.param(code, id=f"{doc.name}[{i}]")


def _has_nvcc():
    return shutil.which("nvcc") is not None or pathlib.Path("/usr/local/cuda/bin/nvcc").exists()


@pytest.mark.parametrize("code", list(_blocks()))
def test_doc_example_runs(code):
    if "cuda_sources" in code and not _has_nvcc():
        pytest.skip("the example builds CUDA code and this machine has no CUDA toolkit")
    if "import jax" in code:
        pytest.importorskip("jax")
    exec(compile(code, "<doc example>", "exec"), {"__name__": "__doc_example__"})


def test_docs_have_examples():
    assert len(list(_blocks())) >= 3
