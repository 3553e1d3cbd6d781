"""Opening a (compressed) tarball as one stream of tar bytes: the decoder for its codec.

``open_decompressed`` yields one readable binary stream of tar bytes, whatever the codec:

* ``.xz``: the stream footer and index are parsed up front (this also finds truncation and
  trailing garbage before a single byte is delivered).  With ``jobs > 1`` the blocks listed
  in the index are decoded concurrently by ``jobs`` threads (liblzma releases the GIL) and
  delivered in order within a memory budget (see "Memory" below).  Each block is decoded by
  wrapping it in a minimal single-block .xz stream, so liblzma itself verifies the block
  header CRC, the block check (CRC32/CRC64/SHA-256) and the block sizes against the index;
  the real index CRC32 and the stream header/footer are verified here.
* ``.zst``: ``zstandard`` decompression objects, frame by frame (the streaming reader of
  ``zstandard`` silently accepts truncated input, so it is not used).
* ``.gz``: the stdlib ``gzip`` reader; ``.bz2``: ``bz2`` decompressors, stream by stream.
* Which decoder runs, the system binary (``xz -dc -TN``, ``zstd -dc``, its output a pipe that
  :class:`.fdreader.FdReader` reads and ``splice`` empties into files) or the library on
  threads of this process, is decided in one place, :mod:`.choice`, by measurement. A plain
  tar is read from the file itself (members move with ``copy_file_range``).

Memory (the parallel xz decoder, ``threads.BlockPipeline``): every block that a
thread starts reserves its whole decoded size from the budget, so each thread decodes its
block start to end without waiting for the reader, and the reader drains the blocks in order.
The budget is ``memory_limit`` when given, else :func:`default_decode_budget`:
``(jobs + 1) x the largest block``, at least 64 MiB and at most 4 GiB or a quarter of the
RAM, and (``deliverable``) at most what the caller's bomb guards let the file expand to.
``jobs + 1`` blocks keep every thread busy while the reader is on the oldest one; a
smaller budget admits fewer blocks at once (slower, never wrong); a block larger than the
budget streams through a 64 MiB window.  Without a limit, peak RSS is about::

    interpreter and cudasplit (~60 MB) + budget + busy threads x (xz dictionary + 2 MiB)

e.g. ``xz -6`` (8 MiB dictionary, 24 MiB blocks) with 16 threads: 60 + 408 + 160 MB. A
``memory_limit`` holds the threads' dictionaries too (``memory``), and the ``xz`` child gets
it (or the default budget) as ``--memlimit-decompress``: the run's peak RSS, child included,
stays within the limit plus about 150 MB (benchmarks/bench_memory.py).

Every failure of the data becomes :class:`~cudasplit.errors.CorruptArchiveError` (or
:class:`~cudasplit.errors.SourceError` for an unreadable file) with a one-line message that
names the source; threads are stopped and subprocesses killed and reaped on close.

This module picks the decoder; each lives in its own module: detection (:mod:`.detect`),
the chunk plumbing and the reader (:mod:`.chunks`), the .xz container (:mod:`.xz`), the
decoder threads (:mod:`.threads`), zstd (:mod:`.zstd`), gzip/bzip2/plain (:mod:`.stdlib`)
and the system tools (:mod:`.external`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO, cast

from cudasplit._run import resolve_jobs
from cudasplit._source.codecs.choice import Decoder, choose_decoder
from cudasplit._source.codecs.chunks import CHUNK, ChunkReader
from cudasplit._source.codecs.detect import Codec, detect_codec
from cudasplit._source.codecs.external import (
    ExternalDecompressor,
    external_command,
    xz_decodes_in_parallel,
)
from cudasplit._source.codecs.fdreader import FdReader
from cudasplit._source.codecs.memory import LIBLZMA_OVERHEAD, dictionary_size, threads_within
from cudasplit._source.codecs.stdlib import bz2_chunks, gzip_chunks
from cudasplit._source.codecs.threads import BlockPipeline, PipelineStats
from cudasplit._source.codecs.xz import (
    XzStream,
    read_xz_layout,
    xz_block_chunks,
    xz_sequential_chunks,
)
from cudasplit._source.codecs.zstd import zstd_chunks, zstd_frames
from cudasplit.errors import SourceError

__all__ = [
    "CHUNK",
    "LIBLZMA_OVERHEAD",
    "MAX_DEFAULT_BUDGET",
    "MIN_BUDGET",
    "BlockPipeline",
    "ChunkReader",
    "Codec",
    "Decoder",
    "FdReader",
    "PipelineStats",
    "choose_decoder",
    "decode_threads",
    "default_decode_budget",
    "detect_codec",
    "dictionary_size",
    "open_decompressed",
    "read_xz_layout",
    "start_early",
    "threads_within",
    "xz_decodes_in_parallel",
]

log = logging.getLogger(__name__)

# The window a block streams through when it is larger than the budget or of unknown size
# (zstd, gzip, bzip2: one task decoded ahead of the reader in a thread).
DEFAULT_READ_AHEAD = 64 << 20
# Bounds of the default decode budget (a given memory_limit is used as is, >= 1 MiB).
MIN_BUDGET = 64 << 20
MAX_DEFAULT_BUDGET = 4 << 30

def _normalise_jobs(jobs: int) -> int:
    """``jobs < 1``: every CPU the process may use (the run core's one rule)."""
    return jobs if jobs >= 1 else resolve_jobs(None)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 16 << 30


def default_decode_budget(jobs: int, largest_block: int) -> int:
    """Decoded bytes the parallel decoder may hold by default: ``jobs + 1`` whole blocks
    (every thread busy while the reader drains the oldest), within [64 MiB, min(4 GiB,
    RAM / 4)] (a quarter of the RAM is also ``xz -T``'s default limit)."""
    ceiling = max(MIN_BUDGET, min(MAX_DEFAULT_BUDGET, _physical_memory() // 4))
    return max(MIN_BUDGET, min(ceiling, (jobs + 1) * largest_block))


def decode_threads(path: Path) -> int:
    """How many threads can decode ``path`` at once: its xz blocks, else one.

    A scheduling hint (a batch gives each tarball the cores it can use), so it never raises:
    a file that cannot be read or parsed says 1, and its split reports the error.
    """
    try:
        with open(path, "rb") as fh:
            if detect_codec(fh.read(512)) is not Codec.XZ:
                return 1
            fd = fh.fileno()
            streams = read_xz_layout(fd, os.fstat(fd).st_size)
    except (OSError, SourceError):  # CorruptArchiveError is a SourceError
        return 1
    return max(1, sum(len(s.blocks) for s in streams))


def _threaded_reader(tasks: Sequence[Callable[[], Iterator[bytes]]], source: str, jobs: int,
                     budget: int, sizes: Sequence[int | None] | None = None) -> ChunkReader:
    pipeline = BlockPipeline(tasks, jobs, budget, sizes,
                             stream_window=min(budget, DEFAULT_READ_AHEAD))
    reader = ChunkReader(pipeline.chunks(), source, on_close=pipeline.close)
    reader.stats = pipeline.stats
    return reader


def _xz_reader(fh: IO[bytes], source: str, jobs: int, memory_limit: int | None,
               threaded: bool, deliverable: int | None = None) -> ChunkReader:
    fd = fh.fileno()
    streams = read_xz_layout(fd, os.fstat(fd).st_size, source=source)
    blocks = [(s, b) for s in streams for b in s.blocks]
    log.debug("%s: %d xz streams, %d blocks, %s", source, len(streams), len(blocks),
              f"{jobs} decoder threads" if threaded else "decoding in the caller's thread")
    if not threaded:
        return ChunkReader(xz_sequential_chunks(fd, streams, source), source)
    tasks = [functools.partial(xz_block_chunks, fd, s, b, source) for s, b in blocks]
    sizes = [b.uncompressed_size for _, b in blocks]
    if memory_limit is None:
        budget = _capped(default_decode_budget(jobs, max(sizes, default=0)), deliverable)
    else:  # the limit holds the threads' dictionaries too (:mod:`.memory`)
        jobs, budget = threads_within(memory_limit, jobs,
                                      dictionary_size(fd, [b for _, b in blocks]))
    return _threaded_reader(tasks, source, jobs, budget, sizes)


def _xz_threads_need(fd: int, streams: Sequence[XzStream], jobs: int) -> int:
    """What ``xz -T<jobs>`` holds to decode every block on its own thread: per thread, the
    largest block's output and input buffers, its dictionary and liblzma's own buffers (xz
    decodes with fewer threads under a lower limit: the default budget, ``jobs + 1`` blocks,
    made it decode a 62-block libcublas at `-T8` 2.7 times slower than tar's `xz -T8`),
    within a quarter of the RAM (xz's own default for threads)."""
    blocks = [b for s in streams for b in s.blocks]
    largest = max((b.uncompressed_size + b.padded_size for b in blocks), default=0)
    per_thread = largest + dictionary_size(fd, blocks) + LIBLZMA_OVERHEAD
    ceiling = max(MIN_BUDGET, min(MAX_DEFAULT_BUDGET, _physical_memory() // 4))
    return max(MIN_BUDGET, min(ceiling, max(1, jobs) * per_thread))


def _capped(budget: int, deliverable: int | None) -> int:
    """A default budget no larger than what the bomb guards let the source deliver (a
    285 KB archive of 256 MiB blocks must not be decoded gigabytes ahead of the guard that
    will refuse it), and never below :data:`MIN_BUDGET`."""
    return budget if deliverable is None else max(MIN_BUDGET, min(budget, deliverable))


def _in_process_reader(fh: IO[bytes], codec: Codec, source: str, jobs: int,
                       memory_limit: int | None, background: bool | None,
                       deliverable: int | None = None) -> ChunkReader:
    # Decoding happens in worker threads even with jobs=1 or when it cannot be split (one xz
    # block, zstd, gzip): the caller's own work on the tar stream then overlaps with the
    # decoder (which releases the GIL) instead of alternating with it, as `tar -I xz` runs
    # xz beside tar. ``jobs`` counts decoder threads; the reader is the caller's. Measured
    # on 16 cores: single-block xz 2.80 s overlapped against 3.30 s alternating
    # (`tar -xJf` 2.76 s), zstd 1.87 s against 2.18 s (`tar --zstd -xf` 1.61 s).
    threaded = background if background is not None else True
    if codec is Codec.XZ:
        return _xz_reader(fh, source, jobs, memory_limit, threaded, deliverable)
    chunks: Callable[[], Iterator[bytes]]
    if codec is Codec.GZIP:
        chunks = functools.partial(gzip_chunks, fh)
    elif codec is Codec.BZIP2:
        chunks = functools.partial(bz2_chunks, fh, source)
    else:
        chunks = functools.partial(zstd_chunks, fh, source)
    if threaded:
        window = DEFAULT_READ_AHEAD if memory_limit is None else memory_limit
        return _threaded_reader([chunks], source, 1, window)
    return ChunkReader(chunks(), source)


def _external_reader(fh: IO[bytes], codec: Codec, path: Path, source: str, jobs: int,
                     streams: Sequence[XzStream], memory_limit: int | None = None,
                     deliverable: int | None = None) -> FdReader | None:
    """The binary's pipe, or None where it cannot take this file (then: in-process).

    The structure was checked up front as in-process (so that trailing garbage and
    truncation are reported identically; the binaries would also catch them, later). Null
    bytes after the data are accepted for every codec; the binaries refuse some (zstd any,
    xz those not a multiple of four): such files are decoded in-process."""
    fd = fh.fileno()
    size = os.fstat(fd).st_size
    argv = _binary_argv(fd, codec, streams, jobs, memory_limit, deliverable)
    if argv is None:
        return None
    early = _adopt_early(fd, tuple(argv))
    # A command line's signature is only ever a child's (a library's is another tuple).
    proc = cast("ExternalDecompressor | None", early)
    if proc is None:
        try:
            proc = ExternalDecompressor(argv, str(path), source)
        except OSError as exc:
            log.warning("%s: cannot run %s (%s); decompressing in-process", source, argv[0],
                        exc)
            return None
    if codec is Codec.ZSTD:
        # The frame walk reads every block header of the file (0.1 s for 400 MB on the
        # 2-core VM): the child decodes meanwhile instead of waiting for it.
        try:
            frames = zstd_frames(fh, source)
        except BaseException:
            proc.close()
            raise
        if not frames or sum(frames[-1]) != size:
            proc.close()
            return None
    return FdReader(proc.fd, source, is_pipe=True, on_end=proc.check, on_close=proc.close)


# Decoders started before their split asked for them (:func:`start_early`): by the file's
# identity, with what they run (the binary's command line, or the library's settings) and the
# object to hand over (an ExternalDecompressor, or a ChunkReader whose threads decode). A split
# takes one over when it would run the same; anything not taken over is closed at exit.
_Early = tuple[tuple[object, ...], "ExternalDecompressor | ChunkReader"]
_EARLY: dict[tuple[int, int, int, int], _Early] = {}


def _identity(fd: int) -> tuple[int, int, int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _library_signature(codec: Codec, jobs: int, memory_limit: int | None,
                       deliverable: int | None) -> tuple[object, ...]:
    return ("library", codec.value, jobs, memory_limit, deliverable)


def start_early(path: Path, *, jobs: int, memory_limit: int | None = None,
                deliverable: int | None = None) -> bool:
    """Start ``path``'s decoder now, before the split that will read it is loaded (the
    program's entry point, while click and the pipeline import: benchmarks/README.md §19):
    the binary's child, or the library's decoder threads, as :func:`open_decompressed` will
    choose them; it takes the decoder over when it runs the same. Whether one was started.
    Never raises: a file that cannot be read or decoded is left to the split, which reports
    it."""
    source = str(path)
    try:
        fh = open(path, "rb")  # noqa: SIM115 - kept open by a library reader, else closed
    except OSError:
        return False
    keep = False
    try:
        codec = detect_codec(fh.read(512))
        fh.seek(0)
        fd = fh.fileno()
        key = _identity(fd)
        if key in _EARLY:
            return True
        streams: Sequence[XzStream] = ()
        if codec is Codec.XZ:
            streams = read_xz_layout(fd, os.fstat(fd).st_size)
        decoder = choose_decoder(
            codec, jobs=jobs, blocks=sum(len(s.blocks) for s in streams),
            memory_limit=memory_limit,
            one_thread_needs=_one_thread_needs(fd, streams) if streams else 0)
        if decoder is Decoder.BINARY:
            argv = _binary_argv(fd, codec, streams, jobs, memory_limit, deliverable)
            if argv is None:
                return False
            _EARLY[key] = (tuple(argv), ExternalDecompressor(argv, source, source))
        elif decoder is Decoder.IN_PROCESS:
            reader = _in_process_reader(fh, codec, source, jobs, memory_limit, None,
                                        deliverable)
            reader.add_on_close(fh.close)
            keep = True
            _EARLY[key] = (_library_signature(codec, jobs, memory_limit, deliverable), reader)
        else:
            return False
    except (OSError, SourceError, ValueError):
        return False
    finally:
        if not keep:
            fh.close()
    if len(_EARLY) == 1:
        atexit.register(_close_early)
    return True


def _adopt_early(fd: int, signature: tuple[object, ...]
                 ) -> ExternalDecompressor | ChunkReader | None:
    """The decoder :func:`start_early` started for this file, when it runs as ``signature``
    says (else it is closed)."""
    if not _EARLY:
        return None
    early = _EARLY.pop(_identity(fd), None)
    if early is None:
        return None
    if early[0] != signature:
        early[1].close()
        return None
    return early[1]


def _close_early() -> None:
    while _EARLY:
        _, (_, decoder) = _EARLY.popitem()
        decoder.close()


def _binary_argv(fd: int, codec: Codec, streams: Sequence[XzStream], jobs: int,
                 memory_limit: int | None, deliverable: int | None) -> list[str] | None:
    """The binary's command line for this file, or None where it cannot take it."""
    memlimit = None
    if codec is Codec.XZ:
        if (os.fstat(fd).st_size - streams[-1].end) % 4:
            return None
        # xz's memory is bounded: the limit, else what its threads need, within a quarter of
        # the RAM and what the bomb guards let the archive deliver (a 1.2 MB archive of
        # 256 MiB blocks drove `xz -T8` to 1.9 GB without a limit), never below what one
        # thread needs (xz would refuse a file the in-process decoder would not).
        memlimit = memory_limit or max(_one_thread_needs(fd, streams), _capped(
            _xz_threads_need(fd, streams, jobs), deliverable))
    return external_command(codec, jobs, memlimit)


def _one_thread_needs(fd: int, streams: Sequence[XzStream]) -> int:
    """What ``xz`` needs to decode on one thread: the dictionary and liblzma's buffers."""
    return dictionary_size(fd, [b for s in streams for b in s.blocks]) + LIBLZMA_OVERHEAD


@contextlib.contextmanager
def open_decompressed(
    path: Path,
    *,
    jobs: int = 1,
    external: bool | None = None,
    memory_limit: int | None = None,
    background: bool | None = None,
    deliverable: int | None = None,
) -> Iterator[BinaryIO]:
    """Open ``path`` as a stream of decompressed tar bytes.

    ``jobs``: decoder threads for multi-block .xz (``xz -T`` for the external path);
    ``< 1`` means every CPU the process may use (:func:`cudasplit._run.resolve_jobs`).
    ``external``: True pipes through the system ``xz``/``zstd``
    (falling back to in-process when the binary is absent), False never does, None picks
    what measured fastest (:func:`.choice.choose_decoder`, one table).
    ``memory_limit``: bytes of decoded output the threaded decoder may hold at once (the
    budget of the module docstring; None: ``default_decode_budget``). ``background``: decode
    in worker threads (a read-ahead thread for codecs that cannot be split), overlapped with
    the caller (True or None, the default) or in the caller's thread (False).
    ``deliverable``: the most decoded
    bytes the caller's bomb guards let through; the default budget (and the ``xz`` child's
    memory limit) is not larger.
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
        reader: BinaryIO | None = None
        fd = fh.fileno()
        streams: Sequence[XzStream] = ()
        if codec is Codec.XZ:  # the structure first, whichever decoder runs
            streams = read_xz_layout(fd, os.fstat(fd).st_size, source=source)
        decoder = choose_decoder(
            codec, jobs=jobs, blocks=sum(len(s.blocks) for s in streams), external=external,
            background=background, memory_limit=memory_limit,
            one_thread_needs=_one_thread_needs(fd, streams) if streams else 0)
        if decoder is Decoder.FILE:
            os.lseek(fd, 0, os.SEEK_SET)  # the buffered read above moved it past its 512 bytes
            reader = cast(BinaryIO, FdReader(fd, source, is_pipe=False))
        elif decoder is Decoder.BINARY:
            reader = cast(BinaryIO | None, _external_reader(
                fh, codec, path, source, jobs, streams, memory_limit, deliverable))
        if reader is None:
            early = _adopt_early(fd, _library_signature(codec, jobs, memory_limit,
                                                        deliverable)) \
                if background is not False else None
            if isinstance(early, ChunkReader):
                reader = cast(BinaryIO, early)
            else:
                fh.seek(0)
                reader = cast(BinaryIO, _in_process_reader(
                    fh, codec, source, jobs, memory_limit, background, deliverable))
        log.debug("%s: %s, decoded by %s", source, codec.value,
                  "the file itself" if isinstance(reader, FdReader) and decoder is Decoder.FILE
                  else "the binary" if isinstance(reader, FdReader) else "this process")
        with reader:
            yield reader
