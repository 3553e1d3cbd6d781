"""Progress within a member: a stream that reports the bytes read through it, so that a
status line moves while one 855 MB library streams, not only between members."""

from __future__ import annotations

from collections.abc import Callable
from threading import Lock
from typing import Any, BinaryIO, cast

from cudasplit._split.options import Progress

__all__ = ["STEP", "MeteredStream", "ProgressCallback", "Tally", "metered"]

ProgressCallback = Callable[[Progress], None]

STEP = 8 << 20  # report at most every 8 MiB read: a call per chunk would cost more than it says


class MeteredStream:
    """Reads through ``stream``; ``on_bytes(total read so far)`` after each ``STEP`` bytes.
    Anything else is the wrapped stream's (a stand-in wherever a ``BinaryIO`` is read)."""

    def __init__(self, stream: BinaryIO, on_bytes: Callable[[int], None]) -> None:
        self._stream = stream
        self._on_bytes = on_bytes
        self.read_so_far = 0
        self._next = STEP

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._count(len(data))
        return data

    def read1(self, size: int = -1) -> bytes | memoryview:
        """As ``read``, through the wrapped stream's ``read1`` (no copy) where it has one."""
        read1 = getattr(self._stream, "read1", None)
        data: bytes | memoryview = read1(size) if read1 is not None else self._stream.read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        count = self._stream.readinto(buffer)  # type: ignore[attr-defined]
        self._count(count or 0)
        return int(count or 0)

    def _count(self, count: int) -> None:
        self.read_so_far += count
        if self.read_so_far >= self._next:
            # On a fixed grid of STEP, not STEP after the last report: reads of any size
            # (``read1`` stops at the decoder's chunk edges) then report as often.
            self._next += STEP * ((self.read_so_far - self._next) // STEP + 1)
            self._on_bytes(self.read_so_far)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def metered(stream: BinaryIO | None, size: int, progress: ProgressCallback | None,
            at: Callable[[int], Progress]) -> BinaryIO | None:
    """``stream``, metered when there is a callback and the member is worth it (``at(read)``
    is the Progress to report after ``read`` bytes)."""
    if progress is None or stream is None or size < STEP:
        return stream
    return cast(BinaryIO, MeteredStream(stream, lambda read: progress(at(read))))


class Tally:
    """Counts finished items (tarballs, files) for a progress callback; thread-safe, since
    ``verify`` and ``features`` finish tarballs on several threads."""

    def __init__(self, source: str, progress: ProgressCallback | None) -> None:
        self.source, self.progress = source, progress
        self.items = self.bytes = 0
        self._lock = Lock()

    def add(self, current: str, size: int) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.items += 1
            self.bytes += size
            self.progress(Progress(self.source, self.items, self.bytes, current))

    def done(self) -> None:
        if self.progress is not None:
            self.progress(Progress(self.source, self.items, self.bytes, "", done=True))
