"""The fields of one tar header block (ustar, GNU, pax records), parsed strictly.

Numbers are checked, pax records read in one linear pass, and what the extended headers
said is applied to the member header.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BLOCK",
    "DIRECTORY",
    "EXTENDED_TYPES",
    "HARDLINK",
    "LONGLINK",
    "LONGNAME",
    "NO_DATA",
    "PAX_GLOBAL",
    "REGULAR",
    "SPECIAL",
    "SYMLINK",
    "Extended",
    "TarFormatError",
    "TarHeader",
    "check_checksum",
    "header_from_block",
    "number",
    "padded_size",
    "parse_pax",
]

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
