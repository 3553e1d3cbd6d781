"""zstd decoding with bounded output: the frame structure walked first, then frame by frame."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import IO, cast

import zstandard

from cudasplit._source.codecs.chunks import CHUNK, all_zero
from cudasplit.errors import CorruptArchiveError

__all__ = ["zstd_chunks", "zstd_frames"]


def zstd_chunks(fh: IO[bytes], source: str) -> Iterator[bytes]:
    """zstd frames back to back, each decoded with bounded output.

    Two zstandard behaviours shape this: ``stream_reader`` reports truncated input as a clean
    end of stream, and ``decompressobj`` has no output limit (128 KiB of RLE blocks expand to
    4 GiB in one call: a decompression bomb). So the frame structure is walked first, from the
    block headers alone, which catches truncation and trailing garbage before any byte is
    delivered; then each frame goes through ``read_to_iter``, whose chunks are at most
    ``CHUNK`` bytes whatever the ratio, and which verifies the content checksum.
    """
    frames = zstd_frames(fh, source)
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


def zstd_frames(fh: IO[bytes], source: str) -> list[tuple[int, int]]:
    """(offset, length) of every data frame; CorruptArchiveError unless the file is exactly
    a sequence of complete frames (RFC 8878 §3.1: header, blocks up to Last_Block, checksum),
    optionally followed by null bytes (the rule of every codec, ``chunks.all_zero``)."""
    size = os.fstat(fh.fileno()).st_size
    frames: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        magic = _unpack_at(fh, offset, "<I", source) if size - offset >= 4 else 0
        if not magic and all_zero(fh.fileno(), offset, size):
            return frames  # null padding after the last frame
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
