"""Directory sinks: ``--output-dir DIR`` (staged, moved into place at the end) and Nix outputs.

The sink writes; the placement guards (:mod:`.placement`) say where a member may go, and
:class:`~._promote.Promotion` moves the staged outputs into place, all or nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from cudasplit._argcheck import checked
from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit._run import copy_into
from cudasplit._sinks.base import safe_join
from cudasplit._sinks.placement import PlacementGuard, check_roots, translate
from cudasplit._sinks.promote import Promotion
from cudasplit._sinks.staging import (
    STAGING_PREFIX,
    record_owner,
    remove_dir,
    remove_stale,
    sync_dir,
    sync_tree,
)
from cudasplit.errors import OutputError

__all__ = ["MODE_MASK", "DirectorySink"]

# Modes are normalised: setuid/setgid/sticky never survive (cudasplit may run as root on
# archives from the internet), and group/other write bits are dropped like Nix does.
MODE_MASK = 0o755


def write_stream(fd: int, stream: BinaryIO) -> None:
    """Copy ``stream`` to the file ``fd`` to its end.

    A member's bytes go from the decoder's pipe (or a plain tar, or a file of a directory)
    into the file inside the kernel where the stream can (``splice``, ``copy_file_range``:
    :func:`~cudasplit._run.copy_into`), else from the decoder's chunks to ``write`` with no
    copy in between (``read1``: a view of each chunk). The one thread that feeds every write
    is what bounds a split on many cores, so each byte it does not touch is time.
    """
    copy_into(fd, stream)


class DirectorySink:
    """Writes each output into its own directory (a killed run leaves none that looks done).
    Args:
        roots: output name -> directory.
        staging_parent: stage below it, rename into place in :meth:`finish` (None: direct).
        overwrite: replace outputs that exist.
        durable: fsync before the final renames.
        base: an output not in ``roots`` goes to ``<base>/<output>`` (profiles whose
            packages name their own outputs); ``None``: such an output is an error.
    Raises:
        OutputError: a root exists (without ``overwrite``) or cannot be written.
    """

    @checked
    def __init__(self, roots: Mapping[str, Path], *, staging_parent: Path | None = None,
                 overwrite: bool = False, durable: bool = True,
                 base: Path | None = None) -> None:
        self._final = {name: Path(os.path.abspath(path)) for name, path in roots.items()}
        self._base = None if base is None else Path(os.path.abspath(base))
        # declared: the roots it moves into place
        self.layout = LayoutSpec.fixed(self._final, self._base)
        self._overwrite = overwrite
        self._durable = durable
        # Staging is created on the first write, never before: a source that cannot be opened
        # or read leaves nothing behind (not even the output directory).
        self._staging_parent = staging_parent
        self._staging: Path | None = None
        self._created: list[str] = []
        self._made_dirs: list[Path] = []  # DIR and parents created with it; abort() rmdirs them
        # A fresh staging dir holds no symlink; an unstaged root (Nix mode, --overwrite) may.
        self._guard = PlacementGuard(self._shown, check_parents=staging_parent is None)
        check_roots(self._final, self._created, staged=staging_parent is not None,
                    overwrite=overwrite)
        self.stale_removed: list[Path] = []   # stale staging dirs of dead runs, removed

    @classmethod
    def for_output_dir(cls, directory: Path, outputs: list[str], *,
                       overwrite: bool = False, durable: bool = True,
                       other_outputs: bool = False) -> DirectorySink:
        """``DIR/<output>`` for ``outputs``; ``other_outputs``: for any other name too."""
        directory = Path(os.path.abspath(directory))
        roots = {name: directory / name for name in outputs}
        return cls(roots, staging_parent=directory, overwrite=overwrite, durable=durable,
                   base=directory if other_outputs else None)

    # -- protocol -------------------------------------------------------------------------

    def start(self, package: PackageId, layout: Layout) -> None:
        """Nothing to learn: the roots were given when the sink was made."""

    def ensure_output(self, output: str) -> None:
        root = self._work_root(output)
        if output not in self._created:
            with translate(self._shown(root)):
                root.mkdir(parents=True, exist_ok=True)
                os.chmod(root, 0o755)
            self._created.append(output)

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        path = self._prepare(output, dest)
        with translate(self._shown(path)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                write_stream(fd, stream)
                os.fchmod(fd, mode & MODE_MASK)  # the file we created, never a swapped name
            finally:
                os.close(fd)

    def make_symlink(self, output: str, dest: str, target: str) -> None:
        path = self._prepare(output, dest)
        self._guard.saw_symlink()
        with translate(self._shown(path)):
            os.symlink(target, path)

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None:
        source = self._guard.existing(self._work_root(src_output), src_dest)
        path = self._prepare(output, dest)
        with translate(self._shown(path)):
            if output == src_output:
                os.link(source, path, follow_symlinks=False)
            else:
                # Hard links between outputs would tie store paths together: copy instead.
                shutil.copy2(source, path, follow_symlinks=False)

    def outputs(self) -> list[str]:
        return list(self._created)

    def staged_path(self, output: str, dest: str) -> Path:
        """Where ``dest``'s bytes are until :meth:`finish` (patched there)."""
        return safe_join(self._work_root(output), dest)

    def public_text(self, text: str) -> str:
        """``text`` (a problem message) with staging paths replaced by the final ones."""
        if self._staging is None or str(self._staging) not in text:
            return text
        for name, final in self._final.items():
            text = text.replace(f"{self._staging / name}", str(final))
        return text

    def finish(self) -> None:
        if self._staging is None:
            if self._staging_parent is not None:  # nothing written: still a finished, empty DIR
                with translate(self._staging_parent):
                    self._staging_parent.mkdir(parents=True, exist_ok=True)
            return
        staging = self._staging
        promotion = Promotion(staging, self._final)
        try:
            check_roots(self._final, self._created, staged=True, overwrite=self._overwrite)
            if self._durable:
                sync_tree(staging)
            if self._overwrite:
                promotion.move_aside()
            for output in self._created:
                promotion.move_in(output)
            if self._durable:
                sync_dir(staging.parent)
        except BaseException:
            if not promotion.roll_back():
                self._staging = None  # it holds old outputs that could not be put back
            self.abort()
            raise
        self._staging = None
        promotion.discard()

    def abort(self) -> None:
        if self._staging is not None:
            remove_dir(self._staging)
            self._staging = None
        for made in self._made_dirs:
            with contextlib.suppress(OSError):
                made.rmdir()  # only if empty: never remove what others wrote

    # -- helpers --------------------------------------------------------------------------

    def _work_root(self, output: str) -> Path:
        final = self._final.get(output)
        if final is None:
            final = self._other_root(output)
        if self._staging_parent is None:
            return final
        return self._ensure_staging() / output

    def _other_root(self, output: str) -> Path:
        """``<base>/<output>`` for an output the sink was not given, checked like the roots
        given at construction (a name that would leave ``base``, an existing directory)."""
        if self._base is None:
            raise OutputError(f"no directory configured for output {output!r}")
        if not output or "/" in output or output in (".", "..") or "\0" in output:
            raise OutputError(f"refusing output name {output!r}: not a directory name")
        final = self._final[output] = self._base / output
        check_roots({output: final}, [], staged=self._staging_parent is not None,
                    overwrite=self._overwrite)
        return final

    def _shown(self, path: Path) -> Path:
        """Where ``path`` will be once the run is over: messages never name the staging dir,
        which is gone by the time the user reads them."""
        return path if self._staging is None else _unstaged(path, self._staging, self._final)

    def _ensure_staging(self) -> Path:
        if self._staging is None:
            assert self._staging_parent is not None
            if made := _make_parent(self._staging_parent):
                self._made_dirs = made
            self.stale_removed = remove_stale(self._staging_parent)
            self._staging = _make_staging(self._staging_parent)
        return self._staging

    def _prepare(self, output: str, dest: str) -> Path:
        self.ensure_output(output)
        return self._guard.new(self._work_root(output), dest)


def _unstaged(path: Path, staging: Path, final: Mapping[str, Path]) -> Path:
    """``staging/<output>/rest`` as ``<final root of output>/rest``; other paths unchanged."""
    try:
        rel = path.relative_to(staging)
    except ValueError:
        return path
    if not rel.parts or rel.parts[0] not in final:
        return path
    return final[rel.parts[0]].joinpath(*rel.parts[1:])


def _make_parent(parent: Path) -> list[Path]:
    """Create ``parent`` if missing; every directory created, so abort() removes the whole
    chain (e.g. DIR and DIR/<pname>-... of a batch) when it stays empty."""
    if parent.exists():
        return []
    missing = [parent, *(p for p in parent.parents if not p.exists())]
    try:
        parent.mkdir(parents=True)
    except OSError as exc:
        raise OutputError(f"{parent}: cannot create output directory ({exc.strerror})") from exc
    return missing


def _make_staging(parent: Path) -> Path:
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    except OSError as exc:
        raise OutputError(f"{parent}: cannot create staging directory ({exc.strerror})") from exc
    record_owner(staging)
    return staging
