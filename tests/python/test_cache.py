"""The build cache's guarantees: damaged entries are rebuilt, foreign ones refused, files private, changed
headers noticed, killed builds cleaned up, and every failure a clear error.

Loads that would crash a process with a damaged library run in a fresh interpreter whose exit status is checked.
"""

import fcntl
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time

import pytest

import kjit

SOURCE = "#include <kjit/kernel.h>\nint64_t twice(int64_t x) { return 2 * x; }\n"
OTHER_SOURCE = "#include <kjit/kernel.h>\nint64_t twice(int64_t x) { return 3 * x + 7; }\n"
FUNCTIONS = {"twice": "x: int64"}
IS_ROOT = os.geteuid() == 0


# The children never need torch; blocking it keeps each fresh interpreter fast (tvm_ffi imports it if present).
NO_TORCH = 'import sys\nsys.modules["torch"] = None\n'


def run_python(code, cache_dir, cwd=None, **env):
    """Runs `code` in a fresh interpreter with its own KJIT_CACHE_DIR; returns the CompletedProcess."""
    full_env = dict(os.environ, KJIT_CACHE_DIR=str(cache_dir), **env)
    return subprocess.run([sys.executable, "-c", NO_TORCH + textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=180, cwd=cwd)


def loader(name, source=SOURCE, **options):
    return f"""
        import kjit
        mod = kjit.load_inline({name!r}, cpp_sources={source!r}, functions={FUNCTIONS!r}, **{options!r})
        print("VALUE", mod.twice(21))
        print("PATH", mod.path)
        print("HIT", mod.cache_hit)
    """


def parse(proc):
    """(value, path, hit) printed by `loader`; the process must have exited normally."""
    assert proc.returncode == 0, f"exit status {proc.returncode}:\n{proc.stderr}"
    value = int(re.search(r"^VALUE (.*)$", proc.stdout, re.M).group(1))
    path = re.search(r"^PATH (.*)$", proc.stdout, re.M).group(1)
    hit = re.search(r"^HIT (.*)$", proc.stdout, re.M).group(1) == "True"
    return value, path, hit


def error_of(proc, kind):
    """The message of the `kind` error the process died with."""
    assert proc.returncode == 1, f"exit status {proc.returncode}:\n{proc.stderr}"
    match = re.search(rf"^kjit\.errors\.{kind}: (.*)$", proc.stderr, re.M)
    assert match, proc.stderr
    return match.group(1)


def section(path, name):
    """(offset, size) of an ELF64 section, read from the section headers."""
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        base = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, base)
        end = data.index(b"\0", strtab_off + name_off)
        if data[strtab_off + name_off:end].decode() == name:
            return struct.unpack_from("<QQ", data, base + 0x18)
    raise AssertionError(f"{path} has no section {name}")


def truncate_half(path, other):
    os.truncate(path, os.path.getsize(path) // 2)


def zero_tail(path, other):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(b"\0" * (size - size // 2))


def flip_text(path, other):
    offset, size = section(path, ".text")
    with open(path, "r+b") as f:
        f.seek(offset)
        code = bytearray(f.read(size))
        for i in range(0, len(code), 3):
            code[i] ^= 0xFF
        f.seek(offset)
        f.write(code)


def other_module(path, other):
    shutil.copyfile(other, path)  # a valid library, but not the one this entry was built from


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def entry_dir(path):
    return os.path.dirname(path)


# ---- damage: rebuilt, never a crash ----


@pytest.mark.parametrize("damage", [truncate_half, zero_tail, flip_text, other_module])
def test_damaged_library_is_rebuilt(cache, damage):
    value, path, hit = parse(run_python(loader("damage"), cache))
    assert (value, hit) == (42, False)
    _, other, _ = parse(run_python(loader("damage_other", OTHER_SOURCE), cache))
    damage(path, other)
    proc = run_python(loader("damage"), cache)
    value, path2, hit = parse(proc)  # exit status 0: the damaged file was never loaded
    assert (value, path2, hit) == (42, path, False)
    assert f"[kjit] cached module 'damage' at {entry_dir(path)} is damaged" in proc.stderr
    assert "does not match the checksum recorded when it was built); rebuilding it" in proc.stderr
    assert parse(run_python(loader("damage"), cache))[2]  # the rebuilt entry is a hit again


@pytest.mark.parametrize("damage", ["missing", "edited"])
def test_damaged_integrity_record_is_rebuilt(cache, damage):
    _, path, _ = parse(run_python(loader("record"), cache))
    manifest = os.path.join(entry_dir(path), "manifest")
    if damage == "missing":
        os.remove(manifest)
    else:
        text = open(manifest).read()
        with open(manifest, "w") as f:
            f.write(text.replace("library ", "library 1"))
    proc = run_python(loader("record"), cache)
    assert parse(proc)[:3] == (42, path, False)
    reason = "it has no integrity record" if damage == "missing" else "its integrity record is damaged"
    assert f"is damaged ({reason}); rebuilding it" in proc.stderr


# ---- foreign code: refused ----


def test_library_writable_by_others_is_refused(cache):
    _, path, _ = parse(run_python(loader("writable"), cache))
    os.chmod(path, os.stat(path).st_mode | stat.S_IWOTH)
    message = error_of(run_python(loader("writable"), cache), "CacheError")
    assert message.startswith(f"kjit: refusing the cache file {path}: it is writable by others (mode 0")
    assert f"Run 'chmod go-w {path}' or remove it" in message


def test_entry_writable_by_group_is_refused(cache):
    _, path, _ = parse(run_python(loader("group_writable"), cache))
    os.chmod(entry_dir(path), 0o770)
    message = error_of(run_python(loader("group_writable"), cache), "CacheError")
    assert message.startswith(f"kjit: refusing the cache entry {entry_dir(path)}: it is writable by its group "
                              "(mode 0770, expected no group or other write permission)")


@pytest.mark.skipif(not IS_ROOT, reason="changing a file's owner needs root")
@pytest.mark.parametrize("what", ["library", "entry"])
def test_entry_of_another_user_is_refused(cache, what):
    _, path, _ = parse(run_python(loader("foreign"), cache))
    target = path if what == "library" else entry_dir(path)
    os.chown(target, 65534, -1)  # nobody
    message = error_of(run_python(loader("foreign"), cache), "CacheError")
    kind = "cache file" if what == "library" else "cache entry"
    assert message.startswith(f"kjit: refusing the {kind} {target}: it is owned by uid 65534, not by you (uid 0)")


def test_cache_root_writable_by_others_is_refused(cache):
    cache.mkdir()
    os.chmod(cache, 0o777)
    message = error_of(run_python(loader("open_root"), cache), "CacheError")
    assert message.startswith(f"kjit: refusing the cache directory {cache}: it is writable by others (mode 0777) "
                              "without the sticky bit")


def test_sticky_shared_root_gets_a_private_subdirectory(cache):
    cache.mkdir()
    os.chmod(cache, 0o1777)
    value, path, _ = parse(run_python(loader("sticky"), cache))
    mine = cache / f"kjit-{os.geteuid()}"
    assert value == 42
    assert path.startswith(str(mine) + "/")
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700


def test_created_directories_and_files_are_private(cache):
    _, path, _ = parse(run_python(loader("private_modes"), cache))
    locks = cache / "locks"
    modes = {str(cache): 0o700, str(locks): 0o700, entry_dir(path): 0o700, path: 0o700}
    for lock in locks.iterdir():
        modes[str(lock)] = 0o600
    for name in os.listdir(entry_dir(path)):
        modes.setdefault(os.path.join(entry_dir(path), name), 0o600)
    assert len(modes) >= 8  # root, locks, a lock, the entry, its .so, .cc, manifest, build.log
    actual = {p: stat.S_IMODE(os.stat(p).st_mode) for p in modes}
    assert actual == modes


# ---- unreadable entries and unwritable caches: clear errors ----


def test_unreadable_entry_is_a_cache_error_with_errno_text(cache):
    _, path, _ = parse(run_python(loader("unreadable"), cache))
    manifest = os.path.join(entry_dir(path), "manifest")
    os.remove(manifest)
    os.mkdir(manifest, 0o700)  # open() succeeds, read() fails with EISDIR
    message = error_of(run_python(loader("unreadable"), cache), "CacheError")
    assert message == f"kjit: cannot read the cache file {manifest}: Is a directory"


@pytest.mark.skipif(IS_ROOT, reason="root reads any file")
def test_unreadable_library_is_a_cache_error(cache):
    _, path, _ = parse(run_python(loader("no_read"), cache))
    os.chmod(path, 0)
    message = error_of(run_python(loader("no_read"), cache), "CacheError")
    assert message == f"kjit: cannot read the cache file {path}: Permission denied"


def test_cache_dir_that_cannot_be_created_is_a_cache_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    where = blocker / "cache"
    with pytest.raises(kjit.CacheError) as info:
        kjit.load_inline("unwritable", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(where))
    assert str(info.value) == f"kjit: cannot create the cache directory {where}: Not a directory"


@pytest.mark.skipif(IS_ROOT, reason="root writes anywhere")
def test_read_only_cache_dir_is_a_cache_error(tmp_path):
    where = tmp_path / "ro"
    where.mkdir()
    os.chmod(where, 0o500)
    with pytest.raises(kjit.CacheError) as info:
        kjit.load_inline("read_only", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(where))
    assert str(where) in str(info.value)
    assert "Permission denied" in str(info.value)


def test_compiler_that_produces_no_library_is_a_compile_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "/bin/true")  # exits 0 for --version and for the compile, writes nothing
    with pytest.raises(kjit.CompileError) as info:
        kjit.load_inline("no_library", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path))
    err = info.value
    assert str(err).startswith("kjit: compiling module 'no_library' reported success but produced no library "
                               "no_library.so (the compiler printed: nothing)\ncommand: /bin/true ")
    assert err.command.startswith("/bin/true -std=c++17")
    assert err.log == ""
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("no_library", ".tmp-"))]


@pytest.mark.parametrize("length", [240, 400])
def test_long_module_names_work(tmp_path, length):
    name = "m" * (length - 1) + "x"
    mod = kjit.load_inline(name, cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path))
    assert mod.twice(5) == 10
    assert mod.name == name
    for part in os.path.relpath(mod.path, tmp_path).split("/"):
        assert len(part) <= 120
    other = kjit.load_inline(name[:-1] + "y", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path))
    assert os.path.dirname(other.path) != os.path.dirname(mod.path)  # same prefix, different names: no clash


def test_non_ascii_module_name_is_a_spec_error(tmp_path):
    with pytest.raises(kjit.SpecError) as info:
        kjit.load_inline("mod\u00e9", cpp_sources=SOURCE, functions=FUNCTIONS, build_directory=str(tmp_path))
    assert str(info.value) == ("module name 'mod\u00e9' is not a C identifier (letters, digits and '_', "
                               "not starting with a digit); it has a non-ASCII character '\u00e9' (U+00E9)")


# ---- changed headers are noticed ----

HEADER_SOURCE = '#include <kjit/kernel.h>\n#include "val.h"\nint64_t twice(int64_t x) { return VALUE + 0 * x; }\n'


def rewrite(path, text):
    """Replaces a header's text, keeping its size, with an mtime that surely differs."""
    old = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns + 1_000_000_000))


def test_changed_header_in_extra_include_paths_is_rebuilt(tmp_path, cache):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "val.h"
    header.write_text("#define VALUE 1\n")
    code = loader("header_dep", HEADER_SOURCE, extra_include_paths=[str(inc)])
    assert parse(run_python(code, cache))[::2] == (1, False)
    assert parse(run_python(code, cache))[::2] == (1, True)
    rewrite(header, "#define VALUE 2\n")  # same size: the contents decide
    assert parse(run_python(code, cache))[::2] == (2, False)
    assert parse(run_python(code, cache))[::2] == (2, True)
    os.utime(header, ns=(0, os.stat(header).st_mtime_ns + 1_000_000_000))  # touched, not changed
    assert parse(run_python(code, cache))[::2] == (2, True)


def test_changed_header_reached_by_a_relative_include_is_rebuilt(tmp_path, cache):
    (tmp_path / "inc").mkdir()
    (tmp_path / "common").mkdir()
    (tmp_path / "inc" / "val.h").write_text('#include "../common/more.h"\n')
    more = tmp_path / "common" / "more.h"
    more.write_text("#define VALUE 10\n")
    code = loader("relative_dep", HEADER_SOURCE, extra_include_paths=["inc"], verbose=True)
    assert parse(run_python(code, cache, cwd=tmp_path))[::2] == (10, False)
    rewrite(more, "#define VALUE 20\n")
    proc = run_python(code, cache, cwd=tmp_path)
    assert parse(proc)[::2] == (20, False)
    assert f"[kjit] module 'relative_dep': {more} changed since it was built; rebuilding" in proc.stderr
    more.unlink()  # a header that is gone: rebuilt, and the compiler says what is missing
    proc = run_python(code, cache, cwd=tmp_path)
    assert "kjit.errors.CompileError" in proc.stderr
    assert "more.h" in proc.stderr


# ---- killed builds are cleaned up ----

HANGING_COMPILER = """#!/bin/sh
for a in "$@"; do [ "$a" = --version ] && exec g++ --version; done
: > "$KJIT_TEST_MARK"
exec sleep 120
"""


def build_dirs(cache):
    return sorted(p.name for p in cache.iterdir() if p.name.startswith(".tmp-"))


def kill_a_build(tmp_path, cache, name):
    """Starts a build of `name` whose compiler hangs, kills it; returns the build
    directory it left (kjit's own: it holds the build marker)."""
    compiler = tmp_path / "hang-c++"
    compiler.write_text(HANGING_COMPILER)
    compiler.chmod(0o755)
    mark = tmp_path / f"started-{name}"
    env = dict(os.environ, KJIT_CACHE_DIR=str(cache), CXX=str(compiler), KJIT_TEST_MARK=str(mark))
    proc = subprocess.Popen([sys.executable, "-c", NO_TORCH + textwrap.dedent(loader(name))], env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate()[1]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    left = [d for d in build_dirs(cache) if d.startswith(f".tmp-{name}-")]
    assert len(left) == 1, build_dirs(cache)
    return cache / left[0]


def test_killed_build_leaves_a_directory_the_next_build_removes(tmp_path, cache):
    left = kill_a_build(tmp_path, cache, "killed")
    assert (left / "kjit-build").read_text().startswith(f"kjit-build {left.name[5:-7]}\n// kjit-stamp ")
    assert parse(run_python(loader("killed"), cache))[::2] == (42, False)
    assert build_dirs(cache) == []


def test_build_directories_kjit_did_not_make_or_in_use_are_kept(tmp_path, cache):
    """A cache miss removes a build directory a killed build left only when it holds
    kjit's build marker (magic and checksum) and its entry's lock is free: a folder a
    person named `.tmp-...` stays, whatever its name or age, with its contents."""
    held = kill_a_build(tmp_path, cache, "held")
    key = "0123456789abcdef0123456789abcdef"
    lookalike = cache / f".tmp-photos-{key}-Ab12Cd"  # named like a build directory, not kjit's
    ancient = cache / ".tmp-ancient-Qq11Ww"
    for d in (lookalike, ancient):
        d.mkdir()
        (d / "keep.txt").write_text("the user's")
    two_days_ago = time.time() - 2 * 86400
    for d in (lookalike, ancient):
        os.utime(d, (two_days_ago, two_days_ago))
    with open(cache / "locks" / f"{held.name[5:-7]}.lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a build of that entry is running
        parse(run_python(loader("second"), cache))
        assert build_dirs(cache) == sorted([held.name, lookalike.name, ancient.name])
    parse(run_python(loader("third"), cache))
    assert build_dirs(cache) == sorted([lookalike.name, ancient.name])
    assert (lookalike / "keep.txt").read_text() == (ancient / "keep.txt").read_text() == "the user's"


@pytest.mark.parametrize("how", ["KJIT_CACHE_DIR", "build_directory"])
def test_a_cache_root_starting_with_a_dash_is_a_directory_not_an_option(tmp_path, how):
    """A relative root such as '-Dfoo' reaches the compiler as an absolute path:
    before, it became compiler options, an empty library was published and every
    later load said 'a generated stub is missing'."""
    options = {"build_directory": "-Dfoo"} if how == "build_directory" else {}
    cache_dir = "-Dfoo" if how == "KJIT_CACHE_DIR" else tmp_path / "unused"
    for expect_hit in (False, True):
        value, path, hit = parse(run_python(loader("dash", **options), cache_dir, cwd=tmp_path))
        assert (value, hit) == (42, expect_hit)
        assert path.startswith(str(tmp_path / "-Dfoo") + "/"), path


def test_a_relative_cache_root_is_resolved_once(tmp_path):
    """KJIT_CACHE_DIR=rel: the module's path is absolute, and a load after
    os.chdir uses the same tree (a hit), not a second one under the new directory."""
    (tmp_path / "elsewhere").mkdir()
    proc = run_python(loader("rel") + """
        import os
        os.chdir("elsewhere")
        again = kjit.load_inline("rel2", cpp_sources={source!r}, functions={functions!r})
        print("PATH2", again.path)
    """.format(source=SOURCE, functions=FUNCTIONS), "rel", cwd=tmp_path)
    value, path, hit = parse(proc)
    assert path.startswith(str(tmp_path / "rel") + "/"), path
    path2 = re.search(r"^PATH2 (.*)$", proc.stdout, re.M).group(1)
    assert path2.startswith(str(tmp_path / "rel") + "/"), path2
    assert not (tmp_path / "elsewhere" / "rel").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root only: skipped where mount is refused)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk, leave_kib):
    """Fills `disk` up to `leave_kib` KiB free; returns the filler file."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave_kib * 1024))
    return filler


@pytest.mark.parametrize("what", ["checked", "elementwise"])
def test_a_full_disk_is_a_cache_error_and_the_next_call_recovers(small_disk, what):
    """With a few KiB to a few hundred left, a build either fits or fails with a
    CacheError saying the disk is full (kjit's own write of the source, or the
    compiler's or linker's of its outputs: never "the code does not compile"); a
    failed build leaves nothing that a later process loads, and once there is room
    the next process builds and runs."""
    cache_dir = small_disk / "cache"
    if what == "checked":
        code = loader("full_disk")
    else:
        code = """
        import numpy as np, kjit
        f = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
        print("VALUE", int(f(np.array([20]), 22)[0]))
        """
    failures = 0
    for leave_kib in (8, 16, 32, 64, 128, 256):
        shutil.rmtree(cache_dir, ignore_errors=True)
        filler = fill(small_disk, leave_kib=leave_kib)
        proc = run_python(code, cache_dir)
        if proc.returncode != 0:
            failures += 1
            assert "No space left on device" in error_of(proc, "CacheError")
        filler.unlink()
        proc = run_python(code, cache_dir)
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"^VALUE 42$", proc.stdout, re.M)
    assert failures > 0


def test_a_cache_directory_removed_between_load_and_call(tmp_path):
    """Loaded functions keep working; a kernel compiled after the removal and a new
    module recreate the tree."""
    proc = run_python("""
        import shutil, numpy as np, kjit, os
        m = kjit.load_inline("rmc", cpp_sources={source!r}, functions={functions!r})
        f = kjit.elementwise("template <typename T> T add(T a, T b) {{ return a + b; }}")
        assert f(np.ones(2), 1.0).tolist() == [2.0, 2.0]
        shutil.rmtree(os.environ["KJIT_CACHE_DIR"])
        assert m.twice(21) == 42
        assert f(np.ones(2, np.float32), np.float32(1)).tolist() == [2.0, 2.0]  # a new kernel
        other = kjit.load_inline("rmc_other", cpp_sources={source!r}, functions={functions!r})
        print("VALUE", other.twice(4))
    """.format(source=SOURCE, functions=FUNCTIONS), tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "VALUE 8" in proc.stdout


def test_a_library_that_hides_its_stubs_is_never_cached(tmp_path):
    """Flags that hide the generated entry points (a version script) or make
    something other than a library (-E) fail the build with the missing symbols
    named, and leave no entry: a later load without them builds and works (before,
    such a library was published and every load said 'a generated stub is missing')."""
    script = tmp_path / "hide.map"
    script.write_text("{ local: *; };\n")
    for options in ({"extra_ldflags": [f"-Wl,--version-script={script}"]}, {"extra_cflags": ["-E"]}):
        with pytest.raises(kjit.CompileError) as info:
            kjit.load_inline("hidden_stubs", cpp_sources=SOURCE, functions=FUNCTIONS,
                             build_directory=str(tmp_path / "cache"), **options)
        assert "the library built for module 'hidden_stubs' does not export __tvm_ffi_" in str(info.value)
    mod = kjit.load_inline("hidden_stubs", cpp_sources=SOURCE, functions=FUNCTIONS,
                           build_directory=str(tmp_path / "cache"))
    assert not mod.cache_hit


def test_a_verbose_miss_says_which_key_part_changed(tmp_path, capfd):
    src = "#include <kjit/kernel.h>\nint64_t g(int64_t a) { return a; }\n"
    kjit.load_inline("miss_why", cpp_sources=src, functions=["g"], build_directory=tmp_path, verbose=True)
    assert f"[kjit] module 'miss_why': cache miss: no earlier build of this name in {tmp_path}" in capfd.readouterr().err
    kjit.load_inline("miss_why", cpp_sources=src + "// edited\n", functions=["g"], build_directory=tmp_path,
                     extra_cflags=["-O1"], verbose=True)
    err = capfd.readouterr().err
    assert re.search(r"\[kjit\] module 'miss_why': cache miss: the extra_cflags and source changed since the build "
                     rf"of \d+ s ago \({re.escape(str(tmp_path))}/miss_why-[0-9a-f]{{32}}\)", err), err
    entries = [p for p in tmp_path.iterdir() if p.name.startswith("miss_why-")]
    assert len(entries) == 2
    for entry in entries:
        labels = [line.split("\t")[0] for line in (entry / "key").read_text().splitlines()]
        assert labels[:8] == ["kjit version", "tvm-ffi version", "compiler", "extra_cflags", "extra_ldflags",
                              "include paths", "name", "source"]


def test_pruning_kept_failed_sources_leaves_files_kjit_did_not_make(tmp_path):
    """The newest 32 kept sources (16 failures' .cc and .cu) stay in <cache>/failed;
    older ones go, but only sources kjit kept there (their stamp line checks): a
    file of the user's in that folder stays, however old."""
    failed = tmp_path / "failed"
    failed.mkdir()
    mine = failed / f"notes-{'0' * 32}.cc"
    mine.write_text("// the user's notes\n")
    long_ago = time.time() - 30 * 86400
    os.utime(mine, (long_ago, long_ago))
    for i in range(34):
        with pytest.raises(kjit.CompileError):
            kjit.load_inline(f"kept_{i}", cpp_sources=f"int f{i}( {{", functions={f"f{i}": "x: int64"},
                             build_directory=tmp_path)
    kept = sorted(p.name for p in failed.iterdir() if p != mine)
    assert len(kept) == 32 and "kept_0-" not in " ".join(kept), kept
    assert mine.read_text() == "// the user's notes\n"
    assert (failed / kept[0]).read_text().splitlines()[-1].startswith("// kjit-stamp ")
