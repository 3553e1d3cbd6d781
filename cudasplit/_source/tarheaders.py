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
block are parsed in :func:`header_from_block`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from cudasplit._run import transfer

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

    def read_member_data1(self, n: int) -> bytes | memoryview:
        """At most ``n`` (> 0) bytes of the current member's data, without a copy where the
        stream can (``read1``); never empty."""
        read1 = getattr(self._stream, "read1", None)
        data = read1(n) if read1 is not None else self._stream.read(n)
        if not data:
            raise TarFormatError("unexpected end of data")
        self._unread -= len(data)
        return data

    def transfer_member_data(self, fd: int, n: int) -> int:
        """Move at most ``n`` (> 0) bytes of the current member's data into ``fd`` (in the
        kernel where the stream can: :func:`~cudasplit._run.transfer`); never 0."""
        moved = transfer(self._stream, fd, n)
        if not moved:
            raise TarFormatError("unexpected end of data")
        self._unread -= moved
        return moved

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
        skip = getattr(type(self._stream), "skip", None)
        if skip is not None and n > 0:  # dropped in the kernel, or the file offset moved
            if skip(self._stream, n) < n:
                raise TarFormatError("unexpected end of data")
            return
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

    def read1(self, n: int = -1) -> bytes | memoryview:
        """Up to ``n`` bytes (all that is left if ``n < 0``) without a copy where possible."""
        n = self._left if n < 0 else min(n, self._left)
        if n <= 0:
            return b""
        data = self._reader.read_member_data1(n)
        self._left -= len(data)
        return data

    def transfer_to(self, fd: int, n: int) -> int:
        """Up to ``n`` bytes moved into ``fd`` (in the kernel where the stream can); 0 once
        the member's data is all moved."""
        n = min(n, self._left)
        if n <= 0:
            return 0
        moved = self._reader.transfer_member_data(fd, n)
        self._left -= moved
        return moved


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

BLOCK = 512
_MAX_NUMBER_DIGITS = 24        # a pax size/mtime longer than this is not a number we need

REGULAR = b"0"
HARDLINK = b"1"
SYMLINK = b"2"
DIRECTORY = b"5"
SPECIAL = (b"3", b"4", b"6")   # character device, block device, FIFO
_REGULAR_ALIASES = (b"0", b"\0", b"7")  # '7' (contiguous) is a regular file everywhere
NO_DATA = (HARDLINK, SYMLINK, DIRECTORY, *SPECIAL)  # tarfile/GNU tar skip no data for these
_PAX, PAX_GLOBAL, _PAX_SOLARIS = b"x", b"g", b"X"
LONGNAME, LONGLINK, _GNU_SPARSE = b"L", b"K", b"S"
EXTENDED_TYPES = (_PAX, _PAX_SOLARIS, PAX_GLOBAL, LONGNAME, LONGLINK)  # headers before a member


class TarFormatError(Exception):
    """Damaged or hostile tar structure; ``limit`` marks a cap that was exceeded."""

    def __init__(self, message: str, *, limit: bool = False) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class TarHeader:
    """One member as the headers describe it (extended headers applied).

    ``type`` is normalised: REGULAR, HARDLINK, SYMLINK, DIRECTORY, one of SPECIAL, or the raw
    type flag of anything else. ``size`` is the number of data bytes stored in the archive;
    ``sparse_size`` is the expanded size of a GNU sparse member (None otherwise).
    """

    name: str
    linkname: str
    type: bytes
    mode: int
    size: int
    mtime: int
    sparse_size: int | None = None


@dataclass
class Extended:
    """What the extended headers before one member said."""

    pax: dict[str, bytes]
    longname: bytes | None = None
    longlink: bytes | None = None
    pax_bytes: int = 0
    count: int = 0


def header_from_block(block: bytes, typeflag: bytes, size: int, ext: Extended) -> TarHeader:
    """The member header ``block`` describes, with what its extended headers said applied."""
    name, linkname = _names(block, ext)
    pax = ext.pax
    if "size" in pax:
        size = _pax_int(pax["size"], "size")
    mtime = number(block[136:148], "mtime", signed=True)
    if "mtime" in pax:
        mtime = _pax_mtime(pax["mtime"], mtime)
    if size < 0:
        raise TarFormatError(f"negative member size {size}")
    sparse_size = _sparse_size(block, typeflag, pax)
    kind = _kind(typeflag, name)
    if kind == DIRECTORY:
        name = name.rstrip("/") or name
    return TarHeader(name, linkname, kind, number(block[100:108], "mode") & 0o7777, size,
                     mtime, sparse_size)


def padded_size(size: int) -> int:
    return (size + BLOCK - 1) // BLOCK * BLOCK


def check_checksum(block: bytes) -> None:
    stored = number(block[148:156], "checksum")
    unsigned = sum(block) - sum(block[148:156]) + 8 * 0x20  # the field counts as spaces
    if stored == unsigned:
        return
    # Old tars summed signed chars: every byte >= 0x80 then counts 256 less.
    high = sum(1 for b in block[:148] + block[156:] if b & 0x80)
    if stored != unsigned - 256 * high:
        raise TarFormatError("bad header checksum")


def number(field: bytes, what: str, *, signed: bool = False) -> int:
    """An octal field (NUL/space terminated) or GNU base-256; garbage is corrupt data."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        if field[0] == 0xFF:
            value -= 1 << (8 * (len(field) - 1))
        if value < 0 and not signed:
            raise TarFormatError(f"negative {what} field")
        return value
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if text.translate(None, b"01234567"):
        raise TarFormatError(f"{what} field is not an octal number: {text[:24]!r}")
    return int(text, 8)


def parse_pax(buf: bytes) -> dict[str, bytes]:
    """``"<len> <key>=<value>\\n"`` records -> {key: value}, in one linear pass.

    The length fields must tile the header exactly (trailing NULs allowed); anything else is
    corrupt. Values stay bytes (``hdrcharset=BINARY`` may make them non-UTF-8).
    """
    records: dict[str, bytes] = {}
    pos, end = 0, len(buf)
    while pos < end:
        if buf[pos] == 0:
            if buf.count(0, pos) != end - pos:
                raise TarFormatError("garbage after the pax records")
            break
        space = buf.find(b" ", pos, pos + 12)
        digits = buf[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise TarFormatError("pax record without a length")
        record_end = pos + int(digits)
        equals = buf.find(b"=", space + 1, record_end)
        if record_end > end or equals <= space + 1 or buf[record_end - 1:record_end] != b"\n":
            raise TarFormatError("pax record with a bogus length")
        key = buf[space + 1:equals].decode("utf-8", "surrogateescape")
        records[key] = buf[equals + 1:record_end - 1]
        pos = record_end
    return records


def _pax_int(value: bytes, what: str) -> int:
    if not value.isdigit() or len(value) > _MAX_NUMBER_DIGITS:
        raise TarFormatError(f"pax {what} is not a number: {value[:24]!r}")
    return int(value)


def _pax_mtime(value: bytes, default: int) -> int:
    """pax mtimes are decimal with a fraction; an unreadable one keeps the header's (tarfile
    does the same, and the time does not decide anything)."""
    whole = value.split(b".", 1)[0]
    digits = whole.removeprefix(b"-")
    if not digits.isdigit() or len(digits) > _MAX_NUMBER_DIGITS:
        return default
    return int(whole)


def _decode(raw: bytes) -> str:
    # The same decoding tarfile uses on Linux; undecodable bytes survive as surrogates and
    # are refused by the caller's name checks.
    return raw.decode("utf-8", "surrogateescape")


def _names(block: bytes, ext: Extended) -> tuple[str, str]:
    name = block[0:100].split(b"\0", 1)[0]
    prefix = block[345:500].split(b"\0", 1)[0]
    if block[257:263] == b"ustar\0" and prefix:  # POSIX ustar; GNU uses that space otherwise
        name = prefix + b"/" + name
    linkname = block[157:257].split(b"\0", 1)[0]
    if ext.longname is not None:
        name = ext.longname
    if ext.longlink is not None:
        linkname = ext.longlink
    name = ext.pax.get("path", name)
    if "GNU.sparse.name" in ext.pax:
        name = ext.pax["GNU.sparse.name"]
    linkname = ext.pax.get("linkpath", linkname)
    return _decode(name), _decode(linkname)


def _kind(typeflag: bytes, name: str) -> bytes:
    if typeflag in _REGULAR_ALIASES:
        # Old V7 tars mark directories by a trailing slash only.
        return DIRECTORY if typeflag == b"\0" and name.endswith("/") else REGULAR
    return typeflag


def _sparse_size(block: bytes, typeflag: bytes, pax: dict[str, bytes]) -> int | None:
    if typeflag == _GNU_SPARSE:
        return number(block[483:495], "sparse size")
    if not any(key.startswith("GNU.sparse.") for key in pax):
        return None
    for key in ("GNU.sparse.size", "GNU.sparse.realsize"):
        if key in pax:
            return _pax_int(pax[key], key)
    raise TarFormatError("GNU sparse member without its expanded size")
