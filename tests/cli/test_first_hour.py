"""Issue 14 ("the first hour") and issue 15 items 5 and 10: what a newcomer, a Nix builder and
a library user hit. Each test fails on the code before the fix."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cudasplit
import cudasplit._api.entry as api
from cudasplit import Kind, PackageId, SplitOptions
from cudasplit._run import available_cpus
from cudasplit._sinks import directory as directory_sink
from cudasplit._sinks import staging as staging
from cudasplit.cli import main
from cudasplit.errors import CudasplitError, OptionsError, OutputError, SourceError
from cudasplit.rules import load_ruleset
from tests.support.builders import compile_shared
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive

ENTRIES = [
    ("file", "lib/libdemo.so.12.9.79", b"plain"),
    ("symlink", "lib/libdemo.so.12", "libdemo.so.12.9.79"),
    ("file", "lib/libdemo_static.a", b"!<arch>\n"),
    ("file", "include/demo.h", b"#pragma once\n"),
    ("file", "LICENSE", b"license"),
]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)


def invoke(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def cli(*args: str, env: dict[str, str] | None = None, **kw: Any
        ) -> subprocess.CompletedProcess[str]:
    """The real entry point (signals, broken pipes), as a user runs it."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cudasplit", *args], env=full_env,
                          capture_output=True, text=True, timeout=60, **kw)


# -- exits that leave things behind ----------------------------------------------------------


@pytest.mark.parametrize("existing", [False, True])
def test_unreadable_source_creates_no_staging_and_no_dir(tmp_path: Path, existing: bool) -> None:
    out = tmp_path / "O" / "new"
    if existing:
        out.mkdir(parents=True)
    code, _, stderr = invoke("split", str(tmp_path / "nope.tar.xz"), "-o", str(out))
    assert code == 2 and "no such file" in stderr
    assert out.exists() == existing
    assert not existing or list(out.iterdir()) == []
    bad = tmp_path / f"{TOP}.tar.xz"
    bad.write_bytes(b"\xfd7zXZ\x00" + b"\x01" * 64)
    code, _, _ = invoke("split", str(bad), "-o", str(out))
    assert code == 2 and out.exists() == existing


def test_repack_leaves_no_output_dir_on_error(tmp_path: Path) -> None:
    out = tmp_path / "packs"
    code, _, _ = invoke("repack", str(tmp_path / "nope.tar.xz"), "-o", str(out))
    assert code == 2 and not out.exists()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _fake_staging(out: Path, name: str, owner: str | None) -> Path:
    path = out / f"{staging.STAGING_PREFIX}{name}"
    (path / "lib" / "lib").mkdir(parents=True)
    (path / "lib" / "lib" / "big.so").write_bytes(b"x" * 1000)
    if owner is not None:
        (path / staging.OWNER_FILE).write_text(owner)
    return path


def test_stale_staging_of_a_dead_run_is_removed_and_said(tmp_path: Path, archive: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    host = staging.socket.gethostname()
    dead = _fake_staging(out, "dead", f"{host} {_dead_pid()} 123\n")
    alive = _fake_staging(out, "alive", staging._owner_line(os.getppid()))
    foreign = _fake_staging(out, "other-host", f"elsewhere {_dead_pid()} 1\n")
    unknown = _fake_staging(out, "no-owner", None)
    code, _, stderr = invoke("split", str(archive), "-o", str(out), "--no-patch")
    assert code == 0, stderr
    assert not dead.exists()
    assert alive.exists() and foreign.exists() and unknown.exists()
    assert f"{dead}: removed the staging directory of an earlier run" in stderr


def test_stale_staging_of_a_killed_overwrite_keeps_the_old_outputs(tmp_path: Path,
                                                                   archive: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    host = staging.socket.gethostname()
    dead = _fake_staging(out, "killed", f"{host} {_dead_pid()} 123\n")
    (dead / staging.PREVIOUS_DIR / "include").mkdir(parents=True)
    (dead / staging.PREVIOUS_DIR / "include" / "old.h").write_text("the user's old output")
    code, _, stderr = invoke("split", str(archive), "-o", str(out), "--no-patch")
    assert code == 0, stderr
    assert not dead.exists()
    kept = out / ".cudasplit-previous-killed"
    assert (kept / "include" / "old.h").read_text() == "the user's old output"
    assert f"{kept}: outputs that a killed run had moved aside to replace them (--overwrite)" \
        in stderr


def test_staging_records_its_owner(tmp_path: Path, archive: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_finish = directory_sink.DirectorySink.finish

    def finish(self: directory_sink.DirectorySink) -> None:
        assert self._staging is not None
        seen.append((self._staging / staging.OWNER_FILE).read_text())
        real_finish(self)
    monkeypatch.setattr(directory_sink.DirectorySink, "finish", finish)
    api.split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    host, pid, start = seen[0].split()
    assert host == staging.socket.gethostname() and int(pid) == os.getpid()
    assert start == staging._start_time(os.getpid()) != "gone"


def test_overwrite_replaces_the_whole_previous_split(tmp_path: Path, archive: Path) -> None:
    out = tmp_path / "out"
    api.split_to_dir(archive, out, SplitOptions(patch=False))
    assert (out / "include/include/demo.h").exists()
    api.split_to_dir(archive, out, SplitOptions(patch=False, overwrite=True, outputs=("lib",)))
    assert not (out / "include").exists(), "old outputs not in --outputs must go too"
    assert (out / "out/include/demo.h").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".cudasplit")]


def _snapshot(root: Path) -> dict[str, bytes | str]:
    result: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        result[rel] = (f"-> {os.readlink(path)}" if path.is_symlink()
                       else path.read_bytes() if path.is_file() else "dir")
    return result


@pytest.mark.parametrize("failing_call", [1, 3, 5])
def test_overwrite_restores_the_previous_split_when_a_rename_fails(
        tmp_path: Path, archive: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int) -> None:
    """Issue 15.5: a mount point (EBUSY), an immutable file or a read-only dir makes one rename
    fail; whichever it is, the previous outputs stay exactly as they were."""
    out = tmp_path / "out"
    api.split_to_dir(archive, out, SplitOptions(patch=False))
    (out / "include/include/mine.h").write_text("added by hand")
    before = _snapshot(out)
    real = os.rename
    calls = iter(range(1, 100))

    def rename(src: Any, dst: Any) -> None:
        if next(calls) == failing_call:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        real(src, dst)
    monkeypatch.setattr(directory_sink.os, "rename", rename)
    with pytest.raises(OutputError, match="Device or resource busy"):
        api.split_to_dir(archive, out, SplitOptions(patch=False, overwrite=True,
                                                    outputs=("lib", "static")))
    assert _snapshot(out) == before


def test_overwrite_keeps_old_outputs_it_cannot_put_back(
        tmp_path: Path, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    api.split_to_dir(archive, out, SplitOptions(patch=False))
    real = os.rename

    def rename(src: Any, dst: Any) -> None:
        if Path(dst).name == "static" and staging.PREVIOUS_DIR not in str(dst):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))  # new in, and back again
        real(src, dst)
    monkeypatch.setattr(directory_sink.os, "rename", rename)
    with pytest.raises(OutputError):
        api.split_to_dir(archive, out, SplitOptions(patch=False, overwrite=True))
    kept = list(out.glob(f"{staging.STAGING_PREFIX}*/{staging.PREVIOUS_DIR}/static"))
    assert kept and (kept[0] / "lib/libdemo_static.a").exists(), "never delete the old output"


def test_overwrite_with_an_immutable_old_file(tmp_path: Path, archive: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """A real immutable file (chattr +i, root only) in the previous split: the new split
    goes in, the old output that cannot be deleted is set aside and named, no staging left."""
    out = tmp_path / "out"
    api.split_to_dir(archive, out, SplitOptions(patch=False))
    pinned = out / "include/include/demo.h"
    if os.geteuid() != 0 or subprocess.run(["chattr", "+i", str(pinned)],
                                           capture_output=True).returncode != 0:
        pytest.skip("chattr +i needs root and a file system with inode flags")
    try:
        with caplog.at_level(logging.WARNING, logger="cudasplit"):
            api.split_to_dir(archive, out, SplitOptions(patch=False, overwrite=True,
                                                        outputs=("lib",)))
        leftovers = list(out.glob(".cudasplit-previous-*"))
        assert len(leftovers) == 1 and "remove it by hand" in caplog.text
        assert not list(out.glob(f"{staging.STAGING_PREFIX}*"))
        assert not (out / "include").exists() and (out / "out/include/demo.h").exists()
    finally:
        for path in out.rglob("demo.h"):
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsync-each"])
def test_files_and_dirs_are_synced_before_the_renames(
        tmp_path: Path, archive: Path, monkeypatch: pytest.MonkeyPatch, syncfs: bool) -> None:
    events: list[str] = []
    real_fsync, real_rename, real_syncfs = os.fsync, os.rename, staging._syncfs
    if not syncfs:
        monkeypatch.setattr(staging, "_syncfs", lambda root: False)
    else:
        monkeypatch.setattr(staging, "_syncfs",
                            lambda root: (events.append("syncfs"), real_syncfs(root))[1])
    monkeypatch.setattr(staging.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    # Moving the emptied staging dir to trash (issue 24) publishes nothing: not counted.
    monkeypatch.setattr(directory_sink.os, "rename", lambda a, b: (
        ".cudasplit-trash-" in str(b) or events.append("rename"), real_rename(a, b)))
    api.split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    before = events[:events.index("rename")]
    if syncfs:
        assert before == ["syncfs"]
    else:  # 4 files + the owner file + the directories, all before the first rename
        assert before.count("fsync") >= 10
    assert events[-1] == "fsync", "the parent directory after the renames"
    events.clear()
    api.split_to_dir(archive, tmp_path / "out2", SplitOptions(patch=False, fsync=False))
    assert "fsync" not in events and "syncfs" not in events


# -- identity ----------------------------------------------------------------------------------


def _two_tops(path: Path) -> Path:
    import tarfile
    with tarfile.open(path, "w:xz") as tar:
        for name in (f"{TOP}/lib/libcuda.so", "second-top/x"):
            tar.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
    return path


@pytest.mark.parametrize("build, fragment", [
    (lambda p: write_archive(p, [("file", "lib/libcuda.so", b"stub")], top="cudart-12.9"),
     "top directory (first member 'cudart-12.9')"),
    (lambda p: write_archive(p, [("file", "lib/libcuda.so", b"stub")], top=None),
     "top directory (first member 'lib/libcuda.so')"),
    (_two_tops, "two top directories"),
], ids=["odd-top", "no-top", "two-tops"])
def test_archive_without_a_proper_top_dir_is_refused(tmp_path: Path, build: Any,
                                                     fragment: str) -> None:
    archive = build(tmp_path / "odd.tar.xz")
    out = tmp_path / "out"
    code, _, stderr = invoke("split", str(archive), "-o", str(out))
    assert code == 2, stderr
    assert fragment in stderr and "--package" in stderr and "--strip-components" in stderr
    assert not out.exists()


def test_strip_components_and_package_split_an_odd_archive(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "cudart.tar.xz",
                            [("file", "lib/libcudart.so.12", b"x"), ("file", "include/a.h", b"")],
                            top="cudart-12.9")
    out = tmp_path / "out"
    code, _, stderr = invoke("split", str(archive), "-o", str(out), "--package", "cuda_cudart",
                             "--strip-components", "1", "--no-patch", "--report",
                             str(tmp_path / "r.json"))
    assert code == 0, stderr
    assert (out / "out/lib/libcudart.so.12").exists()  # cuda_cudart: single output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rules_files"][0].endswith("packages/cuda_cudart.toml")


def test_unknown_package_is_an_error_unless_default_rules(tmp_path: Path, archive: Path) -> None:
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "o"),
                             "--package", "cuda_cudartt")
    assert code == 2
    assert "unknown package 'cuda_cudartt'" in stderr and "did you mean cuda_cudart" in stderr
    assert "--default-rules" in stderr and not (tmp_path / "o").exists()
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "o"), "--no-patch",
                             "--package", "my_thing", "--default-rules")
    assert code == 0, stderr


def test_a_downloads_dir_is_a_batch_by_content_and_says_so(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    write_archive(downloads / f"{TOP}.tar.xz", ENTRIES)
    (downloads / "partial-unpack").mkdir()  # used to turn the whole dir into an "unpacked tree"
    (downloads / "partial-unpack" / "x").write_text("x")
    out = tmp_path / "out"
    code, _, stderr = invoke("split", str(downloads), "-o", str(out), "--no-patch")
    assert code == 0, stderr
    assert "a directory of tarballs" in stderr and "(batch)" in stderr
    assert (out / "cuda_demo-linux-x86_64-12.9.79/lib/lib/libdemo.so.12").is_symlink()
    tree = tmp_path / "tree"
    (tree / TOP / "lib").mkdir(parents=True)
    (tree / TOP / "lib" / "libx.so").write_bytes(b"x")
    code, _, stderr = invoke("split", str(tree), "-o", str(tmp_path / "o2"), "--no-patch",
                             "--default-rules")
    # A tree is split like any single source: no note on every directory split (issue 43).
    assert code == 0 and stderr == "", stderr
    assert (tmp_path / "o2" / "lib" / "lib" / "libx.so").is_file()


# -- what reaches the terminal ---------------------------------------------------------------


@pytest.fixture(scope="module")
def elf_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library NEEDing a library nobody provides, in a package whose rules want NVRTC."""
    work = tmp_path_factory.mktemp("elf")
    lib = compile_shared(work, "libdemo.so.1", "int demo(void) { return 1; }",
                         needed_libs=["libmissing.so.3"])
    return write_archive(work / f"{TOP}.tar.xz", [("file", "lib/libdemo.so.1", lib.read_bytes())])


def _rules_with_nvrtc(tmp_path: Path) -> Path:
    rules = tmp_path / "extra.toml"
    rules.write_text('[package]\nrunpath_append = ["@cuda_nvrtc@/lib"]\n')
    return rules


def test_warnings_reach_stderr_naming_archive_and_member(tmp_path: Path,
                                                         elf_archive: Path) -> None:
    code, _, stderr = invoke("split", str(elf_archive), "-o", str(tmp_path / "o"),
                             "--rules", str(_rules_with_nvrtc(tmp_path)))
    assert code == 0, stderr
    lines = stderr.splitlines()
    unresolved = [line for line in lines if "[needed-unresolved]" in line]
    assert unresolved == [f"cudasplit: warning: {elf_archive}: member 'lib/libdemo.so.1': "
                          "DT_NEEDED libmissing.so.3 resolve nowhere (add their directory to "
                          "--library-path, or accept them in --ignore-missing) "
                          "[needed-unresolved]"]
    assert any(line.startswith(f"cudasplit: warning: {elf_archive}: package rules want")
               and line.endswith("[package-root-missing]") for line in lines)


def test_strict_fails_on_warnings_that_matter(tmp_path: Path, elf_archive: Path) -> None:
    code, _, stderr = invoke("split", str(elf_archive), "-o", str(tmp_path / "o"), "--strict")
    assert code == 1 and "libmissing.so.3" in stderr
    assert not (tmp_path / "o").exists()


def test_dry_run_is_marked_as_a_plan_and_counts_dropped(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        *ENTRIES, ("file", "lib/11/libold.so", b"o"), ("file", "lib/12/libnew.so", b"n")])
    code, stdout, _ = invoke("split", str(archive), "-o", str(tmp_path / "o"), "--dry-run",
                             "--cuda-major", "12")
    assert code == 0
    assert stdout.startswith("plan (--dry-run): nothing was written")
    assert "dropped  1 member: 1 of another CUDA major (see the report)" in stdout
    assert not (tmp_path / "o").exists()


# -- Nix builders ------------------------------------------------------------------------------


def _under_pty(args: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Run the CLI with stdout and stderr on a pseudo-terminal, as a Nix builder does."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ.update(env)
        os.execv(sys.executable, [sys.executable, "-m", "cudasplit", *args])
    output = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), bytes(output)


def test_no_status_line_in_a_nix_builder_pty(tmp_path: Path, archive: Path) -> None:
    args = ["split", str(archive), "-o", str(tmp_path / "a"), "--no-patch"]
    env = {"PYTHONPATH": str(REPO), "TERM": "xterm"}
    code, output = _under_pty(args, env)
    assert code == 0 and b"\r" in output.replace(b"\r\n", b"\n"), "a terminal gets the line"
    args[3] = str(tmp_path / "b")
    code, output = _under_pty(args, {**env, "NIX_BUILD_TOP": str(tmp_path)})
    assert code == 0, output
    assert b"\r" not in output.replace(b"\r\n", b"\n"), output  # the pty's own CRLF aside


def test_jobs_follow_nix_build_cores_and_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus({"NIX_BUILD_CORES": "1"}) == 1
    assert available_cpus({"NIX_BUILD_CORES": "0"}) == affinity  # 0: all the builder may use
    assert available_cpus({"NIX_BUILD_CORES": "4096"}) == affinity
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.delenv("NIX_BUILD_CORES", raising=False)
    assert SplitOptions().effective_jobs() == 1


def test_report_relative_names_no_store_path(tmp_path: Path, archive: Path) -> None:
    store = "/nix/store/" + "a" * 32 + "-cuda_demo.tar.xz"
    env = {"NIX_STORE": "/nix/store"}
    report = api.inspect(archive)
    report.source = store
    from cudasplit import relative_report
    data = relative_report(report, env)
    assert data["source"] == "cuda_demo.tar.xz"
    assert all(not f.startswith("/") for f in data["rules_files"])
    code, stdout, _ = invoke("split", str(archive), "-o", str(tmp_path / "o"), "--no-patch",
                             "--report", "-", "--report-relative")
    assert code == 0
    text = stdout
    assert str(tmp_path) not in text
    assert json.loads(text)["outputs"]["lib"]["directory"] == "$lib"


# -- CLI and API paper cuts --------------------------------------------------------------------


def test_cuda_major_and_tag_options(tmp_path: Path, archive: Path) -> None:
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "a"), "--cuda-major",
                             "12", "--tag", "rpath", "--no-patch")
    assert code == 0, stderr
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "b"), "--rpath",
                             "--no-patch")
    assert code == 0 and "--rpath is deprecated; use --tag rpath" in stderr
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "c"), "--tag", "x")
    assert code == 2


@pytest.mark.parametrize("asked", [
    "lib/libdemo.so.12", "./lib/libdemo.so.12", f"{TOP}/lib/libdemo.so.12",
    f"./{TOP}/lib/libdemo.so.12", "lib/lib/libdemo.so.12"])
def test_explain_accepts_archive_output_and_tar_paths(archive: Path, asked: str) -> None:
    assert api.explain(archive, asked).path == "lib/libdemo.so.12"


def test_explain_suggests_near_matches(archive: Path) -> None:
    code, _, stderr = invoke("explain", str(archive), "lib/libdemo.so.13")
    assert code == 2 and "did you mean 'lib/libdemo.so.12'" in stderr


def test_stdin_source_and_report_on_stdout(tmp_path: Path, archive: Path) -> None:
    out = tmp_path / "out"
    with open(archive, "rb") as stdin:
        result = cli("split", "-", "-o", str(out), "--no-patch", "--report", "-", stdin=stdin)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["source"] == "<stdin>" and report["package"]["name"] == "cuda_demo"
    assert (out / "lib/lib/libdemo.so.12").is_symlink()


def test_broken_pipe_exits_quietly(tmp_path: Path) -> None:
    many = [("file", f"include/h{i:04}.h", b"x") for i in range(3000)]
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", many)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "cudasplit", "inspect", str(archive)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves, as `| head -1` does
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert stderr == ""


def test_zip_is_named_as_such(tmp_path: Path) -> None:
    wheel = tmp_path / "nvidia_cuda_runtime-12.9.79-py3-none-manylinux.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("nvidia/cuda_runtime/lib/libcudart.so.12", b"x")
    code, _, stderr = invoke("split", str(wheel), "-o", str(tmp_path / "o"))
    assert code == 2 and "zip archives are not redist tarballs" in stderr


def test_split_options_are_validated_at_construction() -> None:
    with pytest.raises(OptionsError, match="outputs must be a tuple") as info:
        SplitOptions(outputs="lib,dev")  # type: ignore[arg-type]
    assert isinstance(info.value, CudasplitError)
    with pytest.raises(OptionsError, match="unknown output"):
        SplitOptions(outputs=("lib", "libs"))
    with pytest.raises(OptionsError, match="jobs"):
        SplitOptions(jobs=-1)
    with pytest.raises(OptionsError, match="patcher"):
        SplitOptions(patcher="patchelf")


def test_classify_accepts_the_report_kind_strings() -> None:
    ruleset = load_ruleset("cuda_cudart")
    assert ruleset.classify("lib/libcudart.so.12", "elf-shared") == \
        ruleset.classify("lib/libcudart.so.12", Kind.ELF_SHARED)


def test_runpath_policy_error_lives_in_errors() -> None:
    import cudasplit._elf.plan.runpath as runpath
    from cudasplit import errors
    assert runpath.RunpathPolicyError is errors.RunpathPolicyError
    assert issubclass(errors.RunpathPolicyError, CudasplitError)


def test_the_library_never_prints_a_log_record(capsys: pytest.CaptureFixture[str]) -> None:
    assert any(isinstance(h, logging.NullHandler)
               for h in logging.getLogger("cudasplit").handlers)
    logger = logging.getLogger("cudasplit._elf.patch.patcher")
    saved = logging.getLogger("cudasplit").handlers[:], logging.getLogger("cudasplit").propagate
    try:
        logging.getLogger("cudasplit").handlers = [
            h for h in saved[0] if isinstance(h, logging.NullHandler)]
        logging.getLogger("cudasplit").propagate = True
        logger.warning("LIEF fallback used")
    finally:
        logging.getLogger("cudasplit").handlers, logging.getLogger("cudasplit").propagate = saved
    assert capsys.readouterr().err == ""
    assert cudasplit.__all__  # the package imported with its handler


def test_rules_show_package_table_and_unknown_package() -> None:
    code, stdout, _ = invoke("rules", "show", "--package", "cuda_cudart")
    assert code == 0 and "[package]" in stdout and "stub_links" in stdout
    code, _, stderr = invoke("rules", "show", "--package", "cuda_cudartt")
    assert code == 2 and "unknown package" in stderr


def test_symlink_leaving_the_package_root_is_refused(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("symlink", "lib/evil", "../../../.."), ("file", "lib/evil/x", b"x"),
        ("file", "lib/libok.so", b"ok")])
    # Issue 24: refused unless skipped
    # (tests/security/test_hostile_archive_data_and_escaping_links.py checks the refusal).
    report = api.split_to_dir(archive, tmp_path / "out",
                              SplitOptions(patch=False, skip_unsafe_members=True))
    problem = next(p for p in report.problems if p.path == "lib/evil")
    assert problem.code == "unsafe-symlink" and "leaves the package root" in problem.message
    assert not (tmp_path / "out/lib/lib/evil").is_symlink()


def test_errors_name_archive_and_member_not_the_staging_dir(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "include/a", b"file"), ("file", "include/a/b.h", b"below a file")])
    with pytest.raises(OutputError) as info:
        api.split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    message = str(info.value)
    assert f"{archive}: member 'include/a/b.h'" in message
    assert ".cudasplit-staging" not in message
    assert str(tmp_path / "out" / "include" / "include" / "a" / "b.h") in message


def test_stdin_respects_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from cudasplit import open_source
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * 5000)))
    from cudasplit._source import Limits
    with pytest.raises(SourceError, match="larger than 4096 bytes"):
        open_source("-", limits=Limits(4096, 200.0))


def test_packageid_must_be_a_packageid() -> None:
    with pytest.raises(OptionsError, match="PackageId"):
        SplitOptions(package="cuda_cudart")  # type: ignore[arg-type]
    assert SplitOptions(package=PackageId("cuda_cudart")).package is not None


def test_status_line_is_cleared_before_any_message(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from cudasplit import Progress
    from cudasplit.cli import _terminal as terminal

    monkeypatch.setattr(terminal, "_ACTIVE", [None])
    monkeypatch.setattr(terminal, "wants_status_line", lambda env=None: True)
    line = terminal.ProgressLine.for_terminal(quiet=False)
    assert line is not None
    line(Progress("/x/cuda_demo.tar.xz", 3, 5_000_000, "LICENSE"))
    terminal.err("cudasplit: error: boom")
    err = capsys.readouterr().err
    status, _, _ = err.partition("\r" + " " * len("cuda_demo.tar.xz: 3 members, 5 MB, "))
    assert status.startswith("\rcuda_demo.tar.xz: 3 members")
    # The line is blanked and the cursor back at column 0 before the message.
    assert "\rcudasplit: error: boom\n" in err and "LICENSEcudasplit" not in err


def test_batch_problem_lines_name_their_archive(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    good = write_archive(tmp_path / "in" / f"{TOP}.tar.xz", ENTRIES)
    bad_top = "cuda_evil-linux-x86_64-1.0-archive"
    bad = write_archive(tmp_path / "in" / f"{bad_top}.tar.xz",
                        [("file", "lib/libok.so", b"ok"), ("symlink", "lib/evil", "../../..")],
                        top=bad_top)
    code, _, stderr = invoke("split", str(good), str(bad), "-o", str(tmp_path / "out"),
                             "--no-patch", "--default-rules", "--skip-unsafe-members")
    assert code == 0, stderr
    assert f"cudasplit: problem: {bad}: member 'lib/evil': symlink target" in stderr
    assert f"problem: {good}" not in stderr
