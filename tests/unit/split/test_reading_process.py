"""A static archive's insides are read while the sink writes it (on a thread of its own), and
come out the same as reading the finished file; a split that fails midway leaves no reader
waiting for bytes that will not come."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from cudasplit import (
    OUTPUT_NAMES,
    DirectorySink,
    OutputError,
    SplitOptions,
    inspect,
    split,
    split_to_dir,
)
from cudasplit._elf.read import read_inside
from tests.support.fatbins import Entry, ar_archive, container, fatbin_object
from tests.support.tarutil import write_archive

TOP = "libcublas-linux-x86_64-13.0.0.0-archive"


def _big_archive(members: int) -> bytes:
    """An ``ar`` of many objects with fatbinaries, each with some payload, several MB in all:
    the sink writes it in many chunks."""
    objects = {}
    for index in range(members):
        payload = os.urandom(2048) + b"\0" * (index % 7)
        fat = container(Entry("sass", 75, payload=payload), Entry("sass", 90, "a"),
                        Entry("ptx", 90 + index % 2, payload=payload[:512]))
        objects[f"member_{index:05d}.o"] = fatbin_object(fat)
    return ar_archive(objects)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("follow")
    return write_archive(root / f"{TOP}.tar.gz",
                         [("file", "lib/libcublas_static.a", _big_archive(1500))], codec="gz",
                         top=TOP)


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("cudasplit-inside")]


def test_read_while_written_equals_read_when_done(tarball: Path, tmp_path: Path) -> None:
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
    assert _threads() == []


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


def test_a_failed_write_leaves_no_reader_waiting(tarball: Path, tmp_path: Path) -> None:
    sink = _FailingSink({name: tmp_path / "o" / name for name in OUTPUT_NAMES})
    with pytest.raises(OutputError, match="No space left"):
        split(tarball, sink, SplitOptions(patch=False))
    assert _threads() == []  # the follower stopped instead of waiting for the rest


class _IgnoringSink(DirectorySink):
    """Writes its own bytes for a static archive and never reads the member's stream."""

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        if not dest.endswith(".a"):
            super().write_file(output, dest, stream, mode)
            return
        path = self.staged_path(output, dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"!<arch>\n")


def test_a_sink_that_never_reads_the_stream_does_not_stall_the_split(tarball: Path,
                                                                      tmp_path: Path) -> None:
    sink = _IgnoringSink({name: tmp_path / "o" / name for name in OUTPUT_NAMES})
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(split(tarball, sink,
                                                               SplitOptions(patch=False))),
                              daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and done, "the split waited for a stream nobody read"
    assert _threads() == []
