"""Compression detection by magic bytes and decompressing streams.

Simple first version: in-process codecs only. Foreign codec errors become
:class:`~cudasplit.errors.CorruptArchiveError` naming the source.
"""

from __future__ import annotations

import bz2
import contextlib
import enum
import gzip
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO, cast

import zstandard

from .errors import CorruptArchiveError, SourceError


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


def detect_codec(head: bytes, *, source: str = "") -> Codec:
    """Name the compression of a file from its first bytes (at least 512 for plain tar)."""
    for magic, codec in _MAGIC:
        if head.startswith(magic):
            return codec
    if len(head) >= 262 and head[257:262] == b"ustar":
        return Codec.NONE
    if not head:
        raise SourceError("empty file, not an archive", source=source)
    raise SourceError("not a tar archive (unknown magic bytes)", source=source)


class _TranslatingReader(IO[bytes]):
    """Wraps a decompressing stream so that codec errors become CorruptArchiveError."""

    def __init__(self, raw: IO[bytes], source: str) -> None:
        self._raw = raw
        self._source = source

    def read(self, n: int = -1) -> bytes:
        try:
            return self._raw.read(n)
        except CODEC_ERRORS as exc:
            raise CorruptArchiveError(f"corrupt compressed data ({exc})", source=self._source) from exc

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()


@contextlib.contextmanager
def open_decompressed(path: Path, *, jobs: int = 1) -> Iterator[BinaryIO]:
    """Open ``path`` as a stream of decompressed tar bytes."""
    source = str(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise SourceError(f"cannot open ({exc.strerror})", source=source) from exc
    with fh:
        codec = detect_codec(fh.read(512), source=source)
        fh.seek(0)
        raw: IO[bytes]
        if codec is Codec.XZ:
            raw = lzma.open(fh, "rb")
        elif codec is Codec.GZIP:
            raw = gzip.open(fh, "rb")
        elif codec is Codec.BZIP2:
            raw = bz2.open(fh, "rb")
        elif codec is Codec.ZSTD:
            raw = zstandard.ZstdDecompressor().stream_reader(fh, read_size=1 << 20)
        else:
            raw = fh
        yield cast(BinaryIO, _TranslatingReader(raw, source))
