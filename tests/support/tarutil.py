"""Tiny in-memory tar writer for unit tests that need precise member lists (no gcc)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path

import zstandard

TOP = "cuda_demo-linux-x86_64-12.9.79-archive"
# Entries: ("file", path, bytes) | ("dir", path) | ("symlink", path, target) | ("hardlink", path, target)
Entry = tuple[str, ...] | tuple[str, str, bytes]


def tar_bytes(entries: Iterable[Entry], *, top: str | None = TOP) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        if top:
            info = tarfile.TarInfo(top)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for entry in entries:
            _add(tar, entry, top)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, entry: Entry, top: str | None) -> None:
    kind, path = entry[0], entry[1]
    name = f"{top}/{path}" if top else str(path)
    info = tarfile.TarInfo(str(name))
    info.mtime = 1700000000
    if kind == "file":
        data = entry[2]
        assert isinstance(data, bytes)
        info.size, info.mode = len(data), 0o755 if data.startswith(b"\x7fELF") else 0o644
        tar.addfile(info, io.BytesIO(data))
        return
    if kind == "dir":
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    elif kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, str(entry[2])
    elif kind == "hardlink":
        info.type = tarfile.LNKTYPE
        info.linkname = f"{top}/{entry[2]!s}" if top else str(entry[2])
    tar.addfile(info)


def compress(data: bytes, codec: str) -> bytes:
    import bz2
    import gzip
    import lzma

    if codec == "xz":
        return lzma.compress(data)
    if codec == "gz":
        return gzip.compress(data, mtime=0)
    if codec == "bz2":
        return bz2.compress(data)
    if codec == "zst":
        return zstandard.ZstdCompressor().compress(data)
    return data


def write_archive(path: Path, entries: Iterable[Entry], codec: str = "xz",
                  top: str | None = TOP) -> Path:
    path.write_bytes(compress(tar_bytes(entries, top=top), codec))
    return path
