"""The kjit command line (docs/cli.md): --version, doctor, cache list/info/prune/clear,
exit codes (0 success, 1 failure, 2 usage error) and no traceback for a user mistake."""

import errno
import fcntl
import os
import subprocess
import sys
import time

import pytest

import kjit

SOURCE = "#include <kjit/kernel.h>\nint64_t twice(int64_t x) { return 2 * x; }\n"
FUNCTIONS = {"twice": "x: int64"}


# The commands never need torch, whose import (through tvm_ffi) takes seconds per process;
# doctor runs as `python -m kjit` itself.
NO_TORCH_MAIN = 'import sys; sys.modules["torch"] = None; from kjit.cli import main; sys.exit(main(sys.argv[1:]))'


def cli(*args, env=None, as_module=False):
    argv = [sys.executable, "-m", "kjit"] if as_module else [sys.executable, "-c", NO_TORCH_MAIN]
    proc = subprocess.run([*argv, *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def build(name, cache, source=SOURCE):
    return kjit.load_inline(name, cpp_sources=source, functions=FUNCTIONS, build_directory=str(cache))


def entry_dirs(cache):
    return sorted(p.name for p in cache.iterdir() if p.is_dir() and p.name != "locks" and not p.name.startswith("."))


def test_version_and_usage_errors():
    proc = cli("--version", as_module=True)
    assert proc.returncode == 0 and proc.stdout.startswith(f"kjit {kjit.__version__} (tvm-ffi "), proc.stdout
    proc = cli()
    assert proc.returncode == 2 and "kjit: error: name a command (kjit --help lists them)" in proc.stderr
    proc = cli("cache", "prune")
    assert proc.returncode == 2
    assert "kjit: error: kjit cache prune: give --older-than DAYS, --max-size SIZE or both" in proc.stderr
    proc = cli("cache", "prune", "--max-size", "2Q")
    assert proc.returncode == 2
    assert "kjit: error: --max-size: expected a size such as 500M, 2G or a number of bytes, got '2Q'" in proc.stderr
    proc = cli("cache", "prune", "--older-than", "-1")
    assert proc.returncode == 2 and "--older-than: expected a number of days >= 0, got -1.0" in proc.stderr
    proc = cli("cache", "--help")
    assert proc.returncode == 0 and "list" in proc.stdout and "prune" in proc.stdout


def test_stubgen_reports_a_missing_file_and_a_compile_error_without_a_traceback(tmp_path):
    proc = cli("stubgen", "--name", "x", tmp_path / "missing.cc")
    assert proc.returncode == 2
    assert f"kjit: error: cannot read the source file '{tmp_path / 'missing.cc'}': No such file or directory" \
        in proc.stderr
    bad = tmp_path / "bad.cc"
    bad.write_text("#include <kjit/kernel.h>\nint64_t twice(int64_t x) { return 2 * ; }\n")
    proc = cli("stubgen", "--name", "bad_cli", "-f", "twice=x: int64", bad,
               env={"KJIT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 1 and proc.stderr.startswith("kjit: error: "), proc.stderr


def test_doctor_names_each_tool_and_what_it_enables():
    proc = cli("doctor", as_module=True)
    assert proc.returncode == 0, proc.stderr
    for line in ("C++ compiler ok: ", "NVRTC", "CUDA driver", "tvm_ffi", "torch", "jax", "numpy"):
        assert line in proc.stdout, proc.stdout


def test_cache_list_shows_entries_with_what_made_them(tmp_path):
    cache = tmp_path / "cache"
    build("cli_one", cache)
    build("cli_two", cache, SOURCE.replace("2 *", "3 *"))
    proc = cli("cache", "--dir", cache, "list")
    assert proc.returncode == 0, proc.stderr
    assert "cli_one" in proc.stdout and "cli_two" in proc.stdout
    assert f"(kjit {kjit.__version__}, tvm-ffi " in proc.stdout
    assert "2 entries, " in proc.stdout and str(cache) in proc.stdout
    info = cli("cache", "--dir", cache, "info")
    assert "entries:    2 (" in info.stdout and "module:" in info.stdout
    lookalike = cache / ("notes-" + "0" * 32)  # named like an entry, but not kjit's: never listed or removed
    lookalike.mkdir()
    listed = cli("cache", "--dir", cache, "list").stdout
    assert "notes" not in listed.split(" entries, ")[0]  # not an entry; named as skipped on the last line
    assert listed.rstrip().endswith(f"skipped 1 files kjit did not make: {lookalike}/ (not listed)"), listed
    cli("cache", "--dir", cache, "clear")
    assert lookalike.is_dir()
    empty = cli("cache", "--dir", tmp_path / "none", "list")
    assert empty.returncode == 0 and "0 entries" in empty.stdout
    assert not (tmp_path / "none").exists()  # listing creates nothing


def test_prune_by_age_and_size_under_each_entrys_lock(tmp_path):
    cache = tmp_path / "cache"
    old, new = build("cli_old", cache), build("cli_new", cache, SOURCE.replace("2 *", "3 *"))
    old_dir, new_dir = os.path.dirname(old.path), os.path.dirname(new.path)
    long_ago = time.time() - 10 * 86400
    os.utime(old_dir, (long_ago, long_ago))
    dry = cli("cache", "--dir", cache, "prune", "--older-than", "5", "--dry-run")
    assert dry.returncode == 0 and "would remove module cli_old" in dry.stdout and os.path.isdir(old_dir)
    with open(os.path.join(cache, "locks", os.path.basename(old_dir) + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a build of it is running: it stays
        busy = cli("cache", "--dir", cache, "prune", "--older-than", "5")
        assert "left module cli_old: another process is building it" in busy.stdout and os.path.isdir(old_dir)
    proc = cli("cache", "--dir", cache, "prune", "--older-than", "5")
    assert proc.returncode == 0 and "removed module cli_old" in proc.stdout
    assert not os.path.exists(old_dir) and os.path.isdir(new_dir)
    assert sorted(os.listdir(cache / "locks")) == [os.path.basename(new_dir) + ".lock"]  # no lock file left behind
    # A cache hit marks the entry used: an old mtime becomes now.
    os.utime(new_dir, (long_ago, long_ago))
    again = subprocess.run([sys.executable, "-c", f"import kjit; kjit.load_inline('cli_new', cpp_sources={SOURCE.replace('2 *', '3 *')!r}, "
                            f"functions={FUNCTIONS!r}, build_directory={str(cache)!r})"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert time.time() - os.stat(new_dir).st_mtime < 600
    proc = cli("cache", "--dir", cache, "prune", "--max-size", "1K")
    assert "removed module cli_new" in proc.stdout and entry_dirs(cache) == []
    build("cli_next", cache, SOURCE.replace("2 *", "7 *"))  # (cli_new is still loaded in this process)
    proc = cli("cache", "--dir", cache, "clear")
    assert proc.returncode == 0 and "removed 1 entries" in proc.stdout and entry_dirs(cache) == []


def test_the_size_cap_removes_the_least_recently_used_after_a_build(tmp_path):
    cache = tmp_path / "cache"
    first = build("cli_cap_a", cache)
    size = sum(os.path.getsize(os.path.join(os.path.dirname(first.path), f))
               for f in os.listdir(os.path.dirname(first.path)))
    code = (f"import kjit; kjit.load_inline('cli_cap_b', cpp_sources={SOURCE.replace('2 *', '5 *')!r}, "
            f"functions={FUNCTIONS!r}, build_directory={str(cache)!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, KJIT_CACHE_MAX_SIZE=str(int(size * 1.5))))
    assert proc.returncode == 0, proc.stderr
    assert [d.split("-")[0] for d in entry_dirs(cache)] == ["cli_cap_b"]
    proc = subprocess.run([sys.executable, "-c", code.replace("cli_cap_b", "cli_cap_c")], capture_output=True,
                          text=True, env=dict(os.environ, KJIT_CACHE_MAX_SIZE="lots"))
    assert proc.returncode == 0, proc.stderr
    assert "[kjit] KJIT_CACHE_MAX_SIZE='lots' is not a size (e.g. 500M, 2G, or bytes); ignored" in proc.stderr
    assert len(entry_dirs(cache)) == 2


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("1024", 1024), ("2K", 2048), ("500M", 500 << 20), ("2G", 2 << 30), ("1T", 1 << 40),
    ("3MiB", 3 << 20), ("4kb", 4096), ("7B", 7), ("", -1), ("x", -1), ("-1", -1), ("1.5G", -1), ("9" * 19, -1),
    ("9999999T", -1), ("2P", -1),
])
def test_sizes_parse_as_the_cap_and_prune_take_them(text, expected):
    import tvm_ffi  # noqa: PLC0415
    assert tvm_ffi.get_global_func("kjit.parse_byte_size")(text) == expected


def test_a_long_build_talks_with_kjit_verbose(tmp_path):
    """KJIT_VERBOSE=1 makes every build verbose; while the compiler runs a line comes
    every KJIT_PROGRESS_SECONDS (3 by default)."""
    slow = tmp_path / "slow-g++"
    slow.write_text('#!/bin/sh\nsleep 1.5\nexec g++ "$@"\n')
    slow.chmod(0o755)
    code = ('import sys; sys.modules["torch"] = None\nimport kjit\n'
            f'kjit.load_inline("slow_build", cpp_sources={SOURCE!r}, functions={FUNCTIONS!r}, '
            f'build_directory={str(tmp_path / "cache")!r})')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, CXX=str(slow), KJIT_VERBOSE="1", KJIT_PROGRESS_SECONDS="0.5"))
    assert proc.returncode == 0, proc.stderr
    assert "[kjit]   still compiling module 'slow_build' (" in proc.stderr, proc.stderr
    assert "[kjit] module 'slow_build': published " in proc.stderr, proc.stderr


# ---- what kjit touches (docs/cache.md): only what carries its own magic and checksum ----

MD5 = "0123456789abcdef0123456789abcdef"


def make_foreign_files(cache):
    """The user's files in a cache directory, each named like something kjit makes
    there; returns {path: contents}."""
    files = {
        cache / f"data-{MD5}" / "manifest": "the user's manifest",  # an md5-named data folder
        cache / f"data-{MD5}" / "rows.csv": "1,2",
        cache / "cuda-kernels" / f"add-sm_80-{MD5}.cubin": "not sealed",
        cache / "locks" / "mine.lock": "",
        cache / "locks" / f"data-{MD5}.lock": "x",
        cache / f".tmp-photos-{MD5}-Ab12Cd" / "img.jpg": "jpg",
        cache / ".tmp-old" / "a.txt": "old",
        cache / "failed" / f"notes-{MD5}.cc": "// mine",
        cache / "toolchains" / "gcc.version": "mine",
        cache / "notes.txt": "notes",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    two_days_ago = time.time() - 2 * 86400
    for folder in (cache / ".tmp-old", cache / f".tmp-photos-{MD5}-Ab12Cd"):
        os.utime(folder, (two_days_ago, two_days_ago))
    return files


def skipped_of(cache, files):
    """What kjit reports it left: each file in a folder of its own, else the user's
    top-level file or folder (a folder ends in '/')."""
    out = set()
    for path in files:
        top = path.relative_to(cache).parts[0]
        if top in ("locks", "cuda-kernels", "failed", "toolchains") or path.parent == cache:
            out.add(str(path))
        else:
            out.add(str(cache / top) + "/")
    return sorted(out)


def test_cache_maintenance_touches_only_what_kjit_made(tmp_path):
    """kjit cache list/clear and a plain cache miss leave every file kjit did not make
    (an md5-named folder with a 'manifest', any file in cuda-kernels/, locks/*.lock,
    .tmp-* folders however old) and say what they skipped; the Python side gets the
    same list from kjit.cache_list and kjit.cache_prune."""
    import tvm_ffi  # noqa: PLC0415

    cache = tmp_path / "cache"
    build("cli_mine_a", cache)
    build("cli_mine_b", cache, SOURCE.replace("2 *", "3 *"))
    files = make_foreign_files(cache)
    skipped = skipped_of(cache, files)
    line = f"skipped {len(skipped)} files kjit did not make: {', '.join(skipped)}"
    listing = cli("cache", "--dir", cache, "list")
    assert listing.returncode == 0, listing.stderr
    assert "2 entries, " in listing.stdout and "data" not in listing.stdout.split("2 entries, ")[0]
    assert listing.stdout.rstrip().splitlines()[-1] == line + " (not listed)"
    assert list(tvm_ffi.get_global_func("kjit.cache_list")(str(cache))["skipped"]) == skipped
    miss = subprocess.run([sys.executable, "-c", 'import sys; sys.modules["torch"] = None; import kjit; '
                           f"kjit.load_inline('cli_mine_c', cpp_sources={SOURCE.replace('2 *', '5 *')!r}, "
                           f"functions={FUNCTIONS!r}, build_directory={str(cache)!r})"],
                          capture_output=True, text=True, timeout=600)
    assert miss.returncode == 0, miss.stderr  # a cache miss cleans up killed builds: none of these
    clear = cli("cache", "--dir", cache, "clear")
    assert clear.returncode == 0, clear.stderr
    assert "removed 3 entries" in clear.stdout and clear.stdout.rstrip().splitlines()[-1] == line
    for path, text in files.items():
        assert path.read_text() == text, path
    assert not [p for p in entry_dirs(cache) if p.startswith("cli_mine")]
    assert sorted(os.listdir(cache / "locks")) == sorted(["mine.lock", f"data-{MD5}.lock"])
    result = tvm_ffi.get_global_func("kjit.cache_prune")(str(cache), -1, -1, True, False)
    assert list(result["skipped"]) == skipped and list(result["removed"]) == []


def test_clear_on_a_cache_it_cannot_write_says_why_and_fails(tmp_path):
    """Not 'another process is building it' and exit 0: the system's reason, the
    path, exit 1, and the entry whole (nothing deleted before the failure)."""
    cache = tmp_path / "cache"
    build("cli_ro", cache)
    (entry,) = entry_dirs(cache)
    if os.geteuid() == 0:  # root writes anywhere: an immutable directory refuses even root
        if subprocess.run(["chattr", "+i", str(cache)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not available here")
        undo, reason = ["chattr", "-i", str(cache)], os.strerror(errno.EPERM)
    else:
        cache.chmod(0o500)
        undo, reason = ["chmod", "700", str(cache)], os.strerror(errno.EACCES)
    try:
        proc = cli("cache", "--dir", cache, "clear")
    finally:
        subprocess.run(undo, check=True)
    assert proc.returncode == 1, proc.stdout
    assert proc.stderr == f"kjit: error: could not remove module cli_ro: cannot remove {cache / entry}: {reason}\n"
    assert "another process is building it" not in proc.stdout
    assert "removed 0 entries (0 B) from " in proc.stdout and "; 1 could not be removed" in proc.stdout
    assert (cache / entry / "manifest").is_file() and entry_dirs(cache) == [entry]


def test_doctor_runs_the_check_every_build_runs_on_the_cache(tmp_path):
    """A cache every build refuses (writable by others, no sticky bit) is not 'cache
    ok': doctor prints the refusal a build meets, word for word, and exits 1."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code = (f"import sys; sys.modules['torch'] = None\nimport kjit\nkjit.load_inline('doc_ww', "
            f"cpp_sources={SOURCE!r}, functions={FUNCTIONS!r})")
    build_proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                                env=dict(os.environ, KJIT_CACHE_DIR=str(shared)))
    refusal = build_proc.stderr.strip().splitlines()[-1]
    assert refusal.startswith("kjit.errors.CacheError: kjit: refusing the cache directory "), build_proc.stderr
    proc = cli("doctor", env={"KJIT_CACHE_DIR": str(shared)}, as_module=True)
    assert proc.returncode == 1, proc.stdout
    (line,) = [x for x in proc.stdout.splitlines() if x.strip().startswith("cache ")]
    assert line == (f"  cache        REFUSED: {refusal.split(': ', 1)[1]} -> where builds are kept (KJIT_CACHE_DIR) "
                    "unavailable")
    shared.chmod(0o700)
    ok = cli("doctor", env={"KJIT_CACHE_DIR": str(shared)}, as_module=True)
    assert f"  cache        ok: {shared} -> " in ok.stdout and ok.returncode == 0, ok.stdout


def imported_modules(stderr):
    """The modules a process imported, from PYTHONPROFILEIMPORTTIME's lines."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_version_is_fast_and_says_what_cache_list_says(tmp_path):
    """--version imports neither tvm_ffi (which imports torch: seconds) nor libkjit,
    and the tvm-ffi version it prints is the one cache entries record and cache list
    prints: both come from kjit._versions."""
    from kjit._versions import version_text, versions  # noqa: PLC0415

    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    script = os.path.join(os.path.dirname(sys.executable), "kjit")
    commands = [[sys.executable, "-m", "kjit", "--version"]] + ([[script, "--version"]] if os.path.isfile(script) else [])
    for command in commands:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == version_text() + "\n"
        assert not {"tvm_ffi", "torch", "kjit._lib", "numpy"} & imported_modules(proc.stderr), command
    v = versions()
    assert version_text().startswith(f"kjit {kjit.__version__} (tvm-ffi {v['tvm-ffi']}")
    cache = tmp_path / "cache"
    build("cli_version", cache)
    listing = cli("cache", "--dir", cache, "list").stdout
    assert f"(kjit {kjit.__version__}, tvm-ffi {v['tvm-ffi']}, " in listing  # what made the entry
    assert f"; this is {version_text()}\n" in listing


@pytest.mark.parametrize("command", ["build", "stubgen"])
def test_bad_values_are_one_line_and_exit_2(tmp_path, command):
    """An existing folder as the output and a source that is not UTF-8: kjit's own
    message, one line, exit 2, no traceback (cli() checks that)."""
    (tmp_path / "k.cc").write_text(SOURCE)
    latin = tmp_path / "latin.cc"
    latin.write_bytes(b"// caf\xe9\n")
    out = ["-o", tmp_path / "m.so"] if command == "build" else []
    proc = cli(command, "--name", "m", *out, "-f", "twice=x: int64", latin,
               env={"KJIT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"kjit: error: kjit.load_inline: the source file '{latin}' is not UTF-8 text "
                           "(invalid continuation byte at byte 6)\n")
    if command == "build":
        proc = cli("build", "--name", "m", "-o", tmp_path, tmp_path / "k.cc")
        assert proc.returncode == 2
        assert proc.stderr == f"kjit: error: kjit.build: output '{tmp_path}' is a folder; name the library file (e.g. m.so)\n"
