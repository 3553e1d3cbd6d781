"""Placement guards: where a member may be created under an output root, and what is refused.

Archives come from the internet and cudasplit may run as root, so nothing is created outside
an output root (:func:`~cudasplit._sinks.base.safe_join`), through a symlink, or over a
directory holding earlier members; OS errors become one-line :class:`OutputError`\\ s that
name the final path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

from cudasplit._sinks.base import safe_join
from cudasplit.errors import OutputError

__all__ = ["PlacementGuard", "check_roots", "translate"]


class PlacementGuard:
    """Checks one path under an output root before it is created.

    ``shown`` names a working path as the user will find it (never the staging dir).
    ``check_parents``: whether a symlink may already be in the tree, so that every parent
    is checked before each write; a fresh staging dir holds none until :meth:`saw_symlink`.
    """

    def __init__(self, shown: Callable[[Path], Path], *, check_parents: bool) -> None:
        self._shown = shown
        self.check_parents = check_parents

    def saw_symlink(self) -> None:
        self.check_parents = True

    def existing(self, root: Path, dest: str) -> Path:
        """An earlier member to link to: inside ``root``, reached through no symlink."""
        path = safe_join(root, dest)
        self._refuse_links_above(root, path)
        return path

    def new(self, root: Path, dest: str) -> Path:
        """Where a new member goes, its parents made and an earlier member of that name gone."""
        path = self.existing(root, dest)
        shown = self._shown(path)
        with translate(shown):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise OutputError(f"{shown}: a parent directory is a file written "
                                  "for an earlier member (the archive names it as file and "
                                  "directory)") from None
            if os.path.isdir(path) and not os.path.islink(path):
                raise OutputError(f"{shown}: is a directory holding earlier members "
                                  "(the archive names it as file and directory)")
            if os.path.lexists(path):
                # A later member of the same name replaces the earlier one (tar semantics);
                # unlinking first means we never write through a symlink.
                _remove(path)
        return path

    def _refuse_links_above(self, root: Path, path: Path) -> None:
        """Never create anything through a symlink, whatever placed it there."""
        if not self.check_parents:
            return
        current = root
        for part in path.relative_to(root).parts[:-1]:
            current = current / part
            if os.path.islink(current):
                raise OutputError(f"{self._shown(path)}: refusing to write through the "
                                  f"symlink {self._shown(current)}")


def check_roots(final: Mapping[str, Path], created: Collection[str], *, staged: bool,
                overwrite: bool) -> None:
    """Refuse output roots that already hold files, unless ``overwrite``: a staged run moves
    whole directories into place; an unstaged one must not mix its files with others'."""
    if overwrite:
        return
    for name, root in final.items():
        if not staged and name not in created and _non_empty(root):
            raise OutputError(f"{root}: output directory for {name!r} already contains files "
                              "(overwrite replaces it)")
        if staged and _non_empty(root):
            raise OutputError(f"{root}: output directory for {name!r} already exists "
                              "(overwrite replaces it)")


@contextlib.contextmanager
def translate(path: Path) -> Iterator[None]:
    """OSError -> OutputError naming ``path`` and the reason ("disk full" for ENOSPC)."""
    try:
        yield
    except OSError as exc:
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: cannot write ({reason})") from exc


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
