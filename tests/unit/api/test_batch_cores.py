"""A batch's jobs are a budget of cores: largest source first, each with the cores it can use.

A multi-block xz tarball can keep a core per block busy (plus the writer), a single-block or
zstd one two; the biggest starts first, and a source waits until its cores are free. Sources
start in turns (size, then the order given): which worker thread asks first never decides it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cudasplit._api.batch as batch
from cudasplit import SplitOptions, split_many
from cudasplit._run import Cores
from cudasplit._source import decode_threads
from tests.support.builders import compressed_writer
from tests.support.tarutil import tar_bytes, write_archive


def _multiblock(path: Path, top: str, size: int) -> Path:
    with compressed_writer(path, "xz-multiblock", xz_block_size=64 * 1024) as out:
        out.write(tar_bytes([("file", "lib/libbig.so.1", os.urandom(size))], top=top))
    return path


def test_decode_threads_counts_xz_blocks_and_says_one_otherwise(tmp_path: Path) -> None:
    top = "libdemo-linux-x86_64-1.0.0-archive"
    multi = _multiblock(tmp_path / f"{top}.tar.xz", top, 300 * 1024)
    assert decode_threads(multi) >= 4  # 300 KiB of 64 KiB blocks
    single = write_archive(tmp_path / "s.tar.xz", [("file", "lib/x", b"x")], top=top)
    assert decode_threads(single) == 1
    assert decode_threads(write_archive(tmp_path / "z.tar.zst", [("file", "lib/x", b"x")],
                                        codec="zst", top=top)) == 1
    broken = tmp_path / "broken.tar.xz"
    broken.write_bytes(multi.read_bytes()[:-20])  # no index: a hint, never an error
    assert decode_threads(broken) == 1
    assert decode_threads(tmp_path / "missing.tar.xz") == 1


def test_a_source_waits_for_its_cores_and_one_too_big_still_runs_alone() -> None:
    cores = Cores(4)
    log: list[str] = []
    with cores.take(3):
        waiting = threading.Thread(target=lambda: _hold(cores, 2, log, "second"))
        waiting.start()
        time.sleep(0.1)
        assert log == []  # 3 of 4 taken: a source wanting 2 waits
        with cores.take(1):  # one that fits starts at once
            log.append("fits")
    waiting.join()
    assert log == ["fits", "second"]
    with cores.take(9):  # more than there are: starts when nothing else runs
        pass


def test_cores_given_back_early_let_the_next_source_start() -> None:
    """``release()`` (a source's decoder has ended) frees its cores before its block ends:
    the next source starts while the first one's tail runs."""
    cores = Cores(4)
    log: list[str] = []
    ended = threading.Event()

    def first() -> None:
        with cores.take(4, 0) as release:
            log.append("first decodes")
            release()
            release()   # idempotent
            assert ended.wait(10), "the second source did not start during the first's tail"
            log.append("first's tail ends")

    def second() -> None:
        with cores.take(4, 1):
            log.append("second decodes")
            ended.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert log == ["first decodes", "second decodes", "first's tail ends"]
    assert cores._free == 4 and cores._running == 0


def _hold(cores: Cores, want: int, log: list[str], name: str) -> None:
    with cores.take(want):
        log.append(name)


def test_largest_first_with_its_cores_results_in_order(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    big_top = "libcublas-linux-x86_64-13.0.0.0-archive"
    big = _multiblock(tmp_path / f"{big_top}.tar.xz", big_top, 400 * 1024)
    small = []
    for pname in ("libcurand", "libnvjpeg"):
        top = f"{pname}-linux-x86_64-13.0.0.0-archive"
        small.append(write_archive(tmp_path / f"{top}.tar.xz",
                                   [("file", "lib/libx.so.1", b"x" * 100)], top=top))
    started: list[tuple[str, int]] = []
    real = batch.split_to_dir

    def spy(path: object, target: Path, options: SplitOptions) -> object:
        name = Path(getattr(path, "path", path)).name  # type: ignore[arg-type]
        started.append((name.split("-")[0], options.jobs))
        # A tarball's cores go back once its decoder has ended: its source says so.
        assert callable(getattr(path, "on_decoded", None))
        return real(path, target, options)  # type: ignore[arg-type]

    monkeypatch.setattr(batch, "split_to_dir", spy)
    results = split_many([*small, big], tmp_path / "out",
                         SplitOptions(jobs=4, patch=False, memory_limit=64 << 20))
    assert [Path(r.source) for r in results] == [*small, big]  # the caller's order
    assert all(r.error is None for r in results), [r.error for r in results]
    assert started[0] == ("libcublas", 4)  # biggest first, on every core
    assert sorted(started[1:]) == [("libcurand", 2), ("libnvjpeg", 2)]


class _Recording(Cores):
    """Cores that note each source's turn as it is let in."""

    admitted: list[int]

    @contextlib.contextmanager
    def take(self, want: int, turn: int | None = None) -> Iterator[Callable[[], None]]:
        with super().take(want, turn) as release:
            self.admitted.append(-1 if turn is None else turn)
            yield release


def test_sources_start_in_turns_largest_first_whatever_thread_asks_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = [3, 9, 1, 7, 5, 9]  # KiB
    sources = []
    for index, kib in enumerate(sizes):
        top = f"libdemo{index}-linux-x86_64-13.0.0.0-archive"
        sources.append(write_archive(tmp_path / f"{top}.tar.xz",
                                     [("file", "lib/x", os.urandom(kib * 1024))], top=top))
    for attempt in range(3):
        admitted: list[int] = []
        monkeypatch.setattr(_Recording, "admitted", admitted, raising=False)
        monkeypatch.setattr(batch, "Cores", _Recording)
        results = split_many(sources, tmp_path / f"out{attempt}",
                             SplitOptions(jobs=4, patch=False))
        assert all(r.error is None for r in results)
        assert admitted == list(range(len(sources)))  # turn k is the k-th largest
        assert [Path(r.source) for r in results] == sources  # results in the caller's order
