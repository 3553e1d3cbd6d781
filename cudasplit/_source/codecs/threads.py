"""Blocks decoded by worker threads, delivered in order within a memory budget.

The parallel xz decoder; also the read-ahead thread for codecs that cannot be split.

The memory model: ``budget`` bytes of decoded output, reserved per block when a thread
starts it. A block whose decoded size is known and fits reserves its whole size: its thread
decodes it to the end without ever waiting (``jobs`` blocks decode at full speed while the
reader drains the oldest one), and the reserve shrinks as the reader takes the bytes. A
block larger than the budget (or of unknown size: zstd, gzip) reserves ``min(budget,
stream_window)`` and streams through it, its thread waiting whenever that window is full
(the reader has not reached the block yet). A block starts only when its reserve fits next
to the others' (or when nothing else is buffered, so one block always makes progress).
Decoded bytes held at once therefore never exceed ``budget``, and with ``budget >= (jobs +
1) * block size`` no thread ever waits for memory.

Waiting is targeted: the reader waits on the head block's ``data`` condition, a streaming
worker on its block's ``room``, idle workers on the claim condition; each event wakes the
one thread that can proceed (``notify()``, never ``notify_all()`` except on close).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator, Sequence

from cudasplit._source.codecs.chunks import CHUNK

__all__ = ["BlockPipeline", "PipelineStats"]


class PipelineStats:
    """What a pipeline did, for tests and benchmarks (read after ``close``)."""

    __slots__ = ("futile_wakeups", "peak_buffered", "peak_reserved", "wakeups")

    def __init__(self) -> None:
        self.wakeups = 0          # times a waiting thread was woken
        self.futile_wakeups = 0   # ... and found it still could not proceed
        self.peak_buffered = 0    # most decoded bytes held at once, all blocks together
        self.peak_reserved = 0    # most budget reserved at once


class _Slot:
    """Decoded output of one block: filled by its worker, drained by the reader.

    Both conditions share the pipeline's lock and have one waiter at most: the reader waits
    on ``data``, the block's own worker on ``room``; ``notify()`` wakes exactly that thread.
    """

    __slots__ = ("chunks", "consumed", "data", "done", "error", "nbytes", "reader_waits",
                 "reserve", "room", "size", "worker_waits")

    def __init__(self, lock: threading.Lock, size: int | None) -> None:
        self.data = threading.Condition(lock)
        self.room = threading.Condition(lock)
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = size          # decoded size if known (the xz index says it), else None
        self.reserve = 0          # budget held for this block (set when a worker claims it)
        self.nbytes = 0           # decoded bytes buffered, not yet taken by the reader
        self.consumed = 0         # decoded bytes taken by the reader
        self.done = False
        self.error: BaseException | None = None
        self.reader_waits = False
        self.worker_waits = False

    def charge(self) -> int:
        """Budget this block may still need: its reserve, less what the reader has taken
        of a whole-block reserve (those bytes can never come back)."""
        if self.size is not None and self.reserve >= self.size:
            return max(0, self.size - self.consumed)
        return self.reserve


def _reserve(size: int | None, budget: int, window: int) -> int:
    """Budget a block takes when it starts."""
    if size is not None and size <= budget:
        return max(size, 1)  # whole block: decoded start to end without a pause
    return min(budget, window)  # streamed through a window


def _wait(cond: threading.Condition, ready: Callable[[], bool], stats: PipelineStats) -> None:
    """Wait on ``cond`` until ``ready()``, counting wakeups and futile ones."""
    while not ready():
        cond.wait()
        stats.wakeups += 1
        if not ready():
            stats.futile_wakeups += 1


class BlockPipeline:
    """Decode blocks with ``jobs`` threads; hand the output over strictly in block order,
    within ``budget`` bytes (the module docstring has the model)."""

    def __init__(
        self,
        tasks: Sequence[Callable[[], Iterator[bytes]]],
        jobs: int,
        budget: int,
        sizes: Sequence[int | None] | None = None,
        stream_window: int = 64 << 20,
    ) -> None:
        self._tasks = tasks
        self._sizes = list(sizes) if sizes is not None else [None] * len(tasks)
        self._budget = max(CHUNK, budget)
        self._stream_window = max(CHUNK, stream_window)
        self._lock = threading.Lock()
        self._claim_cond = threading.Condition(self._lock)
        self._claim_waiters = 0
        self._slots: dict[int, _Slot] = {}
        self._next_task = 0
        self._reserved = 0
        self._buffered = 0
        self._stop = False
        self.stats = PipelineStats()
        self._threads = [
            threading.Thread(target=self._work, name=f"cudasplit-xz-{i}", daemon=True)
            for i in range(min(jobs, len(tasks)))
        ]
        for thread in self._threads:
            thread.start()

    def _slot(self, index: int) -> _Slot:
        slot = self._slots.get(index)
        if slot is None:
            slot = self._slots[index] = _Slot(self._lock, self._sizes[index])
        return slot

    def _wait(self, cond: threading.Condition, ready: Callable[[], bool]) -> None:
        _wait(cond, lambda: ready() or self._stop, self.stats)

    def _reserve_for(self, index: int) -> int:
        return _reserve(self._sizes[index], self._budget, self._stream_window)

    def _can_claim(self) -> bool:
        if self._next_task >= len(self._tasks):
            return True  # nothing left: the caller returns
        return (self._reserved == 0
                or self._reserved + self._reserve_for(self._next_task) <= self._budget)

    def _wake_claimer(self) -> None:
        if self._claim_waiters and self._can_claim():
            self._claim_cond.notify()

    def _claim(self) -> tuple[int, _Slot] | None:
        with self._lock:
            self._claim_waiters += 1
            try:
                self._wait(self._claim_cond, self._can_claim)
            finally:
                self._claim_waiters -= 1
            if self._stop or self._next_task >= len(self._tasks):
                return None
            index = self._next_task
            self._next_task += 1
            slot = self._slot(index)
            slot.reserve = self._reserve_for(index)
            self._reserved += slot.charge()  # what the reader's takes give back, exactly
            self.stats.peak_reserved = max(self.stats.peak_reserved, self._reserved)
            self._wake_claimer()  # the budget may admit one more block: pass it on
            return index, slot

    def _put(self, slot: _Slot, chunk: bytes) -> bool:
        with self._lock:
            if slot.nbytes and slot.nbytes + len(chunk) > slot.reserve:
                slot.worker_waits = True
                self._wait(slot.room, lambda: slot.nbytes + len(chunk) <= slot.reserve
                           or not slot.nbytes)
                slot.worker_waits = False
            if self._stop:
                return False
            slot.chunks.append(chunk)
            slot.nbytes += len(chunk)
            self._buffered += len(chunk)
            self.stats.peak_buffered = max(self.stats.peak_buffered, self._buffered)
            if slot.reader_waits:
                slot.data.notify()
            return True

    def _work(self) -> None:
        while (claimed := self._claim()) is not None:
            index, slot = claimed
            try:
                for chunk in self._tasks[index]():
                    if not self._put(slot, chunk):
                        return
            except BaseException as exc:  # handed to the reader, raised there in stream order
                slot.error = exc
            finally:  # whatever happened, the reader must not wait for this block forever
                with self._lock:
                    slot.done = True
                    if slot.reader_waits:
                        slot.data.notify()

    def _take(self, index: int) -> bytes | None:
        """Next chunk of block ``index``; None once the block is exhausted."""
        with self._lock:
            slot = self._slot(index)
            if not (slot.chunks or slot.done):
                slot.reader_waits = True
                self._wait(slot.data, lambda: bool(slot.chunks) or slot.done)
                slot.reader_waits = False
            if self._stop:
                return None
            before = slot.charge()
            if slot.chunks:
                chunk = slot.chunks.popleft()
                slot.nbytes -= len(chunk)
                slot.consumed += len(chunk)
                self._buffered -= len(chunk)
                after = slot.charge()
                if slot.worker_waits:
                    slot.room.notify()
            else:  # the block is finished: whatever it still held goes back to the budget
                chunk, after = None, 0
                del self._slots[index]
            self._reserved -= before - after
            self._wake_claimer()
        if chunk is None and slot.error is not None:
            raise slot.error
        return chunk

    def chunks(self) -> Iterator[bytes]:
        for index in range(len(self._tasks)):
            while (chunk := self._take(index)) is not None:
                yield chunk
            if self._stop:
                return

    def close(self) -> None:
        with self._lock:
            self._stop = True
            for slot in self._slots.values():
                slot.data.notify_all()
                slot.room.notify_all()
            self._slots.clear()
            self._claim_cond.notify_all()
        for thread in self._threads:
            thread.join()
