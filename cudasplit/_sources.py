"""Sources: archives and unpacked directories -> immutable member records plus content streams.

``open_source`` picks the source for a path. The sources live in ``_tarsource`` and
``_dirsource``; the name rules in ``_membernames``, the bomb guards in ``_limits``, the top
directory and identity in ``_source_topdir``.

A source is read once, front to back. ``Source.members()`` yields ``(Member, stream)`` pairs;
the stream (regular files only, else ``None``) is valid until the next pair is requested and
replays ``Member.head`` first, so the consumer copies it from the start.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ._dirsource import DirectorySource
from ._limits import DEFAULT_MAX_MEMBERS, DEFAULT_MAX_RATIO, DEFAULT_MAX_TOTAL_BYTES, Limits
from ._membernames import member_parent, normalise_member_path
from ._model import PackageId
from ._source_base import HEAD_SIZE, Source
from ._source_topdir import PLATFORMS, package_from_filename, parse_top_dir
from ._tarsource import TarSource
from .errors import LimitExceededError, SourceError

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_TOTAL_BYTES",
    "HEAD_SIZE",
    "PLATFORMS",
    "DirectorySource",
    "Limits",
    "Source",
    "TarSource",
    "member_parent",
    "normalise_member_path",
    "open_source",
    "package_from_filename",
    "parse_top_dir",
]

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
STDIN = "-"


def open_source(path: str | os.PathLike[str], *, package: PackageId | None = None,
                jobs: int = 1, limits: Limits | None = None,
                strip_components: int | None = None,
                memory_limit: int | None = None) -> Source:
    """A tarball (recognised by magic bytes in the codec layer), an unpacked directory, or
    ``-``: a tarball on standard input. ``memory_limit``: the decoder's budget
    (:func:`cudasplit._codecs.open_decompressed`)."""
    if os.fspath(path) == STDIN:
        source = _stdin_source(package, jobs, limits, strip_components)
        source.memory_limit = memory_limit
        return source
    p = Path(path)
    if p.is_dir():
        return DirectorySource(p, package=package, strip_components=strip_components,
                               limits=limits)
    if not p.exists():
        raise SourceError("no such file or directory", source=str(p))
    _refuse_zip(p)
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


def _stdin_source(package: PackageId | None, jobs: int, limits: Limits | None,
                  strip_components: int | None) -> TarSource:
    """Standard input (``curl ... | cudasplit split -``), spooled to an unlinked temporary
    file first: the decoders seek (xz's index, zstd's frame walk), a pipe cannot."""
    spool = tempfile.TemporaryFile(prefix="cudasplit-stdin-")  # noqa: SIM115 - kept by source
    cap = (limits or Limits()).max_total_bytes
    copied = 0
    while chunk := sys.stdin.buffer.read(1 << 20):
        copied += len(chunk)
        if copied > cap:
            spool.close()
            raise LimitExceededError(f"standard input is larger than {cap} bytes (raise it "
                                     "with --max-size)", source="<stdin>")
        spool.write(chunk)
    spool.flush()
    source = TarSource(Path(f"/proc/self/fd/{spool.fileno()}"), package=package, jobs=jobs,
                       limits=limits, strip_components=strip_components)
    source.description = "<stdin>"
    source.keep_alive = spool  # the /proc path reopens this file while the source lives
    _refuse_zip(source.path)
    return source
