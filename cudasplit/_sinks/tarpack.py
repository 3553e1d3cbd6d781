"""Packing one staged output into a reproducible compressed tar archive.

Members sorted by path components, uid/gid 0 with empty user/group names, modes normalised
(0o755 directories and executables, 0o644 other files), one mtime for everything, PAX headers
that carry nothing but what does not fit ustar, and compressor settings that do not depend on
the clock.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import lzma
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, cast

import zstandard

from cudasplit._run import ByteGrid, MeteredStream
from cudasplit.errors import OutputError

__all__ = ["TarPacker", "sorted_members", "translate"]


@dataclass(frozen=True)
class TarPacker:
    """The archive settings of one repack: compressor (``fmt``: zst, xz or gz), level,
    compressor threads (zstd only) and the one mtime every member gets."""

    fmt: str
    level: int
    threads: int
    mtime: int

    def pack(self, root: Path, dest: Path,
             on_bytes: Callable[[int], None] | None = None) -> None:
        """Write the tree below ``root`` (not ``root`` itself) as the archive ``dest``;
        ``on_bytes``: the file bytes packed so far, every few MiB (progress)."""
        with translate(dest), dest.open("wb") as raw, self._compressed(raw) as stream, \
                tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT,
                             encoding="utf-8", errors="surrogateescape") as tar:
            inodes: dict[tuple[int, int], str] = {}
            grid = None if on_bytes is None else ByteGrid(on_bytes)  # every file counts on it
            for rel in sorted_members(root):
                self._add(tar, root, rel, inodes, grid)

    @contextlib.contextmanager
    def _compressed(self, raw: BinaryIO) -> Iterator[IO[bytes]]:
        if self.fmt == "zst":
            params = zstandard.ZstdCompressionParameters.from_level(
                self.level, threads=self.threads, write_checksum=1)
            cctx = zstandard.ZstdCompressor(compression_params=params)
            with cctx.stream_writer(raw, closefd=False) as zst:
                yield zst
        elif self.fmt == "xz":
            with lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                               preset=min(max(self.level, 0), 9)) as xz:
                yield xz
        else:
            # filename="" and mtime=0: gzip would otherwise record both in its header.
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                               compresslevel=min(max(self.level, 1), 9)) as gz:
                yield gz  # type: ignore[misc]

    def _add(self, tar: tarfile.TarFile, root: Path, rel: str,
             inodes: dict[tuple[int, int], str], grid: ByteGrid | None) -> None:
        path = root / rel
        st = path.lstat()
        info = tarfile.TarInfo(rel)
        info.mtime, info.uid, info.gid, info.uname, info.gname = self.mtime, 0, 0, "", ""
        if stat.S_ISLNK(st.st_mode):
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
            tar.addfile(info)
        elif stat.S_ISDIR(st.st_mode):
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        elif stat.S_ISREG(st.st_mode):
            info.mode = 0o755 if st.st_mode & 0o111 else 0o644
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in inodes:
                # Same inode seen earlier in sorted order: a hard link, like the direct split.
                info.type, info.linkname = tarfile.LNKTYPE, inodes[key]
                tar.addfile(info)
                return
            inodes[key] = rel
            info.size = st.st_size
            with path.open("rb") as fh:
                tar.addfile(info, fh if grid is None else cast(BinaryIO, MeteredStream(fh, grid)))
        else:
            raise OutputError(f"{path}: unexpected file type in the staged output")


def sorted_members(root: Path) -> list[str]:
    """Every path below ``root`` (not ``root`` itself), sorted by path components so each
    directory comes right before its contents; directory symlinks are not descended."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath).relative_to(root)
        for name in dirnames + filenames:
            found.append((base / name).as_posix())
    return sorted(found, key=lambda rel: rel.split("/"))


@contextlib.contextmanager
def translate(path: Path) -> Iterator[None]:
    """Errors while writing an archive -> OutputError naming it ("disk full" for ENOSPC)."""
    try:
        yield
    except (OSError, zstandard.ZstdError, lzma.LZMAError, tarfile.TarError) as exc:
        errno_value = getattr(exc, "errno", None)
        reason = "disk full" if errno_value == errno.ENOSPC else (
            getattr(exc, "strerror", None) or str(exc))
        raise OutputError(f"{path}: cannot write archive ({reason})") from exc
