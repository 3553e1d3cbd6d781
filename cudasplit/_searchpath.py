"""Search-path entries: splitting a value, spelling, ``$ORIGIN``, stubs and de-duplication.

Only spelling is normalised (``${ORIGIN}`` is ``$ORIGIN``, ``/a//b/`` is ``/a/b``); what an entry
means on disk is never looked at.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

ORIGIN = "$ORIGIN"
_ORIGIN_BRACED = "${ORIGIN}"
_SLASHES = re.compile(r"/+")


def split_search_path(value: str | None) -> tuple[str, ...]:
    """Split a ``DT_RUNPATH``/``DT_RPATH`` value on ``:``, keeping empty entries.

    Empty entries stay visible because the loader reads them as the current directory
    (libnvrtc ships ``$ORIGIN:``); ``None`` (no such tag) gives no entries.
    """
    if value is None:
        return ()
    return tuple(value.split(":"))


def is_origin_relative(entry: str) -> bool:
    """Whether ``entry`` is ``$ORIGIN``/``${ORIGIN}`` or a path below it."""
    key = entry_key(entry)
    return key == ORIGIN or key.startswith(ORIGIN + "/")


def is_stub_entry(entry: str, stub_dirs: Iterable[str] = ()) -> bool:
    """Whether ``entry`` points into a stubs directory.

    A stub ``libcuda.so`` found first makes programs fail with "CUDA driver is a stub
    library" (NixOS/nixpkgs#320145); Nixpkgs strips such entries after the fact (#459416).
    """
    if "stubs" in entry.split("/"):
        return True
    if not entry.startswith("/"):
        return False
    path = posixpath.normpath(_SLASHES.sub("/", entry))
    return any(_is_under(path, posixpath.normpath(stub_dir)) for stub_dir in stub_dirs)

def dedupe(entries: Iterable[str]) -> tuple[str, ...]:
    """First occurrence wins; ``${ORIGIN}`` equals ``$ORIGIN`` and ``/a//b/`` equals ``/a/b``."""
    seen: set[str] = set()
    result: list[str] = []
    for entry in entries:
        key = entry_key(entry)
        if key not in seen:
            seen.add(key)
            result.append(entry)
    return tuple(result)


def entry_key(entry: str) -> str:
    """The spelling two entries are compared by (``${ORIGIN}`` and extra slashes removed)."""
    # Only spelling is normalised: ".." is left alone, since "$ORIGIN/x/.." need not be
    # "$ORIGIN" when x is a symlink.
    if entry.startswith(_ORIGIN_BRACED):
        entry = ORIGIN + entry[len(_ORIGIN_BRACED) :]
    collapsed = _SLASHES.sub("/", entry)
    return collapsed.rstrip("/") or collapsed


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")

