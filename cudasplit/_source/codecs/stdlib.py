"""The standard library's codecs (gzip, bzip2), as iterators of chunks."""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Iterator
from typing import IO

from cudasplit._source.codecs.chunks import CHUNK, chain_pieces, drive
from cudasplit.errors import CorruptArchiveError

__all__ = ["bz2_chunks", "gzip_chunks"]


def bz2_chunks(fh: IO[bytes], source: str) -> Iterator[bytes]:
    """bzip2 streams back to back; null bytes may follow the last one, anything else after
    a stream is an error (the rule of every codec, ``chunks.all_zero``).

    (``bz2.open`` silently ignores trailing garbage, hence this loop.)
    """
    pending = b""
    while True:
        head = pending + fh.read(max(0, 3 - len(pending)))
        if not head:
            return
        if not head.startswith(b"BZh"):
            if not head.count(0) == len(head) or not _rest_is_zero(fh):
                raise CorruptArchiveError("trailing garbage after the bzip2 data",
                                          source=source)
            return
        dec = bz2.BZ2Decompressor()
        pieces = chain_pieces(head, iter(lambda: fh.read(CHUNK), b""), b"")
        yield from drive(dec, pieces)
        if not dec.eof:
            raise CorruptArchiveError("truncated bzip2 data", source=source)
        pending = dec.unused_data


def _rest_is_zero(fh: IO[bytes]) -> bool:
    return all(piece.count(0) == len(piece) for piece in iter(lambda: fh.read(CHUNK), b""))


def gzip_chunks(fh: IO[bytes]) -> Iterator[bytes]:
    # The stdlib reader gets gzip right: members back to back, zero padding allowed,
    # BadGzipFile for trailing garbage, EOFError for truncation.
    with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
        yield from iter(lambda: gz.read(CHUNK), b"")
