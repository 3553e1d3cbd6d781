"""A tarball source starts decoding when asked, before its members are (issue 34): the split's
entry points do so before they load the rest of the split. Started or not, it reads the same,
says the same errors, and leaves no decoder running."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cudasplit import CorruptArchiveError, SplitOptions, split_to_dir
from cudasplit._source import open_source
from cudasplit._split.start import started
from tests.support.tarutil import write_archive

ENTRIES = [("file", "lib/libdemo.so.1", b"x" * 5000), ("file", "include/demo.h", b"h")]


def _decoder_threads() -> int:
    """Decoder threads of this process, and decoder children (``zstd``, ``xz``) it started."""
    threads = sum(1 for t in threading.enumerate() if t is not threading.main_thread())
    return threads + len(_children())


def _children() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.mark.parametrize("codec", ["xz", "zst", "gz"])
def test_started_or_not_the_members_are_the_same(tmp_path: Path, codec: str) -> None:
    archive = write_archive(tmp_path / f"a.tar.{codec}", ENTRIES, codec=codec)
    plain = [(m.path, m.size) for m, _ in open_source(archive).members()]
    source = open_source(archive)
    source.start()  # type: ignore[attr-defined]
    source.start()  # type: ignore[attr-defined]  # idempotent
    assert [(m.path, m.size) for m, _ in source.members()] == plain
    assert [(m.path, m.size) for m, _ in source.members()] == plain  # read again: anew


def test_close_stops_a_decoder_nobody_took_over(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.zst", ENTRIES, codec="zst")
    before = _decoder_threads()
    source = open_source(archive)
    source.start()  # type: ignore[attr-defined]
    source.close()  # type: ignore[attr-defined]
    source.close()  # type: ignore[attr-defined]  # idempotent
    assert _decoder_threads() == before
    assert [m.path for m, _ in source.members()][-1] == "include/demo.h"  # and reads anew


def test_a_damaged_archive_fails_at_the_start_as_it_would_at_the_first_member(
        tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", ENTRIES)
    broken = tmp_path / "b.tar.xz"
    broken.write_bytes(archive.read_bytes()[:-24])  # no xz index
    with pytest.raises(CorruptArchiveError) as at_members:
        list(open_source(broken).members())
    with pytest.raises(CorruptArchiveError) as at_start:
        open_source(broken).start()  # type: ignore[attr-defined]
    assert str(at_start.value) == str(at_members.value)


def test_the_entry_points_stop_a_decoder_when_they_fail_before_the_first_member(
        tmp_path: Path) -> None:
    # More than the decoder's 64 MiB window: its thread waits for a reader until stopped.
    archive = write_archive(tmp_path / "a.tar.zst",
                            [("file", "lib/random.bin", os.urandom(96 << 20))], codec="zst")
    before = _decoder_threads()
    with pytest.raises(RuntimeError), started(archive, SplitOptions()) as source:
        assert _decoder_threads() > before  # decoding, and nobody reads it yet
        raise RuntimeError("loading the rest of the split failed")
    assert _decoder_threads() == before
    assert source.description == str(archive)


def test_a_source_the_caller_made_is_the_callers(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", ENTRIES)
    mine = open_source(archive)
    with started(mine, SplitOptions()) as source:
        assert source is mine
    assert {m.path for m, _ in mine.members()} >= {"lib/libdemo.so.1"}  # untouched
    assert split_to_dir(open_source(archive), tmp_path / "out").members
