"""The bundle that scripts/gpu_check takes to the GPU machine (docs/gpu.md).

That machine has Python 3.12 with torch, JAX, CuPy, CMake, ninja and nvcc, but no
package registry, no apache-tvm-ffi and no libxxhash-dev. This packs, here, what it
lacks into the ignored folder .gpu_bundle/ (sent with the run's `carry`), and
installs it there:

    .venv/bin/python scripts/gpu_pack.py pack      here: wheels + xxHash headers + MANIFEST.json
    .venv/bin/python scripts/gpu_pack.py check     here or there: every file present, checksums match
    .venv/bin/python scripts/gpu_pack.py verify    here: pip --dry-run installs the wheels for cp312
    python3 scripts/gpu_pack.py install --target DIR   there: the wheels into DIR (no index, no deps)

Wheels are cp312 manylinux x86-64 (or pure Python), made with `pip download
--no-deps --only-binary=:all:`, at the versions installed in the Python that runs
`pack` (the repo's .venv), else at the pins below. A wheel marked `if-missing` is
installed there only when that Python lacks it or has an older one than the
bundle needs. Standard library only: `install` and `check` run with the GPU
machine's python3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BUNDLE = os.environ.get("KJIT_GPU_BUNDLE") or os.path.join(ROOT, ".gpu_bundle")
MANIFEST = "MANIFEST.json"
PYTHON_VERSION = "3.12"
# pip matches manylinux_2_N exactly: the tags the device README lists, and 2_24
# (apache-tvm-ffi's wheels carry manylinux_2_24 and manylinux_2_28).
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64"]
MAX_BYTES = 60 * 1024 * 1024  # the run sends at most 64 MiB, the working tree included


@dataclass(frozen=True)
class Wheel:
    name: str                 #: distribution name (PEP 503 normalised form is compared)
    pin: Optional[str]        #: version when the packing Python does not have it installed
    required: bool            #: a bundle without it is incomplete
    install: str = "always"   #: "always", or "if-missing" (missing there, or older than min_version)
    min_version: Optional[str] = None
    why: str = ""


WHEELS: List[Wheel] = [
    Wheel("apache-tvm-ffi", "0.1.15.post2", True, why="kjit's ABI (pyproject: >=0.1.15,<0.2)"),
    Wheel("typing-extensions", "4.15.0", True, "if-missing", "4.13", "apache-tvm-ffi needs >=4.13"),
    Wheel("scikit-build-core", "1.1.2", True, "if-missing", "0.10", "builds kjit (pyproject build-system)"),
    Wheel("brainevent", "0.2.1", False, why="the brainevent sample (scripts/run pins 0.2.1)"),
    Wheel("brainunit", "0.5.2", False, why="brainevent's dependency"),
    Wheel("saiunit", "0.5.2", False, why="brainunit's dependency"),
    Wheel("array-api-compat", "1.12.0", False, "if-missing", "1.9", "saiunit's dependency"),
]

# Distributions the GPU machine's python3 has (/work/.library/device/KINDS.md,
# "Python packages already there", read 2026-11-17): a bundled wheel's
# requirement must be one of these or bundled itself.
PRESENT_THERE = {
    "absl-py", "attrs", "cmake", "cupy-cuda13x", "cython", "filelock", "jax", "jax-cuda13-pjrt", "jax-cuda13-plugin",
    "jaxlib", "jinja2", "ml-dtypes", "ninja", "numba", "numba-cuda", "numpy", "opt-einsum", "packaging", "pathspec",
    "pip", "psutil", "pybind11", "pytest", "scikit-build-core", "scipy", "setuptools", "sympy", "torch", "triton",
    "typing-extensions", "wheel", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cublas",
}

XXHASH_DIR = "xxhash"  # the headers: xxhash/usr/include/xxhash.h (a dpkg -x of libxxhash-dev)
XXHASH_HEADERS = ("xxhash.h", "xxh3.h")


def log(msg: str) -> None:
    print(f"[gpu_pack] {msg}", file=sys.stderr, flush=True)


def normalize(name: str) -> str:
    """PEP 503: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version_tuple(version: str) -> tuple:
    """A comparable form of a release version: its leading numbers (4.13.0rc1 -> (4, 13, 0))."""
    parts = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def wheel_filename_info(filename: str) -> Dict[str, str]:
    """name, version, python, abi, platform tags of a wheel file name (PEP 427)."""
    base = os.path.basename(filename)
    if not base.endswith(".whl"):
        raise ValueError(f"not a wheel: {base}")
    parts = base[:-4].split("-")
    if len(parts) not in (5, 6):
        raise ValueError(f"not a wheel file name: {base}")
    return {"name": normalize(parts[0]), "version": parts[1], "python": parts[-3], "abi": parts[-2],
            "platform": parts[-1]}


def wheel_fits(filename: str, python: str = PYTHON_VERSION) -> bool:
    """Whether the wheel installs on CPython `python` on manylinux x86-64."""
    info = wheel_filename_info(filename)
    cp = "cp" + python.replace(".", "")
    pythons = info["python"].split(".")
    abis = info["abi"].split(".")
    platforms = info["platform"].split(".")
    if info["platform"] == "any":
        return any(p in ("py3", cp, "py" + python.replace(".", "")) for p in pythons)
    if not any(p.startswith("manylinux") and p.endswith("x86_64") for p in platforms):
        return False
    if "abi3" in abis:  # the stable ABI: any CPython from the tagged one on
        minor = int(python.split(".")[1])
        return any(re.fullmatch(r"cp3(\d+)", p) and int(p[3:]) <= minor for p in pythons)
    return cp in pythons and cp in abis


def wheel_requirements(path: str) -> List[str]:
    """The distribution names a wheel requires unconditionally (Requires-Dist lines
    without an extra or a marker that excludes CPython 3.12 on Linux)."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    names = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        if re.search(r"python_version\s*<\s*['\"]3\.(\d+)", marker):
            minor = int(re.search(r"python_version\s*<\s*['\"]3\.(\d+)", marker).group(1))
            if minor <= 12:
                continue
        if re.search(r"(sys_platform|platform_system)\s*==\s*['\"](win32|Windows|darwin|Darwin)", marker):
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if m:
            names.append(normalize(m.group(1)))
    return names


def missing_requirements(requirements: Dict[str, Iterable[str]], bundled: Iterable[str],
                         present: Iterable[str] = PRESENT_THERE) -> Dict[str, List[str]]:
    """{wheel: [requirements neither bundled nor present on the GPU machine]} for the
    wheels that have any."""
    have = {normalize(n) for n in bundled} | {normalize(n) for n in present}
    out = {}
    for wheel, reqs in requirements.items():
        lacking = sorted({normalize(r) for r in reqs} - have)
        if lacking:
            out[normalize(wheel)] = lacking
    return out


def installed_version(name: str) -> Optional[str]:
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:  # noqa: BLE001 (not installed, or unreadable metadata)
        return None


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(bundle: str) -> dict:
    with open(os.path.join(bundle, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def check_bundle(bundle: str, python: str = PYTHON_VERSION) -> List[str]:
    """Problems of the bundle at `bundle` (empty when it is complete and intact)."""
    path = os.path.join(bundle, MANIFEST)
    if not os.path.isfile(path):
        return [f"no {path}: run `.venv/bin/python scripts/gpu_pack.py pack` (or scripts/gpu_check --pack)"]
    try:
        manifest = read_manifest(bundle)
    except (OSError, ValueError) as err:
        return [f"{path} is unreadable: {err}"]
    problems = []
    for rel, digest in sorted(manifest.get("files", {}).items()):
        full = os.path.join(bundle, rel)
        if not os.path.isfile(full):
            problems.append(f"missing {rel}")
        elif sha256(full) != digest:
            problems.append(f"{rel}: checksum differs from {MANIFEST} (damaged or replaced)")
    wheels = manifest.get("wheels", {})
    for w in WHEELS:
        entry = wheels.get(normalize(w.name))
        if entry is None:
            if w.required:
                problems.append(f"no {w.name} wheel ({w.why})")
            continue
        if not wheel_fits(entry["file"], python):
            problems.append(f"{entry['file']} does not install on CPython {python} manylinux x86-64")
    for header in XXHASH_HEADERS:
        if manifest.get("xxhash_include") is None or not os.path.isfile(
                os.path.join(bundle, manifest["xxhash_include"], header)):
            problems.append(f"no xxHash header {header} (libxxhash-dev)")
    total = sum(os.path.getsize(os.path.join(bundle, rel)) for rel in manifest.get("files", {})
                if os.path.isfile(os.path.join(bundle, rel)))
    if total > MAX_BYTES:
        problems.append(f"the bundle is {total / 2**20:.1f} MiB, over {MAX_BYTES / 2**20:.0f} MiB")
    return problems


def _download(wheel: Wheel, dest: str, python: str) -> str:
    version = installed_version(wheel.name) or wheel.pin
    spec = f"{wheel.name}=={version}" if version else wheel.name
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", "-d", dest]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    cmd.append(spec)
    before = set(os.listdir(dest))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {spec} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    new = [f for f in set(os.listdir(dest)) - before if f.endswith(".whl")]
    found = [f for f in os.listdir(dest) if f.endswith(".whl") and wheel_filename_info(f)["name"] == normalize(
        wheel.name)]
    if len(found) != 1:
        raise RuntimeError(f"pip download {spec}: expected one wheel, got {sorted(new or found)}")
    return found[0]


def _xxhash(dest: str) -> str:
    """libxxhash-dev's headers under dest/xxhash/usr/include (apt-get download + dpkg -x;
    else this machine's /usr/include copies). Returns the include dir, relative to dest."""
    include_rel = os.path.join(XXHASH_DIR, "usr", "include")
    target = os.path.join(dest, XXHASH_DIR)
    if shutil.which("apt-get") and shutil.which("dpkg"):
        tmp = tempfile.mkdtemp(prefix="kjit-xxhash-")
        try:
            try:
                proc = subprocess.run(["apt-get", "download", "libxxhash-dev"], cwd=tmp, capture_output=True,
                                      text=True, timeout=90)
            except subprocess.TimeoutExpired as err:
                proc = subprocess.CompletedProcess(err.cmd, 1, "", "timed out")
            debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
            if proc.returncode == 0 and len(debs) == 1:
                unpack = os.path.join(tmp, "root")
                subprocess.run(["dpkg", "-x", os.path.join(tmp, debs[0]), unpack], check=True, timeout=120)
                os.makedirs(os.path.join(dest, include_rel), exist_ok=True)
                for header in os.listdir(os.path.join(unpack, "usr", "include")):
                    shutil.copy2(os.path.join(unpack, "usr", "include", header), os.path.join(dest, include_rel))
                with open(os.path.join(target, "SOURCE"), "w", encoding="utf-8") as f:
                    f.write(f"apt-get download libxxhash-dev: {debs[0]} (headers only; dpkg -x)\n")
                return include_rel
            log(f"apt-get download libxxhash-dev failed ({proc.stderr.strip()[-300:]}); copying /usr/include's")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not all(os.path.isfile(os.path.join("/usr/include", h)) for h in XXHASH_HEADERS):
        raise RuntimeError("no xxHash headers: apt-get download libxxhash-dev failed and /usr/include has none "
                           "(apt-get install libxxhash-dev)")
    os.makedirs(os.path.join(dest, include_rel), exist_ok=True)
    for header in ("xxhash.h", "xxh3.h", "xxh_x86dispatch.h"):
        if os.path.isfile(os.path.join("/usr/include", header)):
            shutil.copy2(os.path.join("/usr/include", header), os.path.join(dest, include_rel))
    with open(os.path.join(target, "SOURCE"), "w", encoding="utf-8") as f:
        f.write("copied from /usr/include (libxxhash-dev of the packing machine)\n")
    return include_rel


def pack(bundle: str, python: str = PYTHON_VERSION, optional: bool = True) -> int:
    """Builds the bundle in a new folder and swaps it in, so a failed pack leaves the old one."""
    start = time.perf_counter()
    parent = os.path.dirname(os.path.abspath(bundle))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".gpu_bundle.", dir=parent)
    try:
        wheel_dir = os.path.join(staging, "wheels")
        os.makedirs(wheel_dir)
        wheels = {}
        for w in WHEELS:
            try:
                file = _download(w, wheel_dir, python)
            except Exception as err:  # noqa: BLE001 (an optional wheel may be left out)
                if w.required or not optional:
                    raise
                log(f"left out optional {w.name}: {err}")
                continue
            wheels[normalize(w.name)] = {"file": os.path.join("wheels", file),
                                         "version": wheel_filename_info(file)["version"], "install": w.install,
                                         "min_version": w.min_version, "required": w.required, "why": w.why}
            log(f"{file} ({os.path.getsize(os.path.join(wheel_dir, file)) / 1024:.0f} KiB)")
        requirements = {name: wheel_requirements(os.path.join(staging, e["file"])) for name, e in wheels.items()}
        lacking = missing_requirements(requirements, wheels)
        if lacking:
            # Optional wheels whose requirements are not all there are left out, with their dependants.
            for name in list(lacking):
                if wheels[name]["required"]:
                    raise RuntimeError(f"{name} requires {lacking[name]}, neither bundled nor on the GPU machine")
            log(f"optional wheels with requirements missing there, left out: {lacking}")
            for name in lacking:
                os.remove(os.path.join(staging, wheels.pop(name)["file"]))
        xxhash_include = _xxhash(staging)
        files = {}
        for dirpath, _, filenames in os.walk(staging):
            for fn in filenames:
                full = os.path.join(dirpath, fn)
                files[os.path.relpath(full, staging)] = sha256(full)
        manifest = {
            "created": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "python": python,
            "platforms": PLATFORMS,
            "packed_with": sys.version.split()[0],
            "wheels": wheels,
            "requirements": requirements,
            "xxhash_include": xxhash_include,
            "files": files,
        }
        with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        problems = check_bundle(staging, python)
        if problems:
            raise RuntimeError("the new bundle is incomplete: " + "; ".join(problems))
        old = bundle + ".old"
        shutil.rmtree(old, ignore_errors=True)
        if os.path.exists(bundle):
            os.rename(bundle, old)
        os.rename(staging, bundle)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(bundle, rel)) for rel in manifest["files"])
    log(f"packed {bundle}: {len(wheels)} wheels, xxHash headers, {total / 2**20:.1f} MiB in "
        f"{time.perf_counter() - start:.1f} s")
    return 0


def install_plan(manifest: dict, versions: Dict[str, Optional[str]]) -> List[dict]:
    """The wheels to install, given {name: version installed there, or None}: every
    `always` wheel, and `if-missing` ones that are missing or older than min_version."""
    plan = []
    for name, entry in sorted(manifest.get("wheels", {}).items()):
        have = versions.get(name)
        if entry.get("install") == "if-missing" and have is not None:
            need = entry.get("min_version")
            if need is None or version_tuple(have) >= version_tuple(need):
                continue
        plan.append(dict(entry, name=name, installed=have))
    return plan


def install(bundle: str, target: str) -> int:
    problems = check_bundle(bundle, "{}.{}".format(*sys.version_info[:2]))
    if problems:
        for p in problems:
            log(p)
        return 1
    manifest = read_manifest(bundle)
    versions = {name: installed_version(name) for name in manifest.get("wheels", {})}
    plan = install_plan(manifest, versions)
    for name, have in sorted(versions.items()):
        if name not in {p["name"] for p in plan}:
            log(f"{name}: {have} already there, bundled {manifest['wheels'][name]['version']} not installed")
    if not plan:
        return 0
    os.makedirs(target, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
           "--no-compile", "--no-cache-dir", "--upgrade", "--target", target]
    cmd += [os.path.join(bundle, p["file"]) for p in plan]
    log("installing " + ", ".join(f"{p['name']} {p['version']}" for p in plan) + f" into {target}")
    return subprocess.run(cmd).returncode


def verify(bundle: str, python: str = PYTHON_VERSION) -> int:
    """pip's own resolution of the bundled wheels for CPython `python` (a dry run)."""
    problems = check_bundle(bundle, python)
    for p in problems:
        log(p)
    if problems:
        return 1
    manifest = read_manifest(bundle)
    with tempfile.TemporaryDirectory(prefix="kjit-gpu-verify-") as tmp:
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--disable-pip-version-check", "--no-index",
               "--no-deps", "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--target",
               tmp]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        cmd += [os.path.join(bundle, e["file"]) for e in manifest["wheels"].values()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Would install")]
    if proc.returncode != 0 or not lines:
        log(f"pip --dry-run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return 1
    log(f"CPython {python}: {lines[-1]}")
    return 0


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["pack", "check", "verify", "install", "list"])
    ap.add_argument("--bundle", default=DEFAULT_BUNDLE, help="the bundle folder (default: .gpu_bundle in the repo)")
    ap.add_argument("--target", help="install: the folder for the wheels (then PYTHONPATH=DIR)")
    ap.add_argument("--python-version", default=PYTHON_VERSION, help="the GPU machine's CPython (default 3.12)")
    ap.add_argument("--required-only", action="store_true", help="pack: fail if an optional wheel cannot be had")
    args = ap.parse_args(argv)
    if args.command == "pack":
        return pack(args.bundle, args.python_version, optional=not args.required_only)
    if args.command == "check":
        problems = check_bundle(args.bundle, args.python_version)
        for p in problems:
            log(p)
        if not problems:
            m = read_manifest(args.bundle)
            total = sum(os.path.getsize(os.path.join(args.bundle, r)) for r in m["files"])
            log(f"{args.bundle}: complete ({len(m['wheels'])} wheels, {total / 2**20:.1f} MiB, packed "
                f"{m['created']})")
        return 1 if problems else 0
    if args.command == "verify":
        return verify(args.bundle, args.python_version)
    if args.command == "install":
        if not args.target:
            ap.error("install needs --target DIR")
        return install(args.bundle, args.target)
    for w in WHEELS:  # list
        print(f"{w.name:20} {installed_version(w.name) or w.pin or 'latest':14} "
              f"{'required' if w.required else 'optional'} {w.install:10} {w.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
