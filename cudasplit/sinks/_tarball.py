"""Reproducible per-output tarballs (``cudasplit repack``).

Members are staged by a private :class:`DirectorySink` (so links, patching and ``.pc``
rewrites behave exactly as in ``split``); :meth:`TarballSink.finish` then packs each staged
output into ``<pname>-<platform>-<version>-<output>.tar.<ext>``.

Layout: each archive holds one output's content *relative to the output root* (``lib/...``,
``include/...``; no top directory), the way a Nix output or a conda package is laid out.
Unpack ``X-<output>.tar.zst`` into ``<prefix>/<output>``; the sink's declared layout names exactly
that path, which is what RUNPATH entries and ``.pc`` rewrites name.

Reproducibility: members sorted by path components, uid/gid 0 with empty user/group names,
modes normalised (0o755 directories and executables, 0o644 other files), one mtime for
everything (``SOURCE_DATE_EPOCH`` or :data:`DEFAULT_MTIME`), PAX headers that carry nothing
but what does not fit ustar, and compressor settings that do not depend on the clock.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import lzma
import os
import stat
import tarfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, BinaryIO, Final

import zstandard

from .._layout import Layout, LayoutSpec, archive_stem
from .._model import PackageId
from ..errors import OutputError
from ._staged import StagedSink

# 1980-01-01: the reproducible-builds convention for "no date" (zip cannot store earlier
# times, and some tar readers warn about the epoch itself).
DEFAULT_MTIME: Final = 315532800
FORMATS: Final[Mapping[str, str]] = {"zst": ".tar.zst", "xz": ".tar.xz", "gz": ".tar.gz"}
DEFAULT_FORMAT: Final = "zst"
DEFAULT_LEVEL: Final = 10
COPY_CHUNK: Final = 1 << 20

PackageSource = PackageId | Callable[[], PackageId]


def mtime_from_env(env: Mapping[str, str] | None = None) -> int:
    """``SOURCE_DATE_EPOCH`` when set (a non-negative integer), else :data:`DEFAULT_MTIME`."""
    env = os.environ if env is None else env
    value = env.get("SOURCE_DATE_EPOCH", "").strip()
    if not value:
        return DEFAULT_MTIME
    if not value.isdigit():
        raise OutputError(f"SOURCE_DATE_EPOCH={value!r} is not a non-negative integer")
    return int(value)


class TarballSink(StagedSink):
    """Stages outputs in a private directory and writes one reproducible tarball per output.

    ``package`` (optional) names the archives; otherwise the split tells the sink the identity
    it read (:meth:`start`) before the first member, so the sink never asks the source.
    ``prefix`` (default ``/<stem>``) is where the outputs will be unpacked: output ``lib``
    lives at ``<prefix>/lib`` (the sink's declared :attr:`layout`).
    """

    stage_prefix = ".cudasplit-repack-"

    def __init__(self, directory: Path, package: PackageSource | None = None, *,
                 prefix: str | None = None,
                 fmt: str = DEFAULT_FORMAT, level: int = DEFAULT_LEVEL, threads: int = 0,
                 mtime: int | None = None, overwrite: bool = False,
                 staging_parent: Path | None = None) -> None:
        if fmt not in FORMATS:
            raise OutputError(f"unknown archive format {fmt!r} (known: {', '.join(FORMATS)})")
        if prefix is not None and not prefix.startswith("/"):
            raise OutputError(f"--prefix must be an absolute path: {prefix!r}")
        super().__init__(LayoutSpec.unpacked_at(prefix), staging_parent)
        self._directory = Path(os.path.abspath(directory))
        self._package = package
        self._fmt, self._level, self._threads = fmt, level, threads
        self._mtime = mtime_from_env() if mtime is None else mtime
        self._overwrite = overwrite
        # Created on the first write: a source that cannot be read leaves no directory behind.
        self._made_directory = False
        self.written: list[Path] = []

    def stage_parent(self) -> Path:
        if not self._directory.exists():
            with _translate(self._directory):
                self._directory.mkdir(parents=True)
            self._made_directory = True
        return self._staging_parent or self._directory

    def start(self, package: PackageId, layout: Layout) -> None:
        super().start(package, layout)
        self._package = package

    def finish(self) -> None:
        """Pack every output to a temp file, then rename them all: no partial archive remains."""
        if not self.staged:
            return  # nothing was written
        temps: list[tuple[Path, Path]] = []
        try:
            for output in self.outputs():
                final = self.archive_path(output)
                self._check_absent(final)
                temp = self._temp_file(final)
                temps.append((temp, final))
                self._pack(self.stage_root(output), temp)
            for temp, final in temps:
                with _translate(final):
                    os.replace(temp, final)
                self.written.append(final)
        except BaseException:
            for temp, _ in temps:
                with contextlib.suppress(OSError):
                    temp.unlink()
            self.abort()
            raise
        self.discard_stage()

    def abort(self) -> None:
        self.discard_stage()
        if self._made_directory:
            with contextlib.suppress(OSError):
                self._directory.rmdir()  # only if empty: never remove what others wrote

    # -- naming ---------------------------------------------------------------------------------

    def stem(self) -> str:
        package = self._package() if callable(self._package) else self._package
        if package is None:
            raise OutputError("the archives' names need the package identity (not read yet)")
        return archive_stem(package)

    def archive_path(self, output: str) -> Path:
        return self._directory / f"{self.stem()}-{output}{FORMATS[self._fmt]}"

    # -- packing --------------------------------------------------------------------------------

    def _check_absent(self, final: Path) -> None:
        if not self._overwrite and os.path.lexists(final):
            raise OutputError(f"{final}: archive already exists (use --overwrite to replace it)")

    def _temp_file(self, final: Path) -> Path:
        # Not mkstemp: its 0o600 would survive the rename. O_CREAT with 0o666 applies the
        # umask like any file the user writes, without touching the process-wide umask.
        for _ in range(100):
            temp = self._directory / f".{final.name}.{uuid.uuid4().hex[:12]}.tmp"
            try:
                os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            except FileExistsError:
                continue
            except OSError as exc:
                raise OutputError(f"{temp}: cannot write archive ({exc.strerror})") from exc
            return temp
        raise OutputError(f"{self._directory}: cannot create a temporary archive name")

    def _pack(self, root: Path, dest: Path) -> None:
        with _translate(dest), dest.open("wb") as raw, self._compressed(raw) as stream, \
                tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT,
                             encoding="utf-8", errors="surrogateescape") as tar:
            inodes: dict[tuple[int, int], str] = {}
            for rel in sorted_members(root):
                self._add(tar, root, rel, inodes)

    @contextlib.contextmanager
    def _compressed(self, raw: BinaryIO) -> Iterator[IO[bytes]]:
        if self._fmt == "zst":
            params = zstandard.ZstdCompressionParameters.from_level(
                self._level, threads=self._threads, write_checksum=1)
            cctx = zstandard.ZstdCompressor(compression_params=params)
            with cctx.stream_writer(raw, closefd=False) as zst:
                yield zst
        elif self._fmt == "xz":
            with lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
                               preset=min(max(self._level, 0), 9)) as xz:
                yield xz
        else:
            # filename="" and mtime=0: gzip would otherwise record both in its header.
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                               compresslevel=min(max(self._level, 1), 9)) as gz:
                yield gz  # type: ignore[misc]

    def _add(self, tar: tarfile.TarFile, root: Path, rel: str,
             inodes: dict[tuple[int, int], str]) -> None:
        path = root / rel
        st = path.lstat()
        info = tarfile.TarInfo(rel)
        info.mtime, info.uid, info.gid, info.uname, info.gname = self._mtime, 0, 0, "", ""
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
                tar.addfile(info, fh)
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
def _translate(path: Path) -> Iterator[None]:
    try:
        yield
    except (OSError, zstandard.ZstdError, lzma.LZMAError, tarfile.TarError) as exc:
        errno_value = getattr(exc, "errno", None)
        reason = "disk full" if errno_value == errno.ENOSPC else (
            getattr(exc, "strerror", None) or str(exc))
        raise OutputError(f"{path}: cannot write archive ({reason})") from exc
