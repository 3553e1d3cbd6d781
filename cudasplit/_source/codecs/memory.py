"""What a memory limit means for the xz decoders, in-process threads and the ``xz`` child.

``--memory-limit SIZE`` bounds the decoder's memory as a whole: the decoded bytes it holds
(the budget of :class:`~cudasplit._source.codecs.threads.BlockPipeline`) *and* what each
decoder thread's liblzma holds (its LZMA2 dictionary, about 4 MiB more). Before, only the
first counted, so 16 threads of an ``xz -9`` archive added about a gigabyte on top of the
limit. :func:`threads_within` takes the threads' share out of the limit first (at most half
of it; fewer threads where they would not fit), and the rest is the budget. The ``xz``
binary gets the limit as ``--memlimit-decompress`` (its threads and buffers together; it
decodes with fewer threads where more would not fit, and refuses a file whose dictionary
alone does not), so the child is bounded the same way; without a limit it gets what its
threads need (``_xz_threads_need`` in the face: fewer threads would be slower).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cudasplit._source.codecs.xz import XzBlock

__all__ = ["LIBLZMA_OVERHEAD", "UNKNOWN_DICTIONARY", "dictionary_size", "threads_within"]

# A decoder thread's own buffers and its chunks in flight, beside its dictionary (measured:
# 16 threads held about 4 MiB each more than their dictionaries).
LIBLZMA_OVERHEAD = 4 << 20
UNKNOWN_DICTIONARY = 64 << 20    # xz -9's, the largest preset: a header we cannot read
_LZMA2 = 0x21


def dictionary_size(fd: int, blocks: Sequence[XzBlock]) -> int:
    """The largest LZMA2 dictionary the first blocks declare (their headers are read; the
    blocks of one file share their filter settings in practice)."""
    sizes = [_block_dictionary(fd, block) for block in blocks[:4]]
    return max(sizes, default=UNKNOWN_DICTIONARY)


def _block_dictionary(fd: int, block: XzBlock) -> int:
    try:
        header = os.pread(fd, 1024, block.offset)
        return _lzma2_dictionary(header) or UNKNOWN_DICTIONARY
    except (OSError, IndexError, ValueError):
        return UNKNOWN_DICTIONARY


def _lzma2_dictionary(header: bytes) -> int | None:
    """The dictionary size of a block header's LZMA2 filter (xz file format 3.1.6, 5.3.1)."""
    size = (header[0] + 1) * 4
    flags, pos = header[1], 2
    for present in (flags & 0x40, flags & 0x80):  # compressed, uncompressed size fields
        if present:
            pos = _skip_vli(header, pos)
    for _ in range((flags & 0x03) + 1):
        filter_id, pos = _vli(header, pos)
        props_size, pos = _vli(header, pos)
        props = header[pos:pos + props_size]
        pos += props_size
        if filter_id == _LZMA2 and props_size == 1 and pos <= size:
            bits = props[0] & 0x3F
            if bits > 40:
                return None
            return 0xFFFFFFFF if bits == 40 else (2 | (bits & 1)) << (bits // 2 + 11)
    return None


def _vli(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(9):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("variable-length integer too long")


def _skip_vli(data: bytes, pos: int) -> int:
    return _vli(data, pos)[1]


def threads_within(memory_limit: int, jobs: int, dictionary: int) -> tuple[int, int]:
    """``(threads, budget)`` for a decoder that must stay within ``memory_limit``: each
    thread costs its dictionary plus :data:`LIBLZMA_OVERHEAD`, together at most half the
    limit (one thread at least), and the decoded-output budget is the rest (1 MiB at least)."""
    per_thread = dictionary + LIBLZMA_OVERHEAD
    threads = max(1, min(jobs, (memory_limit // 2) // per_thread))
    return threads, max(1 << 20, memory_limit - threads * per_thread)
