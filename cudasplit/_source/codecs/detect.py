"""Naming a file's compression from its first bytes (magic numbers, not file names)."""

from __future__ import annotations

import enum

from cudasplit.errors import SourceError

__all__ = ["Codec", "detect_codec"]


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
