"""Compression detection by magic bytes and decompressing streams.

``open_decompressed`` yields one readable binary stream of tar bytes, whatever the codec:

* ``.xz``: the stream footer and index are parsed up front (this also finds truncation and
  trailing garbage before a single byte is delivered).  With ``jobs > 1`` the blocks listed
  in the index are decoded concurrently by ``jobs`` threads (liblzma releases the GIL) and
  delivered in order with bounded read-ahead.  Each block is decoded by wrapping it in a
  minimal single-block .xz stream, so liblzma itself verifies the block header CRC, the
  block check (CRC32/CRC64/SHA-256) and the block sizes against the index; the real index
  CRC32 and the stream header/footer are verified here.
* ``.zst``: ``zstandard`` decompression objects, frame by frame (the streaming reader of
  ``zstandard`` silently accepts truncated input, so it is not used).
* ``.gz``: the stdlib ``gzip`` reader; ``.bz2``: ``bz2`` decompressors, stream by stream.
* ``external=True`` (or the measured default, see ``_EXTERNAL_BY_DEFAULT``) pipes the file
  through the system ``xz``/``zstd`` binary instead.

Every failure of the data becomes :class:`~cudasplit.errors.CorruptArchiveError` (or
:class:`~cudasplit.errors.SourceError` for an unreadable file) with a one-line message that
names the source; threads are stopped and subprocesses killed and reaped on close.
"""

from __future__ import annotations

import bz2
import collections
import contextlib
import enum
import fcntl
import functools
import gzip
import io
import logging
import lzma
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO, Protocol, cast

import zstandard

from .errors import CorruptArchiveError, SourceError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)


class Codec(enum.StrEnum):
    XZ = "xz"
    GZIP = "gzip"
    BZIP2 = "bzip2"
    ZSTD = "zstd"
    NONE = "none"


_MAGIC: tuple[tuple[bytes, Codec], ...] = (
    (b"\xfd7zXZ\x00", Codec.XZ),
    (b"\x1f\x8b", Codec.GZIP),
    (b"BZh", Codec.BZIP2),
    (b"\x28\xb5\x2f\xfd", Codec.ZSTD),
)

# Errors the codecs raise for damaged input; translated where the stream is read.
CODEC_ERRORS: tuple[type[BaseException], ...] = (
    lzma.LZMAError, zlib.error, OSError, EOFError, zstandard.ZstdError, ValueError,
)

# Size of the decoded pieces handed between threads and of file reads.  1 MiB keeps the
# per-chunk overhead (locking, Python calls) negligible next to ~15 ms of liblzma work.
CHUNK = 1 << 20
# Bytes of decoded output the parallel xz decoder may buffer ahead of the reader.
DEFAULT_READ_AHEAD = 64 << 20
# An xz index larger than this is not plausible for a tarball (2 GB in 64 KiB blocks is
# ~200 KB of index); refusing it keeps a forged footer from making us allocate gigabytes.
_MAX_XZ_INDEX = 64 << 20

# Measured on 2 cores (benchmarks/README.md): single-block xz and zstd decode as
# fast in-process as with the binaries; for multi-block xz, `xz -T2` is ~6% faster than the
# threaded in-process decoder with 24 MiB blocks (2.6x faster with 192 MiB blocks) but only
# because it buffers whole blocks: 160 MB RSS at 24 MiB blocks, 700 MB at 192 MiB, against
# a fixed ~75/150 MB in-process.  Bounded memory wins the default; external=True is there
# for those who prefer speed.
_EXTERNAL_BY_DEFAULT: dict[Codec, bool] = {Codec.XZ: False, Codec.ZSTD: False}


def detect_codec(head: bytes, *, source: str = "") -> Codec:
    """Name the compression of a file from its first bytes (at least 512 for plain tar)."""
    for magic, codec in _MAGIC:
        if head.startswith(magic):
            return codec
    if len(head) >= 4 and head[1:4] == b"\x2a\x4d\x18" and head[0] & 0xF0 == 0x50:
        return Codec.ZSTD  # a zstd skippable (metadata) frame first, as pzstd writes
    if len(head) >= 262 and head[257:262] == b"ustar":
        return Codec.NONE
    if not head:
        raise SourceError("empty file, not an archive", source=source)
    raise SourceError("not a tar archive (unknown magic bytes)", source=source)


# --------------------------------------------------------------------------------------
# xz container layout (https://tukaani.org/xz/xz-file-format.txt)
# --------------------------------------------------------------------------------------

_XZ_HEADER_MAGIC = b"\xfd7zXZ\x00"
_XZ_FOOTER_MAGIC = b"YZ"


@dataclass(frozen=True)
class XzBlock:
    """One block as the index lists it: where it is and how much it decodes to."""

    offset: int  # absolute file offset of the block header
    unpadded_size: int  # header + compressed data + check, without block padding
    uncompressed_size: int

    @property
    def padded_size(self) -> int:
        return _round4(self.unpadded_size)


@dataclass(frozen=True)
class XzStream:
    """One stream of a (possibly concatenated) .xz file."""

    start: int
    end: int  # offset just after the stream footer
    header: bytes  # the 12-byte stream header, reused to wrap single blocks
    flags: bytes  # the 2 stream-flag bytes (the check type lives in the second one)
    blocks: tuple[XzBlock, ...]


def _round4(n: int) -> int:
    return (n + 3) & ~3


def _corrupt(source: str, what: str) -> CorruptArchiveError:
    return CorruptArchiveError(f"corrupt xz file: {what}", source=source)


def _pread_exact(fd: int, size: int, offset: int, source: str) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise _corrupt(source, f"short read at offset {offset}")
    return data


def _read_varint(buf: bytes, pos: int, source: str) -> tuple[int, int]:
    """Decode an xz multibyte integer (7 bits a byte, at most 9 bytes, minimal)."""
    value = 0
    for i in range(9):
        if pos + i >= len(buf):
            break
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if byte == 0 and i > 0:
                break  # non-minimal encoding: the spec forbids it
            return value, pos + i + 1
    raise _corrupt(source, "bad integer in index")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _parse_footer(footer: bytes, source: str) -> tuple[int, bytes]:
    """Return (index size, stream flags) from a 12-byte stream footer."""
    if footer[10:12] != _XZ_FOOTER_MAGIC:
        raise _corrupt(source, "no stream footer at the end (truncated, or trailing garbage)")
    if zlib.crc32(footer[4:10]) != struct.unpack("<I", footer[0:4])[0]:
        raise _corrupt(source, "stream footer CRC mismatch")
    flags = footer[8:10]
    if flags[0] != 0 or flags[1] & 0xF0:
        raise _corrupt(source, "unsupported stream flags")
    return (struct.unpack("<I", footer[4:8])[0] + 1) * 4, flags


def _parse_index(index: bytes, source: str) -> list[tuple[int, int]]:
    """Return (unpadded size, uncompressed size) per block from a complete index field."""
    if index[0] != 0 or zlib.crc32(index[:-4]) != struct.unpack("<I", index[-4:])[0]:
        raise _corrupt(source, "bad index (indicator or CRC32)")
    count, pos = _read_varint(index, 1, source)
    if count > len(index) // 2:
        raise _corrupt(source, "index lists more blocks than it can hold")
    records = []
    for _ in range(count):
        unpadded, pos = _read_varint(index, pos, source)
        uncompressed, pos = _read_varint(index, pos, source)
        if unpadded < 5:
            raise _corrupt(source, "index record with impossible block size")
        records.append((unpadded, uncompressed))
    if _round4(pos) != len(index) - 4 or any(index[pos:-4]):
        raise _corrupt(source, "bad index padding or size")
    return records


def _skip_stream_padding(fd: int, pos: int) -> int:
    """Move ``pos`` back over stream padding (null bytes, in multiples of four)."""
    while pos >= 4:
        window = min(pos, 4096)
        tail = os.pread(fd, window, pos - window)
        stripped = len(tail) - len(tail.rstrip(b"\0"))
        pos -= stripped & ~3
        if stripped < window:
            break
    return pos


def _read_stream_backwards(fd: int, end: int, source: str) -> XzStream:
    """Parse the stream that ends at ``end`` (its footer is the last 12 bytes)."""
    if end < 24:
        raise _corrupt(source, "truncated (too short for a stream)")
    index_size, flags = _parse_footer(_pread_exact(fd, 12, end - 12, source), source)
    index_start = end - 12 - index_size
    if index_size > _MAX_XZ_INDEX or index_start < 12:
        raise _corrupt(source, "index size out of range")
    records = _parse_index(_pread_exact(fd, index_size, index_start, source), source)
    start = index_start - sum(_round4(u) for u, _ in records) - 12
    if start < 0:
        raise _corrupt(source, "index describes more data than the file holds")
    header = _pread_exact(fd, 12, start, source)
    if header[:6] != _XZ_HEADER_MAGIC or header[6:8] != flags:
        raise _corrupt(source, f"stream header at offset {start} missing or inconsistent")
    if zlib.crc32(header[6:8]) != struct.unpack("<I", header[8:12])[0]:
        raise _corrupt(source, "stream header CRC mismatch")
    blocks = []
    offset = start + 12
    for unpadded, uncompressed in records:
        blocks.append(XzBlock(offset, unpadded, uncompressed))
        offset += _round4(unpadded)
    return XzStream(start, end, header, flags, tuple(blocks))


def read_xz_layout(fd: int, size: int, *, source: str = "") -> list[XzStream]:
    """Parse every stream of an .xz file from its end: footers, indexes, stream padding.

    Truncation and trailing garbage both show up here, as a missing footer.
    """
    if size % 4:
        raise _corrupt(source, "size is not a multiple of four (truncated, or trailing garbage)")
    streams: list[XzStream] = []
    pos = size
    while pos > 0:
        pos = _skip_stream_padding(fd, pos)
        stream = _read_stream_backwards(fd, pos, source)
        streams.append(stream)
        pos = stream.start
    streams.reverse()
    return streams


def _single_block_suffix(stream: XzStream, block: XzBlock) -> bytes:
    """Index + footer of a stream that holds just ``block`` (wraps it for liblzma)."""
    body = b"\0" + _encode_varint(1)
    body += _encode_varint(block.unpadded_size) + _encode_varint(block.uncompressed_size)
    body += b"\0" * (_round4(len(body)) - len(body))
    index = body + struct.pack("<I", zlib.crc32(body))
    backward = struct.pack("<I", len(index) // 4 - 1) + stream.flags
    footer = struct.pack("<I", zlib.crc32(backward)) + backward + _XZ_FOOTER_MAGIC
    return index + footer


# --------------------------------------------------------------------------------------
# Driving liblzma / bzip2 decompressors with bounded output
# --------------------------------------------------------------------------------------


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def needs_input(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


def _file_pieces(fd: int, start: int, end: int) -> Iterator[bytes]:
    """Read ``[start, end)`` in CHUNK pieces with pread (safe to share one fd across threads)."""
    while start < end:
        piece = os.pread(fd, min(CHUNK, end - start), start)
        if not piece:
            raise OSError(f"unexpected end of file at offset {start}")
        start += len(piece)
        yield piece


def _drive(dec: _Decompressor, pieces: Iterator[bytes]) -> Iterator[bytes]:
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


def _decode_exact(pieces: Iterator[bytes], what: str, source: str) -> Iterator[bytes]:
    """Decode pieces that must form exactly one complete .xz stream."""
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        yield from _drive(dec, pieces)
    except lzma.LZMAError as exc:
        raise _corrupt(source, f"{what}: {exc}") from exc
    if not dec.eof or dec.unused_data or next(pieces, b""):
        raise _corrupt(source, f"{what}: data does not end where the index says")


def _xz_block_chunks(fd: int, stream: XzStream, block: XzBlock, source: str) -> Iterator[bytes]:
    pieces = _chain_pieces(
        stream.header,
        _file_pieces(fd, block.offset, block.offset + block.padded_size),
        _single_block_suffix(stream, block),
    )
    yield from _decode_exact(pieces, f"block at offset {block.offset}", source)


def _chain_pieces(prefix: bytes, middle: Iterator[bytes], suffix: bytes) -> Iterator[bytes]:
    yield prefix
    yield from middle
    yield suffix


def _xz_sequential_chunks(fd: int, streams: Sequence[XzStream], source: str) -> Iterator[bytes]:
    """Single-threaded: each whole stream through one liblzma decoder, as ``xz -dc`` does."""
    for stream in streams:
        pieces = _file_pieces(fd, stream.start, stream.end)
        yield from _decode_exact(pieces, f"stream at offset {stream.start}", source)


# --------------------------------------------------------------------------------------
# Parallel xz: ordered delivery of blocks decoded by worker threads
# --------------------------------------------------------------------------------------


class _Slot:
    """Decoded output of one block, filled by a worker and drained by the reader."""

    __slots__ = ("chunks", "done", "error", "nbytes")

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.nbytes = 0
        self.done = False
        self.error: BaseException | None = None


class _BlockPipeline:
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


# --------------------------------------------------------------------------------------
# Other codecs
# --------------------------------------------------------------------------------------


def _bz2_chunks(fh: IO[bytes], source: str) -> Iterator[bytes]:
    """bzip2 streams back to back; anything else after a stream is an error.

    (``bz2.open`` silently ignores trailing garbage, hence this loop.)
    """
    pending = b""
    while True:
        head = pending + fh.read(max(0, 3 - len(pending)))
        if not head:
            return
        if not head.startswith(b"BZh"):
            raise CorruptArchiveError("trailing garbage after the bzip2 data", source=source)
        dec = bz2.BZ2Decompressor()
        pieces = _chain_pieces(head, iter(lambda: fh.read(CHUNK), b""), b"")
        yield from _drive(dec, pieces)
        if not dec.eof:
            raise CorruptArchiveError("truncated bzip2 data", source=source)
        pending = dec.unused_data


def _zstd_chunks(fh: IO[bytes], source: str) -> Iterator[bytes]:
    """zstd frames back to back, each decoded with bounded output.

    Two zstandard behaviours shape this: ``stream_reader`` reports truncated input as a clean
    end of stream, and ``decompressobj`` has no output limit (128 KiB of RLE blocks expand to
    4 GiB in one call: a decompression bomb). So the frame structure is walked first, from the
    block headers alone, which catches truncation and trailing garbage before any byte is
    delivered; then each frame goes through ``read_to_iter``, whose chunks are at most
    ``CHUNK`` bytes whatever the ratio, and which verifies the content checksum.
    """
    frames = _zstd_frames(fh, source)
    dctx = zstandard.ZstdDecompressor()
    for offset, length in frames:
        fh.seek(offset)
        frame = _Window(fh, length)
        yield from dctx.read_to_iter(cast(IO[bytes], frame), read_size=1 << 20,
                                     write_size=CHUNK)
        if frame.remaining:
            raise CorruptArchiveError("zstd frame ends before its last block", source=source)


class _Window:
    """``read`` over the next ``length`` bytes of ``fh`` only (one zstd frame)."""

    def __init__(self, fh: IO[bytes], length: int) -> None:
        self._fh = fh
        self.remaining = length

    def read(self, n: int = -1) -> bytes:
        n = self.remaining if n < 0 else min(n, self.remaining)
        data = self._fh.read(n) if n else b""
        self.remaining -= len(data)
        return data


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # ..0x184D2A5F: metadata frames, skipped


def _zstd_frames(fh: IO[bytes], source: str) -> list[tuple[int, int]]:
    """(offset, length) of every data frame; CorruptArchiveError unless the file is exactly
    a sequence of complete frames (RFC 8878 §3.1: header, blocks up to Last_Block, checksum)."""
    size = os.fstat(fh.fileno()).st_size
    frames: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        magic = _unpack_at(fh, offset, "<I", source)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            offset += 8 + _unpack_at(fh, offset + 4, "<I", source)
        elif magic == _ZSTD_MAGIC:
            end = _zstd_frame_end(fh, offset, source)
            frames.append((offset, end - offset))
            offset = end
        else:
            raise CorruptArchiveError(f"garbage after zstd data at byte {offset}", source=source)
    if offset != size:
        raise CorruptArchiveError("truncated zstd data", source=source)
    return frames


def _zstd_frame_end(fh: IO[bytes], offset: int, source: str) -> int:
    descriptor = _unpack_at(fh, offset + 4, "<B", source)
    single_segment = bool(descriptor & 0x20)
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    header = 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs_size
    pos = offset + 4 + header
    while True:
        block = _unpack_at(fh, pos, "<I", source, length=3)
        block_type, block_size = (block >> 1) & 3, block >> 3
        if block_type == 3:
            raise CorruptArchiveError(f"reserved zstd block type at byte {pos}", source=source)
        pos += 3 + (1 if block_type == 1 else block_size)
        if block & 1:  # Last_Block
            return pos + (4 if descriptor & 0x04 else 0)


def _unpack_at(fh: IO[bytes], offset: int, fmt: str, source: str, length: int = 0) -> int:
    size = length or struct.calcsize(fmt)
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise CorruptArchiveError("truncated zstd data", source=source)
    value: int = struct.unpack(fmt, data.ljust(struct.calcsize(fmt), b"\0"))[0]
    return value


def _gzip_chunks(fh: IO[bytes]) -> Iterator[bytes]:
    # The stdlib reader gets gzip right: members back to back, zero padding allowed,
    # BadGzipFile for trailing garbage, EOFError for truncation.
    with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
        yield from iter(lambda: gz.read(CHUNK), b"")


def _plain_chunks(fh: IO[bytes]) -> Iterator[bytes]:
    return iter(lambda: fh.read(CHUNK), b"")


# --------------------------------------------------------------------------------------
# External decompressors
# --------------------------------------------------------------------------------------


def external_command(codec: Codec, path: Path, jobs: int) -> list[str] | None:
    """The system command line that decompresses ``path`` to stdout, if the binary exists."""
    if codec is Codec.XZ and (exe := shutil.which("xz")):
        return [exe, "-dc", f"-T{jobs}", "--", str(path)]
    if codec is Codec.ZSTD and (exe := shutil.which("zstd")):
        return [exe, "-dcq", "--", str(path)]
    return None


class _External:
    """A decompressor process whose stdout we read; killed and reaped on close."""

    def __init__(self, argv: list[str], source: str) -> None:
        self._source = source
        # stderr goes to a file, not a pipe: nothing to drain, so no deadlock either way.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self._stderr)
        assert self._proc.stdout is not None
        self._out = self._proc.stdout
        with contextlib.suppress(OSError):  # a bigger pipe means fewer context switches
            fcntl.fcntl(self._out.fileno(), fcntl.F_SETPIPE_SZ, CHUNK)
        log.debug("started %s (pid %d)", argv, self._proc.pid)

    def chunks(self) -> Iterator[bytes]:
        fd = self._out.fileno()
        while chunk := os.read(fd, CHUNK):
            yield chunk
        rc = self._proc.wait()
        self._stderr.seek(0)
        message = self._stderr.read().decode(errors="replace").strip()
        if rc != 0 or message:
            first = message.splitlines()[0] if message else f"exit status {rc}"
            raise CorruptArchiveError(f"external decompressor failed: {first}",
                                      source=self._source)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()
        self._stderr.close()


# --------------------------------------------------------------------------------------
# The reader handed to callers
# --------------------------------------------------------------------------------------


class _ChunkReader(io.RawIOBase):
    """A read-only binary stream over an iterator of chunks.

    ``read(n)`` returns exactly ``n`` bytes unless the stream ends (as a buffered reader
    would), and codec errors become CorruptArchiveError.
    """

    def __init__(self, chunks: Iterator[bytes], source: str,
                 on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._chunks = chunks
        self._source = source
        self._on_close = on_close
        self._buf = b""
        self._pos = 0

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
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readall(self) -> bytes:
        parts = []
        while self._fill():
            parts.append(self._buf[self._pos:])
            self._pos = len(self._buf)
        return b"".join(parts)

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._on_close is not None:
                self._on_close()
        finally:
            self._buf = b""
            super().close()


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def _normalise_jobs(jobs: int) -> int:
    return jobs if jobs >= 1 else (os.cpu_count() or 1)


def _use_external(codec: Codec, external: bool | None) -> bool:
    if external is None:
        return _EXTERNAL_BY_DEFAULT.get(codec, False)
    return external


def _threaded_reader(tasks: Sequence[Callable[[], Iterator[bytes]]], source: str, jobs: int,
                     read_ahead: int) -> _ChunkReader:
    pipeline = _BlockPipeline(tasks, jobs, read_ahead)
    return _ChunkReader(pipeline.chunks(), source, on_close=pipeline.close)


def _xz_reader(fh: IO[bytes], source: str, jobs: int, read_ahead: int,
               threaded: bool) -> _ChunkReader:
    fd = fh.fileno()
    streams = read_xz_layout(fd, os.fstat(fd).st_size, source=source)
    blocks = [(s, b) for s in streams for b in s.blocks]
    log.debug("%s: %d xz streams, %d blocks, %s", source, len(streams), len(blocks),
              f"{jobs} decoder threads" if threaded else "decoding in the caller's thread")
    if not threaded:
        return _ChunkReader(_xz_sequential_chunks(fd, streams, source), source)
    tasks = [functools.partial(_xz_block_chunks, fd, s, b, source) for s, b in blocks]
    return _threaded_reader(tasks, source, jobs, read_ahead)


def _in_process_reader(fh: IO[bytes], codec: Codec, source: str, jobs: int,
                       read_ahead: int, background: bool | None) -> _ChunkReader:
    # With jobs > 1 decoding happens in worker threads even when it cannot be split (one
    # xz block, zstd, gzip): the caller's own work on the tar stream then overlaps with the
    # decoder (which releases the GIL) instead of alternating with it.
    threaded = background if background is not None else jobs > 1
    if codec is Codec.XZ:
        return _xz_reader(fh, source, jobs, read_ahead, threaded)
    chunks: Callable[[], Iterator[bytes]]
    if codec is Codec.GZIP:
        chunks = functools.partial(_gzip_chunks, fh)
    elif codec is Codec.BZIP2:
        chunks = functools.partial(_bz2_chunks, fh, source)
    elif codec is Codec.ZSTD:
        chunks = functools.partial(_zstd_chunks, fh, source)
    else:
        chunks = functools.partial(_plain_chunks, fh)
    if threaded:
        return _threaded_reader([chunks], source, 1, read_ahead)
    return _ChunkReader(chunks(), source)


def _external_reader(fh: IO[bytes], codec: Codec, path: Path, source: str,
                     jobs: int) -> _ChunkReader | None:
    argv = external_command(codec, path, jobs)
    if argv is None:
        return None
    if codec is Codec.XZ:
        # Same up-front structure check as in-process, so that trailing garbage and
        # truncation are reported identically (xz itself would also catch them, later).
        fd = fh.fileno()
        read_xz_layout(fd, os.fstat(fd).st_size, source=source)
    try:
        proc = _External(argv, source)
    except OSError as exc:
        log.warning("%s: cannot run %s (%s); decompressing in-process", source, argv[0], exc)
        return None
    return _ChunkReader(proc.chunks(), source, on_close=proc.close)


@contextlib.contextmanager
def open_decompressed(
    path: Path,
    *,
    jobs: int = 1,
    external: bool | None = None,
    read_ahead: int = DEFAULT_READ_AHEAD,
    background: bool | None = None,
) -> Iterator[BinaryIO]:
    """Open ``path`` as a stream of decompressed tar bytes.

    ``jobs``: decoder threads for multi-block .xz (``xz -T`` for the external path);
    ``< 1`` means one per CPU.  ``external``: True pipes through the system ``xz``/``zstd``
    (falling back to in-process when the binary is absent), False never does, None picks
    what measured fastest.  ``read_ahead``: bytes of decoded output the threaded xz decoder
    may buffer.  ``background``: decode in worker threads (a read-ahead thread for codecs
    that cannot be split) even with ``jobs=1`` (True) or never (False); None means
    "when ``jobs > 1``".
    """
    source = str(path)
    jobs = _normalise_jobs(jobs)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise SourceError(f"cannot open ({exc.strerror})", source=source) from exc
    with fh:
        try:
            codec = detect_codec(fh.read(512), source=source)
        except OSError as exc:
            raise SourceError(f"cannot read ({exc.strerror})", source=source) from exc
        fh.seek(0)
        reader = None
        if codec is not Codec.NONE and _use_external(codec, external):
            reader = _external_reader(fh, codec, path, source, jobs)
        if reader is None:
            reader = _in_process_reader(fh, codec, source, jobs, read_ahead, background)
        with reader:
            yield cast(BinaryIO, reader)
