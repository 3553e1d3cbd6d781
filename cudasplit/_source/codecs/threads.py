"""Blocks decoded by worker threads, delivered in order with bounded read-ahead.

The parallel xz decoder; also the read-ahead thread for codecs that cannot be split.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator, Sequence

from cudasplit._source.codecs.chunks import CHUNK

__all__ = ["BlockPipeline"]


class _Slot:
    """Decoded output of one block, filled by a worker and drained by the reader."""

    __slots__ = ("chunks", "done", "error", "nbytes")

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.nbytes = 0
        self.done = False
        self.error: BaseException | None = None


class BlockPipeline:
    """Decode blocks with ``jobs`` threads; hand the output over strictly in block order.

    At most ``jobs + 1`` blocks are in flight (one more than threads, so that a thread that
    finished a block while the reader is still busy with an earlier one can start the next),
    and each in-flight block buffers at most ``read_ahead // (jobs + 1)`` decoded bytes
    before its thread waits.  Memory is therefore bounded by ``read_ahead`` plus what each
    liblzma decoder touches (up to the dictionary size, or the block size if smaller),
    independent of the block size.
    """

    def __init__(
        self,
        tasks: Sequence[Callable[[], Iterator[bytes]]],
        jobs: int,
        read_ahead: int,
    ) -> None:
        self._tasks = tasks
        self._window = jobs + 1
        self._limit = max(CHUNK, read_ahead // self._window)
        self._cond = threading.Condition()
        self._slots: dict[int, _Slot] = {}
        self._next_task = 0
        self._head = 0
        self._stop = False
        self._threads = [
            threading.Thread(target=self._work, name=f"cudasplit-xz-{i}", daemon=True)
            for i in range(min(jobs, len(tasks)))
        ]
        for thread in self._threads:
            thread.start()

    # worker side -------------------------------------------------------------------

    def _claim(self) -> tuple[int, _Slot] | None:
        with self._cond:
            while (
                not self._stop
                and self._next_task < len(self._tasks)
                and self._next_task >= self._head + self._window
            ):
                self._cond.wait()
            if self._stop or self._next_task >= len(self._tasks):
                return None
            index, slot = self._next_task, _Slot()
            self._slots[index] = slot
            self._next_task += 1
            return index, slot

    def _put(self, slot: _Slot, chunk: bytes) -> bool:
        with self._cond:
            while slot.nbytes >= self._limit and not self._stop:
                self._cond.wait()
            if self._stop:
                return False
            slot.chunks.append(chunk)
            slot.nbytes += len(chunk)
            self._cond.notify_all()
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
                with self._cond:
                    slot.done = True
                    self._cond.notify_all()

    # reader side -------------------------------------------------------------------

    def _take(self, index: int) -> bytes | None:
        """Next chunk of block ``index``; None once the block is exhausted."""
        with self._cond:
            if self._head != index:
                self._head = index
                self._cond.notify_all()
            while (slot := self._slots.get(index)) is None or not (slot.chunks or slot.done):
                self._cond.wait()
            if slot.chunks:
                chunk = slot.chunks.popleft()
                slot.nbytes -= len(chunk)
                self._cond.notify_all()
                return chunk
            del self._slots[index]
        if slot.error is not None:
            raise slot.error
        return None

    def chunks(self) -> Iterator[bytes]:
        for index in range(len(self._tasks)):
            while (chunk := self._take(index)) is not None:
                yield chunk

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._slots.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
