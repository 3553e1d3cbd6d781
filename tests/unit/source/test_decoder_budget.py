"""Issue 22: the parallel decoder's memory budget, its wake-one waits, and the option.

Not timed: speed is benchmarks/bench_scaling.py's business. These check that the output is
right at every jobs/budget, that the budget is honoured (bytes counted), that enough budget
lets every thread decode at once, and that a waiting thread is woken only when it can go on.
"""

from __future__ import annotations

import lzma
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudasplit import OptionsError, SplitOptions
from cudasplit._source import (
    CHUNK,
    MAX_DEFAULT_BUDGET,
    MIN_BUDGET,
    BlockPipeline,
    PipelineStats,
    default_decode_budget,
)
from cudasplit.cli import main
from tests.support.tarutil import write_archive
from tests.unit.source.test_codecs import payload, read_all, xz_multiblock

MiB = 1 << 20


def _tasks(blocks: list[int], running: list[int], peak: list[int],
           gate: threading.Event | None = None) -> list[Callable[[], Iterator[bytes]]]:
    """Blocks of the given sizes, yielded in CHUNK pieces; tracks how many run at once."""
    lock = threading.Lock()

    def task(index: int, size: int) -> Iterator[bytes]:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            if gate is not None:
                gate.wait(5)
            for start in range(0, size, CHUNK):
                yield bytes([index % 251]) * min(CHUNK, size - start)
        finally:
            with lock:
                running[0] -= 1

    return [lambda i=i, s=s: task(i, s) for i, s in enumerate(blocks)]  # type: ignore[misc]


def _drain(pipeline: BlockPipeline, blocks: list[int]) -> PipelineStats:
    got = bytearray()
    try:
        for chunk in pipeline.chunks():
            got += chunk
    finally:
        pipeline.close()
    expected = b"".join(bytes([i % 251]) * size for i, size in enumerate(blocks))
    assert bytes(got) == expected
    return pipeline.stats


@pytest.mark.parametrize("budget_blocks", [1, 2, 3, 5])
def test_budget_is_honoured(budget_blocks: int) -> None:
    blocks = [3 * MiB] * 12
    budget = budget_blocks * 3 * MiB
    running, peak = [0], [0]
    pipeline = BlockPipeline(_tasks(blocks, running, peak), 8, budget, blocks)
    stats = _drain(pipeline, blocks)
    assert stats.peak_reserved <= budget
    assert stats.peak_buffered <= budget
    # A whole-block budget admits floor(budget / block) blocks, plus the next one as soon as
    # the reader freed enough of the oldest.
    assert peak[0] <= budget_blocks + 1


def test_enough_budget_keeps_every_thread_busy() -> None:
    """With (jobs + 1) blocks of budget all ``jobs`` threads decode at once: the tasks only
    finish when the gate (opened once all are running) lets them."""
    jobs = 6
    blocks = [2 * MiB] * jobs * 2
    running, peak = [0], [0]
    gate = threading.Event()
    watcher = threading.Thread(target=lambda: _open_when(gate, running, jobs))
    watcher.start()
    pipeline = BlockPipeline(_tasks(blocks, running, peak, gate), jobs,
                             (jobs + 1) * 2 * MiB, blocks)
    _drain(pipeline, blocks)
    watcher.join()
    assert peak[0] == jobs


def _open_when(gate: threading.Event, running: list[int], want: int) -> None:
    for _ in range(500):
        if running[0] >= want:
            break
        threading.Event().wait(0.01)
    gate.set()


def test_streaming_block_stays_within_its_window() -> None:
    """A block of unknown size (zstd, gzip) streams through min(budget, window)."""
    blocks = [20 * MiB]
    running, peak = [0], [0]
    pipeline = BlockPipeline(_tasks(blocks, running, peak), 1, 64 * MiB, [None],
                             stream_window=3 * MiB)
    got = 0
    for chunk in pipeline.chunks():
        got += len(chunk)
        threading.Event().wait(0.001)  # a slow reader: the worker must wait for room
    pipeline.close()
    assert got == 20 * MiB
    assert pipeline.stats.peak_buffered <= 3 * MiB


def test_wake_one() -> None:
    """Each event wakes one thread: wakeups stay within a small multiple of chunks + blocks
    (waking every thread for every chunk, as notify_all did, costs chunks x threads)."""
    blocks = [2 * MiB] * 24
    chunks = sum(-(-b // CHUNK) for b in blocks)
    running, peak = [0], [0]
    pipeline = BlockPipeline(_tasks(blocks, running, peak), 8, 4 * MiB, blocks)
    stats = _drain(pipeline, blocks)
    assert stats.wakeups <= 3 * (chunks + len(blocks))
    assert stats.futile_wakeups <= chunks + len(blocks)


def test_errors_come_in_block_order_and_release_the_budget() -> None:
    def good() -> Iterator[bytes]:
        yield b"a" * CHUNK

    def bad() -> Iterator[bytes]:
        yield b"b" * 10
        raise lzma.LZMAError("boom")

    pipeline = BlockPipeline([good, bad, good], 3, 2 * MiB, [CHUNK, CHUNK, CHUNK])
    got = bytearray()
    with pytest.raises(lzma.LZMAError, match="boom"):
        for chunk in pipeline.chunks():
            got += chunk
    pipeline.close()
    assert bytes(got) == b"a" * CHUNK + b"b" * 10


DATA = payload(5 * MiB, seed=22)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(block=st.sampled_from([MiB // 2, MiB, 3 * MiB // 2, 2 * MiB]),
       jobs=st.integers(min_value=1, max_value=6),
       limit=st.sampled_from([None, MiB, 2 * MiB, 3 * MiB, 64 * MiB]))
def test_parallel_xz_round_trips_at_every_budget(tmp_path: Path, block: int, jobs: int,
                                                 limit: int | None) -> None:
    blob, _ = _cached_multiblock(block)
    path = tmp_path / "m.xz"
    path.write_bytes(blob)
    assert read_all(path, chunk=300_000, jobs=jobs, external=False,
                    memory_limit=limit) == DATA


_MULTI: dict[int, tuple[bytes, list[int]]] = {}


def _cached_multiblock(block: int) -> tuple[bytes, list[int]]:
    if block not in _MULTI:
        _MULTI[block] = xz_multiblock(DATA, block)
    return _MULTI[block]


def test_default_budget() -> None:
    assert default_decode_budget(16, 24 * MiB) == 17 * 24 * MiB
    assert default_decode_budget(1, 1) == MIN_BUDGET
    assert default_decode_budget(1000, 1 << 30) <= MAX_DEFAULT_BUDGET


@pytest.mark.parametrize("bad", [0, -1, MiB - 1, True, "1G", 1.5])
def test_memory_limit_is_validated(bad: object) -> None:
    with pytest.raises(OptionsError, match="memory_limit"):
        SplitOptions(memory_limit=bad)  # type: ignore[arg-type]


def test_memory_limit_accepted_and_used(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz",
                            [("file", "lib/libdemo.txt", b"hello\n")])
    runner = CliRunner()
    bad = runner.invoke(main, ["split", "--memory-limit", "3x", "-o", str(tmp_path / "o"),
                               str(archive)])
    assert bad.exit_code == 2 and "--memory-limit" in bad.output
    small = runner.invoke(main, ["split", "--memory-limit", "1K", "-o", str(tmp_path / "o"),
                                 str(archive)])
    assert small.exit_code == 2 and "--memory-limit" in small.output  # the flag, not the field
    ok = runner.invoke(main, ["split", "-q", "-j3", "--memory-limit", "16M", "-o",
                              str(tmp_path / "o"), str(archive)])
    assert ok.exit_code == 0, ok.output
    placed = [p for p in (tmp_path / "o").rglob("libdemo.txt")]
    assert [p.read_bytes() for p in placed] == [b"hello\n"]


def test_batch_sources_share_the_memory_limit(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    import cudasplit._source.tar as _tarsource
    from cudasplit import split_many

    seen: list[object] = []
    real = _tarsource.open_decompressed

    @contextlib.contextmanager
    def spy(path: Path, **kw: object) -> Iterator[object]:
        seen.append(kw.get("memory_limit"))
        with real(path, **kw) as fh:  # type: ignore[arg-type]
            yield fh

    monkeypatch.setattr(_tarsource, "open_decompressed", spy)
    sources = []
    for version in ("12.9.79", "12.9.80"):
        top = f"cuda_demo-linux-x86_64-{version}-archive"
        sources.append(write_archive(tmp_path / f"{top}.tar.xz",
                                     [("file", "lib/x.txt", b"x\n")], top=top))
    results = split_many(sources, tmp_path / "out",
                         SplitOptions(jobs=2, memory_limit=64 * MiB, default_rules=True))
    assert all(r.error is None for r in results), [r.error for r in results]
    # Each single-block source takes both cores (decoder, writer), so they run one at a time
    # and each may hold the whole cap: never more than the cap at once.
    assert seen == [64 * MiB, 64 * MiB]


def test_empty_blocks_reserve_nothing_for_ever() -> None:
    """The budget comes back whole: empty blocks and partly-taken ones leave nothing."""
    blocks = [0, CHUNK + 5, 0, 3 * CHUNK, 0]
    running, peak = [0], [0]
    pipeline = BlockPipeline(_tasks(blocks, running, peak), 3, 4 * MiB, blocks)
    _drain(pipeline, blocks)
    assert pipeline._reserved == 0
