"""Reproducible per-output tarballs (``cudasplit repack``).

Members are staged by a private :class:`DirectorySink` (so links, patching and ``.pc``
rewrites behave exactly as in ``split``); :meth:`TarballSink.finish` then packs each staged
output into ``<pname>-<platform>-<version>-<output>.tar.<ext>``.

Layout: each archive holds one output's content *relative to the output root* (``lib/...``,
``include/...``; no top directory), the way a Nix output or a conda package is laid out.
Unpack ``X-<output>.tar.zst`` into ``<prefix>/<output>``; the sink's declared layout names exactly
that path, which is what RUNPATH entries and ``.pc`` rewrites name.

Reproducibility (:mod:`.tarpack` packs): members sorted by path components, uid/gid 0, modes
normalised, one mtime for everything (``SOURCE_DATE_EPOCH`` or :data:`DEFAULT_MTIME`), and
compressor settings that do not depend on the clock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from cudasplit._argcheck import checked
from cudasplit._layout import Layout, LayoutSpec, archive_stem
from cudasplit._model import PackageId
from cudasplit._run import ProgressCallback, Tally
from cudasplit._sinks.staged import StagedSink
from cudasplit._sinks.staging import remove_stale
from cudasplit._sinks.tarpack import TarPacker, sorted_members
from cudasplit._sinks.tarpack import translate as _translate
from cudasplit.errors import OutputError

log = logging.getLogger("cudasplit")

__all__ = [
    "COPY_CHUNK",
    "DEFAULT_FORMAT",
    "DEFAULT_LEVEL",
    "DEFAULT_MTIME",
    "FORMATS",
    "TarballSink",
    "mtime_from_env",
    "sorted_members",
]

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

    Args:
        directory: where the archives go.
        package: names the archives (default: the identity the split reads).
        prefix: where the outputs unpack (default ``/<stem>``).
        fmt: ``zst``, ``xz`` or ``gz``.
        level: the compression level.
        threads: zstd workers.
        mtime: the members' mtime (default: ``SOURCE_DATE_EPOCH`` or a fixed value).
        overwrite: replace archives that exist.
        staging_parent: where members are staged.
        progress: hears the bytes packed while :meth:`finish` compresses (a
            :class:`Progress` whose ``unit`` is ``"archive"``).

    Raises:
        OutputError: an unknown format, a relative prefix, or an archive that exists.
    """

    stage_prefix = ".cudasplit-repack-"

    @checked
    def __init__(self, directory: Path, package: PackageSource | None = None, *,
                 prefix: str | None = None,
                 fmt: str = DEFAULT_FORMAT, level: int = DEFAULT_LEVEL, threads: int = 0,
                 mtime: int | None = None, overwrite: bool = False,
                 staging_parent: Path | None = None,
                 progress: ProgressCallback | None = None) -> None:
        if fmt not in FORMATS:
            raise OutputError(f"unknown archive format {fmt!r} (known: {', '.join(FORMATS)})")
        if prefix is not None and not prefix.startswith("/"):
            raise OutputError(f"the unpack prefix must be an absolute path (prefix), not "
                              f"{prefix!r}")
        super().__init__(LayoutSpec.unpacked_at(prefix), staging_parent)
        self._directory = Path(os.path.abspath(directory))
        self._package = package
        self._fmt = fmt
        self._packer = TarPacker(fmt, level, threads, mtime_from_env() if mtime is None else mtime)
        self._overwrite = overwrite
        self._progress = progress
        self._packing: Callable[[int], None] | None = None  # the archive in hand's meter
        # Created on the first write: a source that cannot be read leaves no directory behind.
        self._made_directory = False
        self._cleaned = False
        self.written: list[Path] = []

    def stage_parent(self) -> Path:
        if not self._directory.exists():
            with _translate(self._directory):
                self._directory.mkdir(parents=True)
            self._made_directory = True
        parent = self._staging_parent or self._directory
        if not self._cleaned:  # what killed repacks left here
            self._cleaned = True
            remove_stale(parent, self.stage_prefix)
            if self._staging_parent is None:
                _remove_orphan_temps(self._directory, self.stage_prefix)
        return parent

    def start(self, package: PackageId, layout: Layout) -> None:
        super().start(package, layout)
        self._package = package
        # Before the first byte: an archive of this package already there is refused now, not
        # after the whole split was staged (finish() checks again, for a race).
        for output, _root in layout.roots:
            self._check_absent(self.archive_path(output))

    def finish(self) -> None:
        """Pack every output to a temp file, then rename them all: no partial archive remains."""
        if not self.staged:
            return  # nothing was written
        temps: list[tuple[Path, Path]] = []
        # Compressing is most of a repack's time: progress moves by the bytes packed.
        tally = Tally(str(self._directory), self._progress, unit="archive")
        try:
            for output in self.outputs():
                final = self.archive_path(output)
                self._check_absent(final)
                temp = self._temp_file(final)
                temps.append((temp, final))
                meter = tally.meter(f"compressing {final.name}")
                self._packing = meter if self._progress is not None else None
                self._pack(self.stage_root(output), temp)
                meter.finish()
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

    def stage_token(self) -> str:
        """The random part of the stage directory's name."""
        return self.stage_root("-").parent.name[len(self.stage_prefix):]

    # -- naming ---------------------------------------------------------------------------------

    def stem(self) -> str:
        package = self._package() if callable(self._package) else self._package
        if package is None:
            raise OutputError("the archives' names need the package identity (not read yet)")
        return archive_stem(package)

    def archive_path(self, output: str) -> Path:
        return self._directory / f"{self.stem()}-{output}{FORMATS[self._fmt]}"

    # -- packing --------------------------------------------------------------------------------

    def _pack(self, root: Path, dest: Path) -> None:
        """Pack one staged output into the temporary archive ``dest``."""
        self._packer.pack(root, dest, self._packing)

    def _check_absent(self, final: Path) -> None:
        if not self._overwrite and os.path.lexists(final):
            raise OutputError(f"{final}: archive already exists (overwrite replaces it)")

    def _temp_file(self, final: Path) -> Path:
        # Not mkstemp: its 0o600 would survive the rename. O_CREAT with 0o666 applies the
        # umask like any file the user writes, without touching the process-wide umask.
        # Named after the stage (``.X.tar.zst.<stage token>-<hex>.tmp``): a later run removes
        # the temp archives of a stage that is gone (_remove_orphan_temps).
        token = self.stage_token()
        for _ in range(100):
            temp = self._directory / f".{final.name}.{token}-{uuid.uuid4().hex[:6]}.tmp"
            try:
                os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            except FileExistsError:
                continue
            except OSError as exc:
                raise OutputError(f"{temp}: cannot write archive ({exc.strerror})") from exc
            return temp
        raise OutputError(f"{self._directory}: cannot create a temporary archive name")


_TEMP_ARCHIVE = re.compile(r"^\..+\.(?P<token>[A-Za-z0-9_]+)-[0-9a-f]{6}\.tmp$")


def _remove_orphan_temps(directory: Path, stage_prefix: str) -> None:
    """Temp archives whose stage (in ``directory``) is gone: a killed repack's."""
    try:
        names = [p for p in directory.iterdir() if _TEMP_ARCHIVE.match(p.name)]
    except OSError:
        return
    for path in names:
        match = _TEMP_ARCHIVE.match(path.name)
        assert match is not None
        if not (directory / f"{stage_prefix}{match['token']}").exists() and path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
                log.warning("%s: removed the temporary archive of a killed repack", path)
