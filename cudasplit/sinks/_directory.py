"""Directory sinks: ``--output-dir DIR`` (staged, moved into place at the end) and Nix outputs."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from .._layout import Layout, LayoutSpec
from .._model import PackageId
from ..errors import OutputError
from ._base import safe_join
from ._staging import (
    PREVIOUS_DIR,
    STAGING_PREFIX,
    record_owner,
    remove_stale,
    sync_dir,
    sync_tree,
)

log = logging.getLogger("cudasplit")

COPY_CHUNK = 1 << 20
# Modes are normalised: setuid/setgid/sticky never survive (cudasplit may run as root on
# archives from the internet), and group/other write bits are dropped like Nix does.
MODE_MASK = 0o755


class DirectorySink:
    """Writes each output into its own directory.

    ``staging=True`` (``--output-dir`` mode): members go to ``<parent>/.cudasplit-staging-*/``
    and each output directory is renamed into place by :meth:`finish`, so a killed run leaves
    nothing that looks finished. ``staging=False`` (Nix mode): the roots are written directly;
    Nix discards the outputs of a failed build itself.
    """

    def __init__(self, roots: Mapping[str, Path], *, staging_parent: Path | None = None,
                 overwrite: bool = False, durable: bool = True) -> None:
        self._final = {name: Path(os.path.abspath(path)) for name, path in roots.items()}
        self.layout = LayoutSpec.fixed(self._final)  # declared: the roots it moves into place
        self._overwrite = overwrite
        self._durable = durable
        # Staging is created on the first write, never before: a source that cannot be opened
        # or read leaves nothing behind (not even the output directory).
        self._staging_parent = staging_parent
        self._staging: Path | None = None
        self._created: list[str] = []
        self._made_dirs: list[Path] = []  # DIR and parents created with it; abort() rmdirs them
        # Once a symlink exists in the tree, parents are checked before every write; a fresh
        # staging dir holds none, an unstaged root (Nix mode, --overwrite) may already.
        self._check_parents = staging_parent is None
        self._check_roots(staged=staging_parent is not None)
        self.stale_removed: list[Path] = []   # stale staging dirs of dead runs, removed

    @classmethod
    def for_output_dir(cls, directory: Path, outputs: list[str], *,
                       overwrite: bool = False, durable: bool = True) -> DirectorySink:
        directory = Path(os.path.abspath(directory))
        roots = {name: directory / name for name in outputs}
        return cls(roots, staging_parent=directory, overwrite=overwrite, durable=durable)

    # -- protocol -------------------------------------------------------------------------

    def start(self, package: PackageId, layout: Layout) -> None:
        """Nothing to learn: the roots were given when the sink was made."""

    def ensure_output(self, output: str) -> None:
        root = self._work_root(output)
        if output not in self._created:
            with _translate(self._shown(root)):
                root.mkdir(parents=True, exist_ok=True)
                os.chmod(root, 0o755)
            self._created.append(output)

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        path = self._prepare(output, dest)
        with _translate(self._shown(path)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                shutil.copyfileobj(stream, fh, COPY_CHUNK)
                os.fchmod(fd, mode & MODE_MASK)  # the file we created, never a swapped name

    def make_symlink(self, output: str, dest: str, target: str) -> None:
        path = self._prepare(output, dest)
        self._check_parents = True
        with _translate(self._shown(path)):
            os.symlink(target, path)

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None:
        source = safe_join(self._work_root(src_output), src_dest)
        self._refuse_links_above(self._work_root(src_output), source)
        path = self._prepare(output, dest)
        with _translate(self._shown(path)):
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

    def finish(self) -> None:
        if self._staging is None:
            if self._staging_parent is not None:  # nothing written: still a finished, empty DIR
                with _translate(self._staging_parent):
                    self._staging_parent.mkdir(parents=True, exist_ok=True)
            return
        staging = self._staging
        previous = staging / PREVIOUS_DIR
        aside: list[tuple[Path, Path]] = []   # (old final, where it waits in staging)
        moved: list[tuple[Path, Path]] = []   # (new final, its staging path)
        try:
            self._check_roots(staged=True)
            if self._durable:
                sync_tree(staging)
            if self._overwrite:
                self._move_aside(previous, aside)
            for output in self._created:
                final, work = self._final_root(output), staging / output
                with _translate(final):
                    os.rename(work, final)
                moved.append((final, work))
            if self._durable:
                sync_dir(staging.parent)
        except BaseException:
            # All or nothing: new outputs go back to staging, old ones back into place.
            self._roll_back(moved, aside)
            self.abort()
            raise
        self._staging = None
        _remove_previous(previous, staging)
        shutil.rmtree(staging, ignore_errors=True)

    def _move_aside(self, previous: Path, aside: list[tuple[Path, Path]]) -> None:
        """--overwrite: every existing output directory (also those this run does not
        produce) is renamed into staging first, so a failure can put it back untouched.
        ``aside`` grows as they move, for the roll-back."""
        for name, final in self._final.items():
            if not os.path.lexists(final):
                continue
            with _translate(previous):
                previous.mkdir(exist_ok=True)
            with _translate(final):
                os.rename(final, previous / name)
            aside.append((final, previous / name))

    def _roll_back(self, moved: list[tuple[Path, Path]], aside: list[tuple[Path, Path]]) -> None:
        lost = []
        for final, work in reversed(moved):
            try:
                os.rename(final, work)
            except OSError:
                shutil.rmtree(final, ignore_errors=True)
        for final, waiting in reversed(aside):
            try:
                os.rename(waiting, final)
            except OSError:
                lost.append(str(waiting))
        if lost:
            # Never delete what we could not put back: keep the staging dir and say where.
            log.error("previous outputs could not be moved back; they are in %s",
                      ", ".join(lost))
            self._staging = None

    def abort(self) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        for made in self._made_dirs:
            with contextlib.suppress(OSError):
                made.rmdir()  # only if empty: never remove what others wrote

    # -- helpers --------------------------------------------------------------------------

    def _final_root(self, output: str) -> Path:
        try:
            return self._final[output]
        except KeyError:
            raise OutputError(f"no directory configured for output {output!r}") from None

    def _work_root(self, output: str) -> Path:
        final = self._final_root(output)
        if self._staging_parent is None:
            return final
        return self._ensure_staging() / output

    def public_text(self, text: str) -> str:
        """``text`` (a problem message) with staging paths replaced by the final ones."""
        if self._staging is None:
            return text
        for name, final in self._final.items():
            text = text.replace(f"{self._staging / name}", str(final))
        return text

    def _shown(self, path: Path) -> Path:
        """Where ``path`` will be once the run is over: messages never name the staging dir,
        which is gone by the time the user reads them."""
        if self._staging is None:
            return path
        try:
            rel = path.relative_to(self._staging)
        except ValueError:
            return path
        if not rel.parts or rel.parts[0] not in self._final:
            return path
        return self._final[rel.parts[0]].joinpath(*rel.parts[1:])

    def _ensure_staging(self) -> Path:
        if self._staging is None:
            assert self._staging_parent is not None
            parent = self._staging_parent
            if not parent.exists():
                # Remember every directory created here, so abort() removes the whole chain
                # (e.g. DIR and DIR/<pname>-... of a batch) when it stays empty.
                missing = [parent, *(p for p in parent.parents if not p.exists())]
                try:
                    parent.mkdir(parents=True)
                except OSError as exc:
                    raise OutputError(
                        f"{parent}: cannot create output directory ({exc.strerror})") from exc
                self._made_dirs = missing
            self.stale_removed = remove_stale(parent)
            self._staging = _make_staging(parent)
        return self._staging

    def _prepare(self, output: str, dest: str) -> Path:
        self.ensure_output(output)
        root = self._work_root(output)
        path = safe_join(root, dest)
        self._refuse_links_above(root, path)
        with _translate(self._shown(path)):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise OutputError(f"{self._shown(path)}: a parent directory is a file written "
                                  "for an earlier member (the archive names it as file and "
                                  "directory)") from None
            if os.path.isdir(path) and not os.path.islink(path):
                raise OutputError(f"{self._shown(path)}: is a directory holding earlier members "
                                  "(the archive names it as file and directory)")
            if os.path.lexists(path):
                # A later member of the same name replaces the earlier one (tar semantics);
                # unlinking first means we never write through a symlink.
                _remove(path)
        return path

    def _refuse_links_above(self, root: Path, path: Path) -> None:
        """Never create anything through a symlink, whatever placed it there."""
        if not self._check_parents:
            return
        current = root
        for part in path.relative_to(root).parts[:-1]:
            current = current / part
            if os.path.islink(current):
                raise OutputError(f"{self._shown(path)}: refusing to write through the "
                                  f"symlink {self._shown(current)}")

    def _check_roots(self, *, staged: bool) -> None:
        if self._overwrite:
            return
        for name, root in self._final.items():
            if not staged and name not in self._created and _non_empty(root):
                raise OutputError(f"{root}: output directory for {name!r} already contains files "
                                  "(use --overwrite to replace it)")
            if staged and _non_empty(root):
                raise OutputError(f"{root}: output directory for {name!r} already exists "
                                  "(use --overwrite to replace it)")


def _remove_previous(previous: Path, staging: Path) -> None:
    """Delete the outputs --overwrite replaced. What cannot be deleted (an immutable file) is
    moved out of the staging dir, so the finished run leaves no staging dir behind."""
    shutil.rmtree(previous, ignore_errors=True)
    if not os.path.lexists(previous):
        return
    leftover = staging.parent / (".cudasplit-previous-" + staging.name[len(STAGING_PREFIX):])
    try:
        os.rename(previous, leftover)
    except OSError:
        leftover = previous
    log.warning("%s: could not remove all of the previous outputs replaced by --overwrite; "
                "remove it by hand", leftover)


def _make_staging(parent: Path) -> Path:
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    except OSError as exc:
        raise OutputError(f"{parent}: cannot create staging directory ({exc.strerror})") from exc
    record_owner(staging)
    return staging


def _non_empty(path: Path) -> bool:
    if path.is_symlink() or path.is_file():
        return True
    try:
        return path.is_dir() and any(path.iterdir())
    except OSError:
        return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@contextlib.contextmanager
def _translate(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: cannot write ({reason})") from exc
