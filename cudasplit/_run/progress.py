"""Progress, one voice for every command: the :class:`Progress` value a callback hears, and the
meters that make it move by bytes in every phase (reading members, skipping them, hashing,
scanning, compressing), not only between members or tarballs.

* :class:`MeteredStream` / :func:`metered`: a stream that reports the bytes read through it.
* :class:`ByteGrid`: calls back on a fixed grid of :data:`STEP` bytes (the one rule for how
  often bytes are reported).
* :class:`Tally`: items (tarballs, files, archives) and bytes of a multi-item run, thread-safe;
  :meth:`Tally.meter` gives each item a byte callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from threading import Lock
from typing import Any, BinaryIO, cast

from cudasplit._run.transfer import transfer

__all__ = ["STEP", "ByteGrid", "ItemMeter", "MeteredStream", "Progress", "ProgressCallback",
           "Tally", "metered"]


@dataclass(frozen=True, slots=True)
class Progress:
    """Handed to a progress callback (the API itself never prints): ``SplitOptions.progress``
    as members stream (within large ones and while skipping data too); ``progress=`` of
    :func:`verify_manifest`, :func:`manifest_features`, :func:`nixify_manifest` (bytes as
    each tarball is read or hashed), :func:`gpu_prune_plan` (a tarball's members and bytes, a
    directory's files), :func:`diff_releases` (one series per tarball and pass, ``source``
    naming both: ``x.tar.xz (pass 2 of 2: ELF names)``; a split directory's files) and
    :func:`closure_of` (per file).

    Attributes:
        source: the source being read (or the manifest, or the outputs being scanned).
        members: items done so far: members, tarballs or files.
        bytes: bytes done so far (tarballs: uncompressed tar bytes read; ``verify``: bytes
            hashed; ``repack``: bytes read again while compressing, counted on).
        current: the item in hand (``repack`` while compressing: "compressing <archive>").
        done: the last call of a run.
        unit: what ``members`` counts when it is not what the call usually counts (``repack``
            while compressing: ``"archive"``); empty otherwise.

    Raises:
        Nothing: a value.
    """

    source: str
    members: int          # items done so far
    bytes: int            # bytes done so far
    current: str          # the item in hand
    done: bool = False    # the last call of a run
    unit: str = ""        # what ``members`` counts, where a phase counts something else


ProgressCallback = Callable[[Progress], None]

STEP = 8 << 20  # report at most every 8 MiB: a call per chunk would cost more than it says


class ByteGrid:
    """Counts bytes and calls ``on_bytes(total so far)`` each time the total crosses a
    multiple of :data:`STEP` (a fixed grid, not STEP after the last report: reads of any size
    then report as often, and never past what was read)."""

    __slots__ = ("_next", "_on_bytes", "total")

    def __init__(self, on_bytes: Callable[[int], None]) -> None:
        self._on_bytes = on_bytes
        self.total = 0
        self._next = STEP

    def add(self, count: int) -> None:
        self.total += count
        if self.total >= self._next:
            self._next += STEP * ((self.total - self._next) // STEP + 1)
            self._on_bytes(self.total)


class MeteredStream:
    """Reads through ``stream``; ``on_bytes(total read so far)`` after each ``STEP`` bytes.
    Anything else is the wrapped stream's (a stand-in wherever a ``BinaryIO`` is read)."""

    def __init__(self, stream: BinaryIO, on_bytes: Callable[[int], None] | ByteGrid) -> None:
        """``on_bytes``: a callback, or a :class:`ByteGrid` several streams count on (its
        callback then hears the total of all of them)."""
        self._stream = stream
        self._grid = on_bytes if isinstance(on_bytes, ByteGrid) else ByteGrid(on_bytes)

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._grid.add(len(data))
        return data

    def read1(self, size: int = -1) -> bytes | memoryview:
        """As ``read``, through the wrapped stream's ``read1`` (no copy) where it has one."""
        read1 = getattr(self._stream, "read1", None)
        data: bytes | memoryview = read1(size) if read1 is not None else self._stream.read(size)
        self._grid.add(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        count = self._stream.readinto(buffer)  # type: ignore[attr-defined]
        self._grid.add(count or 0)
        return int(count or 0)

    def transfer_to(self, fd: int, size: int) -> int:
        """As ``read``, the bytes moved into ``fd`` (in the kernel where the wrapped stream
        can: :func:`~cudasplit._run.transfer.transfer`) and counted."""
        moved = transfer(self._stream, fd, size)
        self._grid.add(moved)
        return moved

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
    """Items and bytes of a run over many items (tarballs, files, archives) for a progress
    callback; thread-safe, since ``verify`` and ``features`` work on several at once.

    Bytes move as each item is read (:meth:`meter`, :meth:`advance`); :meth:`add` counts an
    item as done (with the bytes of it not reported yet); :meth:`done` is the last call.
    """

    def __init__(self, source: str, progress: ProgressCallback | None, *,
                 unit: str = "") -> None:
        self.source, self.progress, self.unit = source, progress, unit
        self.items = self.bytes = 0
        self._lock = Lock()

    def advance(self, current: str, count: int) -> None:
        """``count`` more bytes of ``current`` are done."""
        if self.progress is None or count <= 0:
            return
        with self._lock:
            self.bytes += count
            update = self._update(current)
        self.progress(update)

    def _update(self, current: str, done: bool = False) -> Progress:
        return Progress(self.source, self.items, self.bytes, current, done, self.unit)

    def reach(self, current: str, total: int) -> None:
        """The run's bytes are now ``total`` (a counter kept elsewhere, e.g. shared by
        worker processes); never moves backwards."""
        if self.progress is None:
            return
        with self._lock:
            if total <= self.bytes:
                return
            self.bytes = total
            update = self._update(current)
        self.progress(update)

    def meter(self, current: str) -> ItemMeter:
        """A byte callback for one item (called with the item's bytes so far, as
        :class:`ByteGrid` and :class:`MeteredStream` call), whose :meth:`ItemMeter.finish`
        counts the item as done."""
        return ItemMeter(self, current)

    def add(self, current: str, size: int = 0, *, metered: int = 0) -> None:
        """An item is done: ``size`` bytes in all, of which ``metered`` were reported."""
        if self.progress is None:
            return
        with self._lock:
            self.items += 1
            self.bytes += max(0, size - metered)
            update = self._update(current)
        self.progress(update)

    def done(self) -> None:
        if self.progress is not None:
            self.progress(self._update("", done=True))


class ItemMeter:
    """One item of a :class:`Tally`: call it with the item's bytes so far; :meth:`finish`
    when the item is done (its size, of which the bytes not reported yet are added)."""

    __slots__ = ("current", "reported", "tally")

    def __init__(self, tally: Tally, current: str) -> None:
        self.tally, self.current, self.reported = tally, current, 0

    def __call__(self, so_far: int) -> None:
        if so_far > self.reported:
            self.tally.advance(self.current, so_far - self.reported)
            self.reported = so_far

    def again(self) -> Callable[[int], None]:
        """A byte callback for one more pass over the item (``diff`` and ``nixify`` read a
        tarball twice): its bytes count on from what was reported so far."""
        base = self.reported
        return lambda so_far: self(base + so_far)

    def progress(self) -> ProgressCallback:
        """A :class:`Progress` callback (a split's) whose bytes count on for this item."""
        on_bytes = self.again()
        return lambda update: on_bytes(update.bytes)

    def finish(self, size: int = 0) -> None:
        self.tally.add(self.current, size, metered=self.reported)
