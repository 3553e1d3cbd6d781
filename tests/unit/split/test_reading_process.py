"""Large written files are read by a process of its own (``_split/gpucode.py``,
``_elf/read/worker.py``): a static archive while the sink writes it, anything else right after.
What it reads equals reading the finished file in the split's own process; a split that fails
midway, or is killed, leaves no reader behind; a file the archive names twice is read copy by
copy, and said to be a duplicate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

import pytest

import cudasplit._split.gpucode as inside_stage
from cudasplit import (
    OUTPUT_NAMES,
    DirectorySink,
    OutputError,
    SplitOptions,
    inspect,
    split,
    split_to_dir,
)
from cudasplit._elf.read import ReaderProcess, read_inside
from tests.support.fatbins import Entry, ar_archive, container, fatbin_object
from tests.support.tarutil import write_archive

TOP = "libcublas-linux-x86_64-13.0.0.0-archive"


def _big_archive(members: int, arch: int = 90) -> bytes:
    """An ``ar`` of many objects with fatbinaries, each with some payload, several MB in all:
    the sink writes it in many chunks."""
    objects = {}
    for index in range(members):
        payload = os.urandom(2048) + b"\0" * (index % 7)
        fat = container(Entry("sass", 75, payload=payload), Entry("sass", arch, "a"),
                        Entry("ptx", arch + index % 2, payload=payload[:512]))
        objects[f"member_{index:05d}.o"] = fatbin_object(fat)
    return ar_archive(objects)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("follow")
    return write_archive(root / f"{TOP}.tar.gz",
                         [("file", "lib/libcublas_static.a", _big_archive(1500))], codec="gz",
                         top=TOP)


def _children() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append(int(entry))
    return found


def _reader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("cudasplit-reader")]


@pytest.mark.parametrize("background_from", [0, 1 << 40], ids=["process", "in-process"])
def test_read_while_written_equals_read_when_done(tarball: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  background_from: int) -> None:
    monkeypatch.setattr(inside_stage, "BACKGROUND_FROM", background_from)
    written = split_to_dir(tarball, tmp_path / "out", SplitOptions(patch=False))
    followed = written.member("lib/libcublas_static.a").gpu
    staged = tmp_path / "out" / "static" / "lib" / "libcublas_static.a"
    finished = read_inside(staged)
    assert finished is not None
    assert followed == [g.as_dict() for g in finished.gpu]
    assert followed == inspect(tarball).member("lib/libcublas_static.a").gpu  # the dry run
    by_arch = {(row["kind"], row["arch"]): row["entries"] for row in followed or []}
    assert by_arch == {("sass", "sm_75"): 1500, ("sass", "sm_90a"): 1500,
                       ("ptx", "sm_90"): 750, ("ptx", "sm_91"): 750}
    assert _reader_threads() == [] and _children() == []


class _FailingSink(DirectorySink):
    """Writes half of the archive, then fails as a full disk would."""

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        if not dest.endswith(".a"):
            super().write_file(output, dest, stream, mode)
            return
        path = self.staged_path(output, dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(stream.read(1 << 20))
        raise OutputError(f"{path}: No space left on device")


def test_a_failed_write_leaves_no_reader_waiting(tarball: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inside_stage, "BACKGROUND_FROM", 0)
    sink = _FailingSink({name: tmp_path / "o" / name for name in OUTPUT_NAMES})
    with pytest.raises(OutputError, match="No space left"):
        split(tarball, sink, SplitOptions(patch=False))
    assert _reader_threads() == [] and _children() == []  # stopped, not waiting for the rest


class _IgnoringSink(DirectorySink):
    """Writes its own bytes for a static archive and never reads the member's stream."""

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        if not dest.endswith(".a"):
            super().write_file(output, dest, stream, mode)
            return
        path = self.staged_path(output, dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"!<arch>\n")


def test_a_sink_that_never_reads_the_stream_does_not_stall_the_split(
        tarball: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inside_stage, "BACKGROUND_FROM", 0)
    sink = _IgnoringSink({name: tmp_path / "o" / name for name in OUTPUT_NAMES})
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(split(tarball, sink,
                                                               SplitOptions(patch=False))),
                              daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and done, "the split waited for a stream nobody read"
    assert _reader_threads() == [] and _children() == []


def test_an_archive_named_twice_is_read_copy_by_copy(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The second copy replaces the first (as tar); each copy's GPU code is its own, every
    time (reading the first copy while the second was written mixed them: 2 runs in 16)."""
    monkeypatch.setattr(inside_stage, "BACKGROUND_FROM", 0)
    first, second = _big_archive(400, arch=80), _big_archive(300, arch=100)
    tarball = write_archive(tmp_path / f"{TOP}.tar.gz",
                            [("file", "lib/libcublas_static.a", first),
                             ("file", "lib/libcublas_static.a", second)], codec="gz", top=TOP)
    for run in range(8):
        report = split_to_dir(tarball, tmp_path / f"out{run}", SplitOptions(patch=False))
        copies = [m for m in report.members if m.path == "lib/libcublas_static.a"]
        arches = [{row["arch"] for row in m.gpu or []} for m in copies]
        assert arches == [{"sm_75", "sm_80a", "sm_80", "sm_81"},
                          {"sm_75", "sm_100a", "sm_100", "sm_101"}]
        duplicate = [w for w in report.warnings if w.code == "duplicate-member"]
        assert [w.path for w in duplicate] == ["lib/libcublas_static.a"]
        staged = tmp_path / f"out{run}" / "static" / "lib" / "libcublas_static.a"
        assert staged.read_bytes() == second


def test_a_read_of_a_file_that_stops_growing_ends(tmp_path: Path) -> None:
    """The file is complete shorter than announced: the read says so, it does not wait."""
    archive = _big_archive(50)
    path = tmp_path / "lib.a"
    path.write_bytes(archive[: len(archive) // 2])
    reader = ReaderProcess()
    try:
        future = reader.submit(str(path), size=len(archive), grows=True, want_inside=True,
                               want_dlopen=False)
        time.sleep(0.2)
        assert not future.done()   # waiting for the rest
        reader.written(str(path), len(archive) // 2)
        found = future.result(timeout=30)
        assert found.inside is None and found.error == f"the file ended at {len(archive) // 2} bytes"
    finally:
        reader.close()
    assert _children() == []


def test_the_reading_process_dies_with_its_parent(tmp_path: Path) -> None:
    """A SIGKILLed split leaves no reader waiting for a file that will never be written."""
    script = (
        "import sys, time\n"
        "from cudasplit._elf.read import ReaderProcess\n"
        "r = ReaderProcess()\n"
        f"r.submit({str(tmp_path / 'never')!r}, size=1 << 20, grows=True, want_inside=True,"
        " want_dlopen=False)\n"
        "while r._proc is None: time.sleep(0.01)\n"
        "print(r._proc.pid, flush=True)\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              cwd=Path(__file__).resolve().parents[3])
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert Path(f"/proc/{child}").exists()
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break   # dead, waiting for init to reap it
        except OSError:
            break
        time.sleep(0.05)
    state = Path(f"/proc/{child}/stat")
    assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_without_a_reading_process_the_split_reads_them_itself(
        tarball: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child cannot start (no fork, a broken interpreter): every read is lost, and the
    split reads those files on its own threads; the report is the same."""
    import cudasplit._elf.read.worker as worker

    monkeypatch.setattr(inside_stage, "BACKGROUND_FROM", 0)
    expected = split_to_dir(tarball, tmp_path / "a", SplitOptions(patch=False))

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("fork refused")

    monkeypatch.setattr(worker.subprocess, "Popen", refuse)
    report = split_to_dir(tarball, tmp_path / "b", SplitOptions(patch=False))
    member = "lib/libcublas_static.a"
    assert report.member(member).gpu == expected.member(member).gpu
    assert report.member(member).gpu
    assert not [w for w in report.warnings if w.code == "inside-unreadable"]
