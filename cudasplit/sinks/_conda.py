"""A conda channel: each output of a profile's split packed as a ``.conda`` into ``<subdir>/``.

Members are staged like every :class:`~cudasplit.sinks._staged.StagedSink` (links, patching
and rewrites are the split's); :meth:`CondaChannelSink.finish` then packs every staged output
with its profile metadata (``recipes/*.toml``, :mod:`cudasplit._rulebook`) into
``<channel>/noarch/`` or ``<channel>/<target_platform>/``, plus the packages every split of
the profile writes (``cuda-version``), and renames them into place only when all are packed.
A client indexes the channel (``rattler-index``, ``conda index``) and installs from it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit._rulebook import CondaOutput, CondaProfile, RunValues, conda_profile, outputs_for
from cudasplit.errors import OutputError
from cudasplit.sinks._condapack import CondaMeta, pack_conda
from cudasplit.sinks._staged import StagedSink

__all__ = ["CondaChannelSink"]


class CondaChannelSink(StagedSink):
    """Stages the split, then writes one ``.conda`` per output into ``channel``.

    Args:
        channel: the channel directory (``<subdir>/`` below it are created).
        rules_dir: the rules directory holding the profile.
        profile: the profile whose ``recipes/`` describe the packages.
        platform: the NVIDIA platform (default: the archive's).
        cuda_version: the CUDA release (X.Y or X.Y.Z) the metadata pins (default: a
            ``cuda_*`` archive's own X.Y).
        level: zstd level.
        threads: zstd workers (0: none; the bytes are the same for any value >= 1).
        mtime: every member's mtime (and index.json's timestamp).
        overwrite: replace packages that exist with other bytes.
        staging_parent: where members are staged (default: the channel directory).

    Raises:
        OutputError: a package exists with other bytes (without ``overwrite``), an output has
            no metadata in the profile, or the channel cannot be written.
    """

    stage_prefix = ".cudasplit-conda-"

    def __init__(self, channel: Path, rules_dir: Path, profile: str, *, platform: str | None,
                 cuda_version: str | None, level: int, threads: int, mtime: int,
                 overwrite: bool = False, staging_parent: Path | None = None) -> None:
        super().__init__(LayoutSpec.under(channel), staging_parent)
        self._channel = Path(os.path.abspath(channel))
        self._rules_dir, self._profile_name, self._platform = rules_dir, profile, platform
        self._profile: CondaProfile | None = None
        self._cuda_version = cuda_version
        self._level, self._threads, self._mtime = level, threads, mtime
        self._overwrite = overwrite
        self._outputs: dict[str, CondaOutput] = {}
        self._extra: list[CondaOutput] = []
        self._made: list[Path] = []   # directories this run created (abort removes them empty)
        self.written: list[Path] = []

    def stage_parent(self) -> Path:
        if self._staging_parent is not None:
            return self._staging_parent
        self._make_dir(self._channel)
        return self._channel

    def _make_dir(self, directory: Path) -> None:
        missing = [p for p in reversed((directory, *directory.parents)) if not p.exists()]
        with _translate(directory):
            directory.mkdir(parents=True, exist_ok=True)
        self._made.extend(missing)

    def abort(self) -> None:
        super().abort()
        for made in reversed(self._made):  # innermost first; only if empty: never others' files
            with contextlib.suppress(OSError):
                made.rmdir()
        self._made = []

    def start(self, package: PackageId, layout: Layout) -> None:
        """The package's outputs, resolved: an unknown version fails before anything is
        staged."""
        super().start(package, layout)
        if not package.version:
            raise OutputError(f"{package.name}: conda packages need the archive's version "
                              "(the top directory names none; name it as "
                              "NAME-PLATFORM-VERSION: package)")
        platform = self._platform or package.platform
        self._profile = conda_profile(self._rules_dir, self._profile_name, platform)
        run = RunValues(package.version, self._release(package))
        for output in outputs_for(self._profile.recipes, package.name, platform):
            resolved = output.resolved(run)
            if output.redist == ("*",):
                self._extra.append(resolved)
            else:
                self._outputs[resolved.name] = resolved

    def _release(self, package: PackageId) -> str:
        if self._cuda_version:
            return self._cuda_version
        if package.name.startswith("cuda_") and package.version:
            return ".".join(package.version.split(".")[:2])
        raise OutputError(f"{package.name}: its conda metadata pins the CUDA release: give "
                          "it (cuda_version X.Y)")

    def finish(self) -> None:
        """Pack every output to a temp file, then rename them all into the channel."""
        temps: list[tuple[Path, Path]] = []
        try:
            for name in sorted(self.outputs()):
                output = self._outputs.get(name)
                if output is None:
                    raise OutputError(f"output {name!r} has no conda metadata in the profile's "
                                      "recipes/")
                temps.append(self._pack(output, self.stage_root(name)))
            for output in self._extra:
                temps.append(self._pack(output, None))
            for temp, final in temps:
                if self._same(temp, final):
                    temp.unlink()
                else:
                    os.replace(temp, final)
                self.written.append(final)
        except BaseException:
            for temp, _final in temps:
                with contextlib.suppress(OSError):
                    temp.unlink()
            self.abort()
            raise
        self.discard_stage()
        self._made = []

    # -- one package -------------------------------------------------------------------------

    def _pack(self, output: CondaOutput, root: Path | None) -> tuple[Path, Path]:
        """``(temp, final)``: the package packed next to its final name."""
        assert self._profile is not None
        meta = self._meta(output)
        final = self._channel / meta.subdir / f"{meta.stem}.conda"
        self._make_dir(final.parent)
        with _translate(final.parent):
            work = Path(tempfile.mkdtemp(prefix=f".{meta.stem}.", dir=final.parent))
        try:
            empty = work / "empty"   # a package no output of the split holds
            if root is None:
                empty.mkdir()
            built = work / f"{meta.stem}.conda"
            pack_conda(meta, root or empty, built, placeholder=self._profile.placeholder,
                       resolve=self._resolve, level=self._level, threads=self._threads,
                       mtime=self._mtime)
            temp = work.with_name(work.name + ".conda.tmp")
            os.replace(built, temp)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if os.path.lexists(final) and not self._overwrite and not self._same(temp, final):
            temp.unlink()
            raise OutputError(f"{final}: a different package of that name exists "
                              "(overwrite replaces it)")
        return temp, final

    def _meta(self, output: CondaOutput) -> CondaMeta:
        assert self._profile is not None
        subdir = "noarch" if output.noarch else self._profile.target_platform
        about = (*output.recipe.about, ("summary", output.summary))
        return CondaMeta(
            name=output.name, version=output.version, build=output.build,
            build_number=output.recipe.build_number, subdir=subdir, noarch=output.noarch,
            depends=output.depends, constrains=output.constrains,
            run_exports=output.run_exports, about=tuple(sorted(about)),
            timestamp=self._mtime * 1000)

    def _resolve(self, path: str) -> Path | None:
        """A prefix path -> the staged file or link of the run's output that holds it."""
        for output in self.outputs():
            local = self.stage_root(output) / path
            if os.path.lexists(local):
                return local
        return None

    @staticmethod
    def _same(temp: Path, final: Path) -> bool:
        if not final.is_file() or final.stat().st_size != temp.stat().st_size:
            return False
        with open(temp, "rb") as a, open(final, "rb") as b:
            while chunk := a.read(1 << 20):
                if chunk != b.read(len(chunk)):
                    return False
        return True


@contextlib.contextmanager
def _translate(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the channel ({exc.strerror})") from exc
