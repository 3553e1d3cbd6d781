"""The members of a static (``ar``) archive, as regions of the archive file, read header by header.

GNU/System V format: ``!<arch>\\n``, then per member a 60-byte header (name, dates, mode,
decimal size, ``\\x60\\n``) and its bytes padded to an even length. Special members: ``/`` and
``/SYM64/`` (symbol tables), ``//`` (the long-name table that ``/123`` names point into); BSD
names ``#1/N`` carry the name in the member's first N bytes. Thin archives (``!<thin>\\n``)
hold no member bytes and yield nothing.

Nothing but the headers is read: a 1 GB ``libcublas_static.a`` costs one ``pread`` per member.
Each step advances at least 60 bytes, so a hostile archive cannot make the walk long; a header
that does not parse ends the walk with a problem (the members before it stand).
"""

from __future__ import annotations

from collections.abc import Iterator

from cudasplit._elf.read.sections import Region

__all__ = ["AR_MAGIC", "MAX_LONG_NAMES", "iter_members"]

AR_MAGIC = b"!<arch>\n"
MAX_LONG_NAMES = 1 << 24      # a long-name table bigger than this is not read (names as /N)
_HEADER = 60
_AHEAD = 64          # bytes of each member read with its header


def iter_members(region: Region, problems: list[str]) -> Iterator[Region]:
    """Every real member of the archive in ``region`` (symbol and name tables skipped), named
    ``archive(member)``; what stops the walk early is appended to ``problems``."""
    if region.pread(8, 0) != AR_MAGIC:
        return
    pos, long_names = 8, b""
    while pos + _HEADER <= region.length:
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
            long_names = region.pread(min(size, MAX_LONG_NAMES), start)
            continue
        if raw in (b"/", b"/SYM64/", b"__.SYMDEF", b"__.SYMDEF SORTED"):
            continue
        name, skip = _name(region, raw, start, size, long_names)
        yield region.sub(start + skip, length - skip, f"{region.name}({name})",
                         ahead[_HEADER + skip:])
    if pos < region.length and region.pread(region.length - pos, pos).strip(b"\n"):
        problems.append(f"{region.length - pos} bytes after the last archive member")


def _size(head: bytes) -> int | None:
    if len(head) != _HEADER or head[58:60] != b"`\n":
        return None
    text = head[48:58].strip()
    return int(text) if text.isdigit() else None


def _name(region: Region, raw: bytes, start: int, size: int, long_names: bytes
          ) -> tuple[str, int]:
    """The member's name and how many of its bytes the name takes (BSD ``#1/N``)."""
    if raw.startswith(b"#1/") and raw[3:].isdigit():
        length = int(raw[3:])
        return _text(region.pread(min(length, 4096), start).rstrip(b"\0")), min(length, size)
    if raw.startswith(b"/") and raw[1:].isdigit():
        offset = int(raw[1:])
        end = long_names.find(b"/\n", offset)
        if offset < len(long_names) and end >= 0:
            return _text(long_names[offset:end]), 0
        return _text(raw), 0
    return _text(raw[:-1] if raw.endswith(b"/") else raw), 0


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
