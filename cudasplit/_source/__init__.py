"""Sources: archives and unpacked directories -> immutable member records plus content streams.

``open_source`` picks the source for a path. The sources live in :mod:`.tar`, :mod:`.zip` and
:mod:`.directory`; the name rules in :mod:`.names`, the bomb guards in :mod:`.limits`, the top
directory and identity in :mod:`.topdir`.

A source is read once, front to back. ``Source.members()`` yields ``(Member, stream)`` pairs;
the stream (regular files only, else ``None``) is valid until the next pair is requested and
replays ``Member.head`` first, so the consumer copies it from the start.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from pathlib import Path
from typing import IO

from cudasplit._argcheck import checked
from cudasplit._model import PackageId
from cudasplit._source.base import Source
from cudasplit._source.codecs import (
    CHUNK,
    MAX_DEFAULT_BUDGET,
    MIN_BUDGET,
    BlockPipeline,
    Codec,
    PipelineStats,
    decode_threads,
    default_decode_budget,
    detect_codec,
    open_decompressed,
    read_xz_layout,
    start_early,
)
from cudasplit._source.directory import DirectorySource
from cudasplit._source.limits import RATIO_GRACE, Limits, deliverable
from cudasplit._source.names import member_parent, normalise_member_path
from cudasplit._source.tar import TarSource
from cudasplit._source.tarheaders import (
    BLOCK,
    DIRECTORY,
    HARDLINK,
    REGULAR,
    SYMLINK,
    Extended,
    TarFormatError,
    TarReader,
    check_checksum,
    header_from_block,
    number,
    padded_size,
    parse_pax,
)
from cudasplit._source.topdir import PLATFORMS, package_from_filename, parse_top_dir
from cudasplit._source.zip import zip_members
from cudasplit.errors import LimitExceededError, OutputError, SourceError, SourceNotFoundError

__all__ = [
    "BLOCK",
    "CHUNK",
    "DIRECTORY",
    "HARDLINK",
    "MAX_DEFAULT_BUDGET",
    "MIN_BUDGET",
    "PLATFORMS",
    "RATIO_GRACE",
    "REGULAR",
    "SYMLINK",
    "BlockPipeline",
    "Codec",
    "Extended",
    "Limits",
    "PipelineStats",
    "Source",
    "TarFormatError",
    "TarReader",
    "TarSource",
    "check_checksum",
    "decode_threads",
    "default_decode_budget",
    "deliverable",
    "detect_codec",
    "header_from_block",
    "member_parent",
    "normalise_member_path",
    "number",
    "open_decompressed",
    "open_source",
    "package_from_filename",
    "padded_size",
    "parse_pax",
    "parse_top_dir",
    "read_xz_layout",
    "start_decoding",
    "zip_members",
]

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
STDIN = "-"


@checked(jobs=1, memory_limit=1 << 20, strip_components=0)
def open_source(path: str | os.PathLike[str], *, package: PackageId | None = None,
                jobs: int = 1, limits: Limits | None = None,
                strip_components: int | None = None,
                memory_limit: int | None = None) -> Source:
    """Open something to split: a tarball (recognised by magic bytes), an unpacked
    directory, or ``"-"``, a tarball on standard input.

    Args:
        path: the tarball, directory or ``"-"``.
        package: the package identity, when the top directory does not say it.
        jobs: decompression threads.
        limits: size limits (decompression bomb guard; default: :class:`Limits` defaults).
        strip_components: leading path components to drop (default: the top directory).
        memory_limit: bytes of decoded data the parallel decoder may hold at once
            (default: a budget from ``jobs`` and the block size).

    Returns:
        A :class:`Source` for :func:`split` and friends.

    Raises:
        SourceError: not a format cudasplit reads (a zip, a text file, an empty file: said
            here, before anything is read); SourceNotFoundError (also a
            ``FileNotFoundError``): no such file.
    """
    if os.fspath(path) == STDIN:
        source = _stdin_source(package, jobs, limits, strip_components)
        source.memory_limit = memory_limit
        return source
    p = Path(path)
    if p.is_dir():
        return DirectorySource(p, package=package, strip_components=strip_components,
                               limits=limits)
    if not p.exists():
        raise SourceNotFoundError("no such file or directory", source=str(p))
    _refuse_zip(p)
    _refuse_unknown(p)
    return TarSource(p, package=package, jobs=jobs, limits=limits,
                     strip_components=strip_components, memory_limit=memory_limit)


def _refuse_zip(path: Path) -> None:
    """A zip (a wheel, NVIDIA's Windows download) is a common mix-up: say so plainly."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return  # the codec layer reports unreadable files with their reason
    if head.startswith(ZIP_MAGIC):
        raise SourceError("zip archives are not redist tarballs (zip magic bytes; NVIDIA's Linux "
                          "redistributables "
                          "are .tar.xz; a .whl or Windows .zip needs unpacking first)",
                          source=str(path))


def _refuse_unknown(path: Path, name: str | None = None) -> None:
    """A file whose first bytes are no compression cudasplit reads and no tar header (a text
    file, a manifest given by mistake) is refused here, where it is opened, not when the
    first member is asked for."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return  # the codec layer reports unreadable files with their reason
    detect_codec(head, source=name or str(path))


def _spool_stdin(spool: IO[bytes], cap: int) -> None:
    """Copy standard input to ``spool`` (closed again on any failure), at most ``cap`` bytes."""
    copied = 0
    try:
        while chunk := sys.stdin.buffer.read(1 << 20):
            copied += len(chunk)
            if copied > cap:
                raise LimitExceededError(f"standard input is larger than {cap} bytes (raise "
                                         "max_total_bytes)", source="<stdin>")
            spool.write(chunk)
        spool.flush()
    except BaseException:
        spool.close()
        raise


def _stdin_source(package: PackageId | None, jobs: int, limits: Limits | None,
                  strip_components: int | None) -> TarSource:
    """Standard input (``curl ... | cudasplit split -``), spooled to an unlinked temporary
    file first: the decoders seek (xz's index, zstd's frame walk), a pipe cannot."""
    cap = (limits or Limits()).max_total_bytes
    try:
        spool = tempfile.TemporaryFile(prefix="cudasplit-stdin-")  # noqa: SIM115 - kept
        _spool_stdin(spool, cap)
    except OSError as exc:  # a full $TMPDIR was a traceback
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"<stdin>: cannot spool standard input to {tempfile.gettempdir()} "
                          f"({reason}; "
                          "set TMPDIR to a directory with room, or pass a file)") from exc
    source = TarSource(Path(f"/proc/self/fd/{spool.fileno()}"), package=package, jobs=jobs,
                       limits=limits, strip_components=strip_components)
    source.description = "<stdin>"
    source.keep_alive = spool  # the /proc path reopens this file while the source lives
    _refuse_zip(source.path)
    _refuse_unknown(source.path, "<stdin>")
    return source


def start_decoding(path: str | os.PathLike[str], *, jobs: int) -> bool:
    """Start the decoder of the tarball at ``path`` now, as a split with ``jobs`` and the
    default bomb limits will run it: that split takes it over (:func:`start_early`). Whether
    one was started; never raises."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return False
    return start_early(Path(path), jobs=jobs, deliverable=deliverable(Limits(), size))

