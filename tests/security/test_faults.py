"""Faults during a split: SIGKILL at random points, disk full, permission denied, rename failures.

The ``--output-dir`` contract checked here: a run is finished exactly when its
``.cudasplit-staging-*`` directory is gone. A killed run leaves its staging directory (and
never a finished-looking output without one); an orderly failure (an exception) removes the
staging directory, any output it already moved into place and the output dir it created.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._sinks import directory as directory_sink
from cudasplit.errors import LimitExceededError, OutputError
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive

KILLS = int(os.environ.get("CUDASPLIT_FAULT_KILLS", "5"))
STAGING = ".cudasplit-staging-"


def _entries(files: int, size: int) -> list[tuple[str, ...] | tuple[str, str, bytes]]:
    rng = random.Random(files)
    entries: list[tuple[str, ...] | tuple[str, str, bytes]] = []
    for i in range(files):
        folder = ("lib", "include", "bin", "doc")[i % 4]
        entries.append(("file", f"{folder}/f{i:04d}", rng.randbytes(size)))
    entries.append(("symlink", "lib/libfirst.so", "f0000"))
    return entries


@pytest.fixture(scope="module")
def busy_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough members that a split takes a noticeable fraction of a second."""
    root = tmp_path_factory.mktemp("faults")
    return write_archive(root / f"{TOP}.tar", _entries(600, 8 << 10), codec="none")


def tree(root: Path) -> dict[str, tuple[str, int]]:
    """relative path -> (type, size) of everything below root."""
    out: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            kind = "l" if path.is_symlink() else "d" if path.is_dir() else "f"
            out[str(path.relative_to(root))] = (kind, path.lstat().st_size if kind == "f" else 0)
    return out


def _split_cmd(archive: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "cudasplit", "split", str(archive), "-o", str(out),
            "--no-patch", "-j", "1", "-q"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_killed_split_never_looks_finished(busy_archive: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    started = time.monotonic()
    subprocess.run(_split_cmd(busy_archive, reference), check=True, env=_env(), cwd=REPO)
    full_run = time.monotonic() - started
    expected = tree(reference)
    seed = int(os.environ.get("CUDASPLIT_FAULT_SEED", "6"))
    rng = random.Random(seed)
    outcomes: list[str] = []
    for attempt in range(KILLS):
        out = tmp_path / f"out{attempt}"
        proc = subprocess.Popen(_split_cmd(busy_archive, out), env=_env(), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, full_run * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcomes.append(_judge(out, expected))
    print(f"seed {seed}, full run {full_run:.2f}s, kills: {outcomes}")


def _judge(out: Path, expected: dict[str, tuple[str, int]]) -> str:
    if not out.exists():
        return "before-start"
    names = sorted(p.name for p in out.iterdir())
    staging = [n for n in names if n.startswith(STAGING)]
    finished = [n for n in names if not n.startswith(STAGING)]
    if staging:
        return "unfinished" if not finished else "unfinished-during-rename"
    assert tree(out) == expected, "an output without a staging dir must be complete"
    return "finished" if finished else "empty"


def test_rerun_after_kill_succeeds(busy_archive: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(_split_cmd(busy_archive, out), env=_env(), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = subprocess.run([*_split_cmd(busy_archive, out), "--overwrite"], env=_env(),
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (out / "lib" / "lib" / "f0000").is_file()


# -- orderly failures --------------------------------------------------------------------------


@pytest.fixture
def small_archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{TOP}.tar.xz", _entries(40, 4096))


def _assert_clean(out: Path) -> None:
    assert not out.exists() or list(out.iterdir()) == [], sorted(out.iterdir())


def _fail_after(calls: int, error: int) -> Any:
    real = directory_sink.write_stream
    count = iter(range(10**9))

    def copy(fd: int, src: Any) -> None:
        if next(count) >= calls:
            os.write(fd, b"partial")
            raise OSError(error, os.strerror(error))
        real(fd, src)
    return copy


@pytest.mark.parametrize(("error", "words"), [(errno.ENOSPC, "disk full"),
                                              (errno.EACCES, "Permission denied"),
                                              (errno.EIO, "Input/output error")])
def test_write_error_mid_run_cleans_up(small_archive: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, error: int,
                                       words: str) -> None:
    monkeypatch.setattr(directory_sink, "write_stream", _fail_after(10, error))
    out = tmp_path / "out"
    with pytest.raises(OutputError, match=words) as info:
        split_to_dir(small_archive, out, SplitOptions(jobs=1, patch=False))
    assert "\n" not in str(info.value) and info.value.exit_code == 2
    _assert_clean(out)


def test_existing_output_dir_keeps_its_other_files(small_archive: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    monkeypatch.setattr(directory_sink, "write_stream", _fail_after(3, errno.ENOSPC))
    with pytest.raises(OutputError):
        split_to_dir(small_archive, out, SplitOptions(jobs=1, patch=False))
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_staging_dir_cannot_be_created(small_archive: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args: Any, **kwargs: Any) -> str:
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(directory_sink.tempfile, "mkdtemp", denied)
    with pytest.raises(OutputError, match=r"staging directory.*Permission denied"):
        split_to_dir(small_archive, tmp_path / "out", SplitOptions(jobs=1, patch=False))


def test_failed_rename_into_place_rolls_back(small_archive: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.rename
    calls = iter(range(100))

    def rename(src: Any, dst: Any) -> None:
        if next(calls) == 2:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        real(src, dst)
    monkeypatch.setattr(directory_sink.os, "rename", rename)
    out = tmp_path / "out"
    with pytest.raises(OutputError):
        split_to_dir(small_archive, out, SplitOptions(jobs=1, patch=False))
    _assert_clean(out)


def test_limits_can_be_raised(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.zst", [("file", "share/z", b"\0" * (20 << 20))],
                            codec="zst")
    with pytest.raises(LimitExceededError, match="raise max_ratio"):
        split_to_dir(archive, tmp_path / "a", SplitOptions(jobs=1))
    report = split_to_dir(archive, tmp_path / "b", SplitOptions(jobs=1, max_ratio=1e9))
    assert report.outputs["out"].bytes == 20 << 20


# -- a real full disk --------------------------------------------------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                            capture_output=True)
    if result.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_real_disk_full_on_tmpfs(tiny_tmpfs: Path, tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", _entries(40, 64 << 10))  # 2.5 MiB
    out = tiny_tmpfs / "out"
    result = subprocess.run(_split_cmd(archive, out), env=_env(), cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "disk full" in result.stderr, result.stderr
    _assert_clean(out)
    assert list(tiny_tmpfs.iterdir()) == []

