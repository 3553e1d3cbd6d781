"""Decoded tar bytes behind a file descriptor, moved into files by the kernel.

The decoder binary writes into a pipe (``xz -dc``, ``zstd -dc``, as ``tar -I`` runs them), or a
plain tar is a file: :class:`FdReader` reads from that descriptor only what the caller asks
for (tar headers, a member's first bytes, a small text file) with ``os.read``, and moves a
member's bytes into its file with :meth:`FdReader.transfer_to`: ``splice`` from a pipe,
``copy_file_range`` from a file, so they never become Python objects (benchmarks/README.md
§16 measures it against a read-and-write loop). Nothing is read ahead: every byte the reader
has not handed out is still in the pipe or the file, where ``splice`` finds it.

The end of the stream is checked once, when a read first returns nothing: ``on_end`` (the
decoder child's exit status and its stderr) raises
:class:`~cudasplit.errors.CorruptArchiveError` for damaged data.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from cudasplit._run import ByteGrid, write_all
from cudasplit._source.codecs.chunks import CHUNK

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["FdReader"]

# What says that the kernel cannot move bytes between these two descriptors (a file system
# without splice or copy_file_range support, a cross-device copy on an old kernel): the step
# is then done with read and write, and the reader stops asking.
_SKIP_STEP = 8 << 20
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV,
                          errno.ESPIPE})


class FdReader(io.RawIOBase):
    """A read-only binary stream over ``fd`` (a pipe when ``is_pipe``, else a file read from
    its current offset), with :meth:`transfer_to` and :meth:`skip`.

    ``read(n)`` returns exactly ``n`` bytes unless the stream ends. ``grid``, when set, counts
    every byte handed out, moved or skipped (the progress of whoever reads it).
    """

    def __init__(self, fd: int, source: str, *, is_pipe: bool,
                 on_end: Callable[[], None] | None = None,
                 on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._fd = fd
        self._source = source
        self._is_pipe = is_pipe
        self._on_end = on_end
        self._on_close = on_close
        self._ended = False
        self._kernel_moves = (hasattr(os, "splice") if is_pipe
                              else hasattr(os, "copy_file_range"))
        self._sink_fd: int | None = None      # /dev/null, where a pipe's skipped bytes go
        self.grid: ByteGrid | None = None
        self.stats: object | None = None      # the chunk reader's decoder statistics: none here
        self.moved_in_kernel = 0              # bytes moved by splice/copy_file_range (tests)

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    # -- reading ---------------------------------------------------------------------------

    def _end(self) -> None:
        """The descriptor said end of file: check the decoder once."""
        if not self._ended:
            self._ended = True
            if self._on_end is not None:
                self._on_end()

    def _count(self, count: int) -> None:
        if self.grid is not None and count:
            self.grid.add(count)

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("read from a closed stream")
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        left = size
        while left > 0:
            piece = os.read(self._fd, min(left, CHUNK))
            if not piece:
                self._end()
                break
            parts.append(piece)
            left -= len(piece)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self._count(len(data))
        return data

    def read1(self, size: int = -1) -> bytes:
        """At most ``size`` bytes in one ``os.read``; empty only at the end of the stream."""
        if self.closed:
            raise ValueError("read from a closed stream")
        piece = os.read(self._fd, CHUNK if size is None or size < 0 else min(size, CHUNK))
        if not piece:
            self._end()
        self._count(len(piece))
        return piece

    def readall(self) -> bytes:
        parts = []
        while piece := self.read1(CHUNK):
            parts.append(piece)
        return b"".join(parts)

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    # -- moving and skipping ---------------------------------------------------------------

    def transfer_to(self, fd: int, size: int) -> int:
        """Move at most ``size`` (> 0) bytes into ``fd`` at its offset, in the kernel where
        it can; 0 only at the end of the stream. An error of ``fd`` (a full disk) is the
        ``OSError`` it is, for the writer to name its file."""
        if self.closed:
            raise ValueError("read from a closed stream")
        moved = self._kernel_move(fd, size) if self._kernel_moves else None
        if moved is None:
            piece = os.read(self._fd, min(size, CHUNK))
            write_all(fd, piece)
            moved = len(piece)
        else:
            self.moved_in_kernel += moved
        if not moved:
            self._end()
        self._count(moved)
        return moved

    def _kernel_move(self, fd: int, size: int) -> int | None:
        try:
            if self._is_pipe:
                return os.splice(self._fd, fd, size)
            return os.copy_file_range(self._fd, fd, size)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            self._kernel_moves = False   # this pair cannot: read and write from now on
            return None

    def skip(self, size: int) -> int:
        """Drop at most ``size`` bytes (a member nobody reads); how many, 0 at the end."""
        if self.closed:
            raise ValueError("read from a closed stream")
        skipped = 0
        while skipped < size:
            # In pieces, so that progress moves through a large member nobody reads.
            step = self._drop(min(size - skipped, _SKIP_STEP))
            if not step:
                self._end()
                break
            skipped += step
            self._count(step)
        return skipped

    def _drop(self, size: int) -> int:
        if self._is_pipe and self._kernel_moves:
            if self._sink_fd is None:
                self._sink_fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            try:
                return os.splice(self._fd, self._sink_fd, size)
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
        if not self._is_pipe:
            # A file: move the offset, within what the file holds (a short file is then
            # found as short by the next read, as a pipe's end is).
            here = os.lseek(self._fd, 0, os.SEEK_CUR)
            end = os.fstat(self._fd).st_size
            step = max(0, min(size, end - here))
            os.lseek(self._fd, step, os.SEEK_CUR)
            return step
        return len(os.read(self._fd, min(size, CHUNK)))

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._on_close is not None:
                self._on_close()
        finally:
            if self._sink_fd is not None:
                os.close(self._sink_fd)
                self._sink_fd = None
            super().close()
