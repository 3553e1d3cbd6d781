"""The .xz container: its layout read from the end, its blocks decoded alone or in order.

Format: https://tukaani.org/xz/xz-file-format.txt.

The footer and index are parsed before a byte is delivered (so truncation and trailing
garbage are found first). A lone block is decoded by wrapping it in a minimal single-block
stream, so liblzma itself verifies the block header CRC, the block check and the block sizes
against the index; the index CRC32 and the stream header/footer are verified here.
"""

from __future__ import annotations

import lzma
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cudasplit._source.codecs.chunks import chain_pieces, drive, file_pieces, zero_tail
from cudasplit.errors import CorruptArchiveError

__all__ = ["XzBlock", "XzStream", "read_xz_layout", "xz_block_chunks", "xz_sequential_chunks"]

# An xz index larger than this is not plausible for a tarball (2 GB in 64 KiB blocks is
# ~200 KB of index); refusing it keeps a forged footer from making us allocate gigabytes.
_MAX_XZ_INDEX = 64 << 20

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

    Truncation and trailing garbage both show up here, as a missing footer. Null bytes after
    the last stream are accepted in any number (the rule for every codec, see
    ``chunks.all_zero``; the xz format itself allows multiples of four); between
    streams the format's stream padding (multiples of four) applies.
    """
    streams: list[XzStream] = []
    pos = size - zero_tail(fd, size)
    if pos % 4:
        raise _corrupt(source, "size is not a multiple of four (truncated, or trailing garbage)")
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


def _decode_exact(pieces: Iterator[bytes], what: str, source: str) -> Iterator[bytes]:
    """Decode pieces that must form exactly one complete .xz stream."""
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        yield from drive(dec, pieces)
    except lzma.LZMAError as exc:
        raise _corrupt(source, f"{what}: {exc}") from exc
    if not dec.eof or dec.unused_data or next(pieces, b""):
        raise _corrupt(source, f"{what}: data does not end where the index says")


def xz_block_chunks(fd: int, stream: XzStream, block: XzBlock, source: str) -> Iterator[bytes]:
    """One block alone, wrapped as a single-block stream (what each decoder thread runs)."""
    pieces = chain_pieces(
        stream.header,
        file_pieces(fd, block.offset, block.offset + block.padded_size),
        _single_block_suffix(stream, block),
    )
    yield from _decode_exact(pieces, f"block at offset {block.offset}", source)


def xz_sequential_chunks(fd: int, streams: Sequence[XzStream], source: str) -> Iterator[bytes]:
    """Single-threaded: each whole stream through one liblzma decoder, as ``xz -dc`` does."""
    for stream in streams:
        pieces = file_pieces(fd, stream.start, stream.end)
        yield from _decode_exact(pieces, f"stream at offset {stream.start}", source)
