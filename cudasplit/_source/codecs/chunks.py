"""Decoded bytes in bounded chunks: decompressors fed piecewise, and the reader over them.

Every codec yields chunks of at most :data:`CHUNK` bytes; :class:`ChunkReader` hands them to
callers as one binary stream.
"""

from __future__ import annotations

import io
import lzma
import os
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

import zstandard

from cudasplit._run import ByteGrid
from cudasplit.errors import CorruptArchiveError, SourceError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["CHUNK", "CODEC_ERRORS", "ChunkReader", "all_zero", "chain_pieces", "drive",
           "file_pieces", "zero_tail"]

# Errors the codecs raise for damaged input; translated where the stream is read.
CODEC_ERRORS: tuple[type[BaseException], ...] = (
    lzma.LZMAError, zlib.error, OSError, EOFError, zstandard.ZstdError, ValueError,
)

# Size of the decoded pieces handed between threads and of file reads.  1 MiB keeps the
# per-chunk overhead (locking, Python calls) negligible next to ~15 ms of liblzma work.
CHUNK = 1 << 20


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


def file_pieces(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Read ``[start, end)`` in CHUNK pieces with pread (safe to share one fd across threads)."""
    while start < end:
        piece = os.pread(fd, min(CHUNK, end - start), start)
        if not piece:
            raise OSError(f"unexpected end of file at offset {start}")
        start += len(piece)
        yield piece


def all_zero(fd: int, start: int, end: int) -> bool:
    """Whether ``[start, end)`` of the file holds only null bytes.

    The trailing-data rule, one for every codec: after the last complete compressed stream,
    null bytes (any number: what block devices, tapes and ``dd conv=sync`` pad with) are
    accepted and ignored; any other byte is trailing garbage and the archive is refused.
    """
    return all(piece.count(0) == len(piece) for piece in file_pieces(fd, start, end))


def zero_tail(fd: int, size: int) -> int:
    """How many null bytes end the file (read backwards in CHUNK windows)."""
    pos = size
    while pos > 0:
        window = min(pos, CHUNK)
        tail = os.pread(fd, window, pos - window)
        stripped = len(tail) - len(tail.rstrip(b"\0"))
        pos -= stripped
        if stripped < window:
            break
    return size - pos


def drive(dec: _Decompressor, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Feed ``pieces`` to ``dec``, yielding output in chunks of at most CHUNK bytes.

    Stops at the decompressor's end of stream; input left over stays in ``unused_data``
    (and in ``pieces``).
    """
    for piece in pieces:
        out = dec.decompress(piece, CHUNK)
        while True:
            if out:
                yield out
            if dec.eof or dec.needs_input:
                break
            out = dec.decompress(b"", CHUNK)
        if dec.eof:
            return


def chain_pieces(prefix: bytes, middle: Iterator[bytes], suffix: bytes) -> Iterator[bytes]:
    """``middle`` framed by two extra pieces (a header and an index wrapped around a block)."""
    yield prefix
    yield from middle
    yield suffix


class ChunkReader(io.RawIOBase):
    """A read-only binary stream over an iterator of chunks.

    ``read(n)`` returns exactly ``n`` bytes unless the stream ends (as a buffered reader
    would), and codec errors become CorruptArchiveError. ``grid``, when set, counts every
    byte handed out (read, skipped or drained alike): the progress of whoever reads it.
    """

    def __init__(self, chunks: Iterator[bytes], source: str,
                 on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._chunks = chunks
        self._source = source
        self._on_close = on_close
        self._buf = b""
        self._pos = 0
        # The threaded decoder's PipelineStats (tests, benchmarks); None for the others.
        self.stats: object | None = None
        self.grid: ByteGrid | None = None  # progress: bytes handed out, on the run core's grid

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        """Make the buffer non-empty; False at end of stream."""
        while self._pos >= len(self._buf):
            try:
                chunk = next(self._chunks, None)
            except SourceError:
                raise
            except CODEC_ERRORS as exc:
                raise CorruptArchiveError(f"corrupt compressed data ({exc})",
                                          source=self._source) from exc
            if chunk is None:
                return False
            self._buf, self._pos = chunk, 0
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("read from a closed stream")
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        while size > 0 and self._fill():
            start = self._pos
            take = min(size, len(self._buf) - start)
            self._pos += take
            size -= take
            # Whole-chunk reads hand the chunk over without a copy.
            parts.append(self._buf if take == len(self._buf) else self._buf[start:start + take])
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if self.grid is not None:
            self.grid.add(len(data))
        return data

    def read1(self, size: int = -1) -> bytes | memoryview:
        """At most ``size`` bytes from the current chunk, without a copy (a view of it).

        The bulk path of a member's data to its file: a read that straddles two chunks would
        otherwise cost a slice of each and a join, two copies of every byte on the one
        thread that feeds the writes. Empty only at the end of the stream.
        """
        if self.closed:
            raise ValueError("read from a closed stream")
        if not self._fill():
            return b""
        start = self._pos
        take = len(self._buf) - start if size is None or size < 0 else min(size,
                                                                          len(self._buf) - start)
        self._pos += take
        if self.grid is not None:
            self.grid.add(take)
        if take == len(self._buf):
            return self._buf
        return memoryview(self._buf)[start:start + take]

    def readall(self) -> bytes:
        parts = []
        while self._fill():
            parts.append(self._buf[self._pos:])
            self._pos = len(self._buf)
        data = b"".join(parts)
        if self.grid is not None:
            self.grid.add(len(data))
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def add_on_close(self, callback: Callable[[], None]) -> None:
        """Also call ``callback`` on close, after what was given (a decoder started early
        owns the file it reads)."""
        first = self._on_close

        def both() -> None:
            try:
                if first is not None:
                    first()
            finally:
                callback()
        self._on_close = both

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._on_close is not None:
                self._on_close()
        finally:
            self._buf = b""
            super().close()
