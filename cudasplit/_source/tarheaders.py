"""A small forward-only tar header reader (ustar, GNU and pax), built for hostile input.

``tarfile`` reads pax extended headers and GNU long-name/long-link headers whole into memory
whatever their declared size, follows chains of them by recursion, keeps every ``TarInfo`` of
the archive in a list, and on CPython 3.11.7 parses pax records with a regex that is quadratic
in runs of digits (CVE-2024-6232). This reader does none of that:

* extended headers are capped (``MAX_PAX_BYTES`` per member, ``MAX_LONGNAME_BYTES`` per name,
  ``MAX_GLOBAL_BYTES`` per archive, ``MAX_EXTENDED_CHAIN`` in a row) and their size is handed
  to ``charge`` *before* they are read, so they count against the bomb limits;
* pax records are parsed by a linear scan that insists the length fields tile the header;
* numbers are checked (octal or base-256; negative or garbage sizes are corrupt data);
* nothing is kept per member once the next header is read.

Member data is not buffered: :meth:`TarReader.data` hands out a stream reading straight from
the decoder. GNU sparse members are recognised (and their expanded size reported) but not
expanded: no redistributable uses them and the caller refuses them. The fields of one header
block are parsed in ``_tarfields``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from cudasplit._source.tarfields import (
    BLOCK,
    DIRECTORY,
    EXTENDED_TYPES,
    HARDLINK,
    LONGLINK,
    LONGNAME,
    NO_DATA,
    PAX_GLOBAL,
    REGULAR,
    SPECIAL,
    SYMLINK,
    Extended,
    TarFormatError,
    TarHeader,
    check_checksum,
    header_from_block,
    number,
    padded_size,
    parse_pax,
)

__all__ = [
    "BLOCK",
    "DIRECTORY",
    "HARDLINK",
    "MAX_EXTENDED_CHAIN",
    "MAX_GLOBAL_BYTES",
    "MAX_LONGNAME_BYTES",
    "MAX_PAX_BYTES",
    "REGULAR",
    "SPECIAL",
    "SYMLINK",
    "MemberData",
    "TarFormatError",
    "TarHeader",
    "TarReader",
    "parse_pax",
]

SKIP_CHUNK = 1 << 20

# Caps on what is held in memory per header. GNU tar writes pax headers of a few hundred
# bytes and long names of at most PATH_MAX (4 KiB); a thousand times that is still harmless.
MAX_PAX_BYTES = 1 << 20        # all pax ('x') headers before one member, together
MAX_GLOBAL_BYTES = 1 << 20     # all global pax ('g') headers of the archive, together
MAX_LONGNAME_BYTES = 64 << 10  # one GNU long name ('L') or long link ('K')
MAX_EXTENDED_CHAIN = 16        # extended headers in a row before a member header


class TarReader:
    """Headers of a decoded tar stream, one by one; ``charge(n)`` is told of every extended
    header's size before it is read (the caller's bomb guard may raise from it)."""

    def __init__(self, stream: BinaryIO, charge: Callable[[int], None]) -> None:
        self._stream = stream
        self._charge = charge
        self._unread = 0          # data + padding of the current member not read yet
        self._global_bytes = 0
        self._ended = False

    def next(self) -> TarHeader | None:
        """The next member's header, or None at the end-of-archive marker."""
        if self._ended:
            return None
        self._skip(self._unread)
        self._unread = 0
        extended = Extended({})
        while True:
            block = self._read_block()
            if block is None:
                self._ended = True
                return None
            typeflag = block[156:157]
            size = number(block[124:136], "size")
            if typeflag in EXTENDED_TYPES:
                self._extended(extended, typeflag, size)
                continue
            return self._member(block, typeflag, size, extended)

    def data(self, size: int) -> MemberData:
        """A stream of the current member's ``size`` data bytes (valid until ``next``)."""
        return MemberData(self, size)

    def read_member_data(self, n: int) -> bytes:
        """``n`` bytes of the current member's data (the caller keeps within its size)."""
        data = self._read_exact(n)
        if len(data) < n:
            raise TarFormatError("unexpected end of data")
        self._unread -= n
        return data

    # -- blocks ------------------------------------------------------------------------------

    def _read_block(self) -> bytes | None:
        block = self._read_exact(BLOCK)
        if not block:
            raise TarFormatError("no end-of-archive marker (truncated)")
        if len(block) < BLOCK:
            raise TarFormatError("truncated header")
        if block.count(0) == BLOCK:
            return None
        check_checksum(block)
        return block

    def _read_exact(self, n: int) -> bytes:
        data = self._stream.read(n)
        if len(data) == n or not data:
            return data
        parts = [data]
        got = len(data)
        while got < n:
            more = self._stream.read(n - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def _skip(self, n: int) -> None:
        while n > 0:
            chunk = self._stream.read(min(n, SKIP_CHUNK))
            if not chunk:
                raise TarFormatError("unexpected end of data")
            n -= len(chunk)

    def _read_data(self, size: int) -> bytes:
        """An extended header's data (already capped and charged), padding consumed."""
        padded = padded_size(size)
        data = self._read_exact(padded)
        if len(data) < padded:
            raise TarFormatError("unexpected end of data in an extended header")
        return data[:size]

    # -- extended headers --------------------------------------------------------------------

    def _extended(self, ext: Extended, typeflag: bytes, size: int) -> None:
        ext.count += 1
        if ext.count > MAX_EXTENDED_CHAIN:
            raise TarFormatError(f"more than {MAX_EXTENDED_CHAIN} extended headers in a row")
        _cap(typeflag, size, ext, self._global_bytes)
        self._charge(size)
        data = self._read_data(size)
        if typeflag in (LONGNAME, LONGLINK):
            name = data.split(b"\0", 1)[0]
            if typeflag == LONGNAME:
                ext.longname = name
            else:
                ext.longlink = name
        elif typeflag == PAX_GLOBAL:
            self._global_bytes += size
            parse_pax(data)  # validated, then ignored: no member of a redistributable needs one
        else:
            ext.pax_bytes += size
            ext.pax.update(parse_pax(data))

    # -- the member header -------------------------------------------------------------------

    def _member(self, block: bytes, typeflag: bytes, size: int, ext: Extended) -> TarHeader:
        header = header_from_block(block, typeflag, size, ext)
        self._unread = 0 if header.type in NO_DATA else padded_size(header.size)
        return header


class MemberData:
    """Exactly ``size`` bytes of the current member, read from the decoded stream."""

    def __init__(self, reader: TarReader, size: int) -> None:
        self._reader = reader
        self._left = size

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        if n <= 0:
            return b""
        data = self._reader.read_member_data(n)
        self._left -= n
        return data


def _cap(typeflag: bytes, size: int, ext: Extended, global_bytes: int) -> None:
    if typeflag in (LONGNAME, LONGLINK):
        limit, used, what = MAX_LONGNAME_BYTES, 0, "GNU long name header"
    elif typeflag == PAX_GLOBAL:
        limit, used, what = MAX_GLOBAL_BYTES, global_bytes, "global pax headers"
    else:
        limit, used, what = MAX_PAX_BYTES, ext.pax_bytes, "pax extended headers"
    if used + size > limit:
        raise TarFormatError(f"{what} of {used + size} bytes, more than the {limit} allowed",
                             limit=True)
