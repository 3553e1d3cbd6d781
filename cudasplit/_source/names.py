"""Member names from untrusted sources: normalised, refused when hostile, kept short in messages.

Tarball and directory sources apply the same rules, so an unpacked tree cannot smuggle in
what the archive could not.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from cudasplit.errors import UnsafeMemberError

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_DEPTH",
    "MAX_PATH_BYTES",
    "check_text",
    "member_parent",
    "normalise_member_path",
    "short_name",
]

# Names a genuine redistributable never comes near (its longest paths are ~200 bytes, ~12
# levels deep). Refusing beyond them keeps hostile names from reaching the filesystem as
# ENAMETOOLONG or from recursing in ``Path.mkdir(parents=True)``.
MAX_COMPONENT_BYTES = 255   # NAME_MAX on Linux
MAX_PATH_BYTES = 1024
MAX_DEPTH = 64
# C0 controls and DEL, C1 controls (U+0085 is a line break, U+009B a one-character CSI for
# many terminals), the line and paragraph separators, and the bidi controls (U+202E shows
# "lib/x\u202eos.a" as "lib/xa.so"): none is in a genuine redistributable's names.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def normalise_member_path(raw: str, *, source: str) -> str:
    """Archive path -> safe relative POSIX path, or UnsafeMemberError.

    Absolute paths and ``..`` components are refused rather than "fixed": an archive that
    contains them is not a genuine NVIDIA redistributable, and guessing would hide an attack.
    """
    check_text(raw, source=source, what="name")
    if raw.startswith("/"):
        raise UnsafeMemberError("absolute path", source=source, member=raw)
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeMemberError("path climbs with '..'", source=source, member=raw)
    if len(parts) > MAX_DEPTH:
        raise UnsafeMemberError(f"path too deep (more than {MAX_DEPTH} levels)", source=source,
                                member=short_name(raw))
    if (len(raw.encode()) > MAX_PATH_BYTES
            or any(len(p.encode()) > MAX_COMPONENT_BYTES for p in parts)):
        raise UnsafeMemberError("name too long", source=source, member=short_name(raw))
    return "/".join(parts)


def check_text(raw: str, *, source: str, what: str, member: str | None = None) -> None:
    """Refuse a name or link target with NUL, control characters (C0, DEL, C1), line or
    paragraph separators, bidi controls, or invalid UTF-8.

    tarfile decodes names with ``surrogateescape``; such names cannot be printed or put in
    the JSON report faithfully, a newline would forge lines in every line-based listing, and
    a bidi override makes a listed name read as another.
    """
    shown = short_name(member if member is not None else raw)
    if "\x00" in raw:
        raise UnsafeMemberError(f"{what} contains a NUL byte", source=source, member=shown)
    bad = _CONTROL.search(raw)
    if bad:
        kind = ("a bidirectional control" if bad[0] in _BIDI else "a control character")
        raise UnsafeMemberError(f"{what} contains {kind} (U+{ord(bad[0]):04X})",
                                source=source, member=shown)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeMemberError(f"{what} is not valid UTF-8", source=source,
                                member=shown) from None


def short_name(name: str) -> str:
    """Keep error messages one short line even for 100 KB names."""
    return name if len(name) <= 120 else name[:100] + "..." + name[-16:]


def member_parent(path: str) -> str:
    """The directory of a normalised member path; ``""`` at the top."""
    if "/" not in path:
        return ""
    if not (path.startswith(("/", "./")) or path.endswith(("/", "/.")) or "//" in path
            or "/./" in path):
        return path.rpartition("/")[0]  # the common case, without pathlib (25 %
        # of a 90,000-link archive's time went to PurePosixPath here)
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent
