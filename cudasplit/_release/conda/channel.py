"""A conda channel: each output of a profile's split packed as a ``.conda`` into ``<subdir>/``.

Members are staged like every :class:`~cudasplit.sinks.StagedSink` (links, patching
and rewrites are the split's); :meth:`CondaChannelSink.finish` then packs every staged output
with its profile metadata (``recipes/*.toml``, :mod:`.recipes`) into
``<channel>/noarch/`` or ``<channel>/<target_platform>/``, plus the packages every split of
the profile writes (``cuda-version``), and renames them into place only when all are packed.
A client indexes the channel (``rattler-index``, ``conda index``) and installs from it.

What reaches conda's metadata is checked against its grammar before anything is staged: the
archive's version (from its top directory or ``--package``) and, once the recipe templates are
filled, every name, version and match spec (:mod:`cudasplit._release.conda.grammar`).

An arch-specific package's ``__glibc`` pin comes from the bytes: the highest ``GLIBC_``
version any ELF file of the package needs, or that a file its links lead to needs (read from
the staged files with the inventory's reader, :func:`cudasplit._elf.read.read_inside`), and
never below the feedstock's ``c_stdlib_version`` where the recipe builds the output with
``stdlib("c")``. A noarch package gets none: conda-build applies only ``noarch`` run exports
to it, and its files are for the target platform, which need not be the machine that installs
them (the sbsa packages in an x86_64 environment).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cudasplit._elf.read import ELF_MAGIC, read_inside
from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit._release.conda.grammar import spec_problem
from cudasplit._release.conda.pack import CondaMeta, pack_conda, real_path
from cudasplit._release.conda.recipes import (
    CondaOutput,
    CondaProfile,
    RunValues,
    conda_profile,
    outputs_for,
)
from cudasplit._sinks import StagedSink
from cudasplit.errors import ElfError, OutputError

_SUBDIR = re.compile(r"^[a-z0-9]+-[a-z0-9_]+$")   # linux-64, linux-aarch64
_GLIBC_CEILING = "3.0.a0"                          # conda-forge's stdlib run export: <3.0.a0
_NEEDS_SECTIONS = (".gnu.version_r", ".dynstr")    # where a file's GLIBC_ needs are read

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
        source_name: the archive, for messages about its name (default: the package's).

    Raises:
        OutputError: a package exists with other bytes (without ``overwrite``), an output has
            no metadata in the profile, the archive's version is not a conda version, or the
            channel cannot be written.
        RulesError: the profile's recipe data fills a name or match spec that is not conda's.
    """

    stage_prefix = ".cudasplit-conda-"

    def __init__(self, channel: Path, rules_dir: Path, profile: str, *, platform: str | None,
                 cuda_version: str | None, level: int, threads: int, mtime: int,
                 overwrite: bool = False, staging_parent: Path | None = None,
                 source_name: str | None = None) -> None:
        super().__init__(LayoutSpec.under(channel), staging_parent)
        self._source_name = source_name
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
        run = RunValues(package.version, self._release(package))
        problem = run.problem()
        if problem is not None:
            top = f"{package.name}-{package.platform}-{package.version}-archive"
            where = f"{self._source_name}: member {top!r}" if self._source_name else top
            raise OutputError(f"{where}: version {package.version!r} cannot name a conda "
                              f"package: {problem}")
        self._profile = conda_profile(self._rules_dir, self._profile_name, platform)
        if not _SUBDIR.match(self._profile.target_platform):
            raise OutputError(f"profile {self._profile_name}: target_platform "
                              f"{self._profile.target_platform!r} is not a conda subdir")
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
        meta = self._meta(output, root)
        final = self._channel / meta.subdir / f"{meta.stem}.conda"
        self._make_dir(final.parent)
        with _translate(final.parent):
            work = Path(tempfile.mkdtemp(prefix=f".{meta.stem}.", dir=final.parent))
        try:
            empty = work / "empty"   # a package no output of the split holds
            if root is None:
                empty.mkdir()
            self._add_scripts(output, root or empty)
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

    def _meta(self, output: CondaOutput, root: Path | None) -> CondaMeta:
        assert self._profile is not None
        subdir = "noarch" if output.noarch else self._profile.target_platform
        about = (*output.recipe.about, ("summary", output.summary))
        glibc = None if output.noarch else self._glibc_pin(output, root)
        return CondaMeta(
            name=output.name, version=output.version, build=output.build,
            build_number=output.recipe.build_number, subdir=subdir, noarch=output.noarch,
            depends=(glibc, *output.depends) if glibc else output.depends,
            constrains=output.constrains,
            run_exports=output.run_exports, about=tuple(sorted(about)),
            timestamp=self._mtime * 1000)

    # -- __glibc from the bytes -----------------------------------------------------------------

    def _glibc_pin(self, output: CondaOutput, root: Path | None) -> str | None:
        """``__glibc >=X,<3.0.a0``: X the highest of the feedstock's ``c_stdlib_version``
        (outputs built with ``stdlib("c")``) and the package's measured floor; ``None`` when
        neither says anything."""
        floor = self._measured_floor(root) if root is not None else None
        wanted = [v for v in (output.recipe.c_stdlib_version if output.stdlib else None,
                              floor[0] if floor else None) if v is not None]
        if not wanted:
            return None
        version = max(wanted, key=_number_key)
        spec = f"__glibc >={version},<{_GLIBC_CEILING}"
        problem = spec_problem(spec)
        if problem is not None:
            assert floor is not None   # c_stdlib_version is checked when the recipe loads
            raise OutputError(f"{output.name}: {floor[1]} needs GLIBC_{floor[0]}, which cannot "
                              f"be pinned: {problem}")
        return spec

    def _measured_floor(self, root: Path) -> tuple[str, str] | None:
        """The highest ``GLIBC_`` version an ELF file below ``root`` needs, or a file one of its
        links resolves to in the run, with the prefix path of the file that needs it."""
        best: tuple[str, str] | None = None
        for path in _payload(root):
            local = root / path
            if local.is_symlink():
                real = real_path(path, self._resolve)
                target = self._resolve(real) if real is not None else None
                if target is None or target.is_symlink() or not target.is_file():
                    continue
                path, local = real or path, target
            elif not local.is_file():
                continue
            version = _glibc_need(local, path)
            if version is not None and (best is None
                                        or _number_key(version) > _number_key(best[0])):
                best = (version, path)
        return best

    def _add_scripts(self, output: CondaOutput, root: Path) -> None:
        """The files the recipe itself installs (activation scripts) into the package."""
        for dest, text in output.scripts:
            path = root / dest
            if os.path.lexists(path):
                raise OutputError(f"{output.name}: {dest} is both in the archive and one of "
                                  "the recipe's scripts")
            with _translate(path.parent):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

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


def _payload(root: Path) -> Iterator[str]:
    """Prefix paths of the files and links below ``root`` (``info/`` aside), sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        if rel == "info" or rel.startswith("info/"):
            continue
        for name in sorted(filenames + [d for d in dirnames
                                        if os.path.islink(os.path.join(dirpath, d))]):
            yield name if rel == "." else f"{rel}/{name}"


def _glibc_need(local: Path, path: str) -> str | None:
    """The highest ``GLIBC_`` version the ELF file ``local`` needs (not ELF: ``None``)."""
    try:
        with open(local, "rb") as fh:
            if fh.read(4) != ELF_MAGIC:
                return None
        inside = read_inside(local)
    except (OSError, ElfError, ValueError) as exc:
        raise OutputError(f"{path}: cannot read its glibc floor ({exc})") from exc
    if inside is None:
        return None
    # A damaged version-need table (or its strings) would pin below what the file needs: no
    # pin rather than a wrong one. Other damage (GPU code) is the split report's business.
    damaged = next((p for p in inside.problems if p.startswith(_NEEDS_SECTIONS)), None)
    if damaged is not None:
        raise OutputError(f"{path}: cannot read its glibc floor ({damaged})")
    return next((need.version for need in inside.floors if need.prefix == "GLIBC"), None)


def _number_key(version: str) -> tuple[tuple[int, str], ...]:
    """``2.27`` < ``2.28`` < ``2.100``, compared without ``int()`` (a hostile file's version
    may have thousands of digits)."""
    return tuple((len(part.lstrip("0")), part.lstrip("0")) for part in version.split("."))


@contextlib.contextmanager
def _translate(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the channel ({exc.strerror})") from exc
