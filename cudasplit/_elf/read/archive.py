"""The members of a static (``ar``) archive, as regions of the archive file, read header by header.

GNU/System V format: ``!<arch>\\n``, then per member a 60-byte header (name, dates, mode,
decimal size, ``\\x60\\n``) and its bytes padded to an even length. Special members: ``/`` and
``/SYM64/`` (symbol tables), ``//`` (the long-name table that ``/123`` names point into); BSD
names ``#1/N`` carry the name in the member's first N bytes. Thin archives (``!<thin>\\n``)
hold no member bytes and yield nothing.

Nothing but the headers is read: a 1 GB ``libcublas_static.a`` costs one ``pread`` per member.
Each step advances at least 60 bytes, so a hostile archive cannot make the walk long; a header
that does not parse ends the walk with a problem (the members before it stand). The long-name
table is read once (at most :data:`MAX_LONG_NAMES` bytes) and its name ends are found in one
pass, so a ``/N`` name costs one lookup whatever the table holds: each lookup used to search
the table from N, and 1,000 names into a 16 MiB table without an end took a minute. A name is
at most :data:`MAX_MEMBER_NAME` bytes (longer ones are cut).
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Iterator

from cudasplit._elf.read.bounds import Stop, checkpoint
from cudasplit._elf.read.sections import Region

__all__ = ["AR_MAGIC", "MAX_LONG_NAMES", "MAX_MEMBER_NAME", "iter_members"]

AR_MAGIC = b"!<arch>\n"
MAX_LONG_NAMES = 1 << 22      # a long-name table bigger than this is read this far only
MAX_MEMBER_NAME = 4096        # bytes of one member name (PATH_MAX); longer ones are cut
_HEADER = 60
_AHEAD = 64          # bytes of each member read with its header
_END = re.compile(rb"/\n")


class _LongNames:
    """The ``//`` table and where each of its names ends (one pass when it is read)."""

    def __init__(self, table: bytes = b"") -> None:
        self.table = table
        self.ends = array("I", (m.start() for m in _END.finditer(table)))

    def name(self, offset: int) -> bytes | None:
        """The name at ``offset`` (up to its ``/\\n``, at most MAX_MEMBER_NAME bytes)."""
        if offset >= len(self.table):
            return None
        at = bisect.bisect_left(self.ends, offset)
        end = self.ends[at] if at < len(self.ends) else None
        if end is None:
            return None
        return self.table[offset:min(end, offset + MAX_MEMBER_NAME)]


def iter_members(region: Region, problems: list[str], stop: Stop | None = None
                 ) -> Iterator[Region]:
    """Every real member of the archive in ``region`` (symbol and name tables skipped), named
    ``archive(member)``; what stops the walk early is appended to ``problems``. ``stop``:
    asked every few thousand members (:class:`~cudasplit._elf.read.bounds.Stopped`)."""
    if region.pread(8, 0) != AR_MAGIC:
        return
    pos, long_names, steps = 8, _LongNames(), 0
    while pos + _HEADER <= region.length:
        steps += 1
        checkpoint(stop, steps)
        # The member's header and its first bytes in one read (an ELF header is 64).
        ahead = region.pread(_HEADER + _AHEAD, pos)
        head = ahead[:_HEADER]
        size = _size(head)
        if size is None or pos + _HEADER + size > region.length:
            problems.append(f"archive member header at {pos:#x} is damaged or runs past the end")
            return
        raw = head[:16].rstrip(b" ")
        start, length = pos + _HEADER, size
        pos = start + size + (size & 1)
        if raw == b"//":
            if size > MAX_LONG_NAMES:
                problems.append(f"long-name table of {size} bytes, more than the "
                                f"{MAX_LONG_NAMES} read")
            long_names = _LongNames(region.pread(min(size, MAX_LONG_NAMES), start))
            continue
        if raw in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            continue
        name, skip = _name(region, raw, start, size, long_names)
        yield region.sub(start + skip, length - skip, f"{region.name}({name})",
                         ahead[_HEADER + skip:])
    if pos < region.length and region.pread(min(region.length - pos, 4096), pos).strip(b"\n"):
        problems.append(f"{region.length - pos} bytes after the last archive member")


def _size(head: bytes) -> int | None:
    if len(head) != _HEADER or head[58:60] != b"`\n":
        return None
    text = head[48:58].strip()      # ten ASCII digits at most: under 10 GB
    return int(text) if text.isdigit() else None


def _name(region: Region, raw: bytes, start: int, size: int, long_names: _LongNames
          ) -> tuple[str, int]:
    """The member's name and how many of its bytes the name takes (BSD ``#1/N``)."""
    if raw.startswith(b"#1/") and raw[3:].isdigit():
        length = int(raw[3:])       # at most 13 digits (the 16-byte field)
        text = region.pread(min(length, MAX_MEMBER_NAME), start).rstrip(b"\0")
        return _text(text), min(length, size)
    if raw.startswith(b"/") and raw[1:].isdigit():
        found = long_names.name(int(raw[1:]))    # at most 15 digits
        return _text(found if found is not None else raw), 0
    return _text(raw[:-1] if raw.endswith(b"/") else raw), 0


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
