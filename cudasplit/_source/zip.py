"""Windows redistributables are zips: their members as the tar readers yield them (no unpacking)."""

from __future__ import annotations

import stat
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, cast

from cudasplit._model import Member, MemberType
from cudasplit._source.base import HEAD_SIZE
from cudasplit._source.names import normalise_member_path
from cudasplit._source.topdir import parse_top_dir
from cudasplit.errors import SourceError

__all__ = ["zip_members"]


def zip_members(path: Path) -> Iterator[tuple[Member, BinaryIO | None]]:
    """Windows redistributables are zips; read the central directory, open members in place."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            top = _zip_top(infos)
            for info in infos:
                item = _zip_member(archive, info, top, str(path))
                if item is not None:
                    yield item
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise SourceError(f"unreadable zip archive ({exc})", source=str(path)) from exc


def _zip_top(infos: Sequence[zipfile.ZipInfo]) -> str | None:
    if not infos:
        return None
    first = infos[0].filename.split("/", 1)[0]
    if parse_top_dir(first) and all(i.filename.split("/", 1)[0] == first for i in infos):
        return first + "/"
    return None


def _zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, top: str | None, source: str,
                ) -> tuple[Member, BinaryIO | None] | None:
    raw = normalise_member_path(info.filename, source=source)
    if top is not None:
        raw = raw[len(top):] if (raw + "/").startswith(top) else raw
    if not raw or raw + "/" == top:
        return None
    # Unix modes live in the high 16 bits when the zip was made on Unix; else 0.
    mode = (info.external_attr >> 16) & 0o7777 if info.create_system == 3 else 0
    if info.is_dir():
        return Member(raw, MemberType.DIR, mode or 0o755), None
    if stat.S_ISLNK(info.external_attr >> 16):
        return Member(raw, MemberType.SYMLINK, mode, 0, archive.read(info).decode()), None
    stream = archive.open(info)
    head = stream.read(HEAD_SIZE)
    stream.close()
    # The head read consumed the start; reopen so the consumer sees the whole content.
    member = Member(raw, MemberType.FILE, mode, info.file_size, None, 0, head)
    return member, cast(BinaryIO, archive.open(info))
