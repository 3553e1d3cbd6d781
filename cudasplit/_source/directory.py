"""The directory source: an unpacked redistributable, walked in sorted order.

The same name rules and member limit apply as to a tarball.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from cudasplit._model import Member, MemberType, PackageId
from cudasplit._source.base import HEAD_SIZE
from cudasplit._source.codecs import FdReader
from cudasplit._source.limits import Guard, Limits
from cudasplit._source.names import MAX_PATH_BYTES, check_text, normalise_member_path, short_name
from cudasplit._source.topdir import parse_top_dir, top_dir_fault
from cudasplit.errors import SourceError, UnsafeMemberError

__all__ = ["DirectorySource"]

class DirectorySource:
    """An unpacked redistributable (the ``*-archive`` dir itself, or a dir holding only it)."""

    def __init__(self, path: Path, *, package: PackageId | None = None,
                 strip_components: int | None = None, limits: Limits | None = None) -> None:
        self.root = _find_top(path, package, strip_components)
        self.description = str(path)
        self._package = package or parse_top_dir(self.root.name) or PackageId(self.root.name)
        # Only the member count applies (the bytes are on disk already, nothing expands).
        self._guard = Guard(limits or Limits(), self.description, lambda: 0)

    @property
    def package(self) -> PackageId:
        return self._package

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        inodes: dict[tuple[int, int], str] = {}
        for rel in self._walk():
            self._guard.count_member(rel)
            # The same depth, length and character rules as for archive members; checked
            # before the walk descends, so a 100,000-level tree is refused at level 65.
            normalise_member_path(rel, source=self.description)
            yield from self._member(rel, inodes)

    def _walk(self) -> Iterator[str]:
        """Relative paths in sorted pre-order, walked with an explicit stack (no recursion:
        a deep tree must not end in RecursionError)."""
        stack: list[tuple[str, Iterator[os.DirEntry[str]]]] = [("", self._list(self.root, ""))]
        while stack:
            prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            rel = prefix + entry.name
            yield rel
            if entry.is_dir(follow_symlinks=False):
                stack.append((rel + "/", self._list(Path(entry.path), rel)))

    def _list(self, directory: Path, rel: str) -> Iterator[os.DirEntry[str]]:
        # Sorting needs the whole listing in memory: a directory holding more entries than
        # the member limit is refused while it is read, not after.
        most = self._guard.limits.max_members
        try:
            with os.scandir(directory) as scan:
                listed = list(itertools.islice(scan, most + 1))
        except OSError as exc:
            raise SourceError(f"cannot list directory ({exc.strerror})",
                              source=self.description, member=short_name(rel or ".")) from exc
        if len(listed) > most:
            self._guard.count_member(rel or ".", at_least=most + 1)
        return iter(sorted(listed, key=lambda e: e.name))

    def _member(
        self, rel: str, inodes: dict[tuple[int, int], str]
    ) -> Iterator[tuple[Member, BinaryIO | None]]:
        full = self.root / rel
        check_text(rel, source=self.description, what="name")  # same rules as for tarballs
        st = full.lstat()
        mode, mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            check_text(target, source=self.description, what="link target", member=rel)
            if len(target.encode()) > MAX_PATH_BYTES:  # as for archives: O(length^2) to resolve
                raise UnsafeMemberError("link target too long", source=self.description,
                                        member=short_name(rel))
            yield Member(rel, MemberType.SYMLINK, mode, 0, target, mtime), None
        elif stat.S_ISDIR(st.st_mode):
            yield Member(rel, MemberType.DIR, mode, 0, None, mtime), None
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in inodes:
                yield Member(rel, MemberType.HARDLINK, mode, 0, inodes[key], mtime), None
                return
            inodes[key] = rel
            with self._open(full, rel) as fh:
                head = os.pread(fh.fileno(), HEAD_SIZE, 0)
                # Read from its descriptor: the bytes move into their output file with
                # copy_file_range, never through Python objects.
                stream = FdReader(fh.fileno(), self.description, is_pipe=False)
                yield (Member(rel, MemberType.FILE, mode, st.st_size, None, mtime, head),
                       cast(BinaryIO, stream))
        else:
            raise UnsafeMemberError("device node, FIFO or other special file",
                                    source=self.description, member=rel)

    @contextlib.contextmanager
    def _open(self, full: Path, rel: str) -> Iterator[BinaryIO]:
        try:
            fh = open(full, "rb")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise SourceError(f"cannot read ({exc.strerror})", source=self.description,
                              member=rel) from exc
        with fh:
            yield fh


def _find_top(path: Path, package: PackageId | None, strip_components: int | None) -> Path:
    """The directory holding the package's own tree (bin/, lib/, ...).

    Accepted without options: the ``*-archive`` dir itself, or a dir holding only it. With
    ``--package`` the given dir is the top dir; ``--strip-components N`` descends N levels
    of single subdirectories first.
    """
    if strip_components is not None:
        return _descend(path, strip_components)
    if parse_top_dir(path.name) is not None:
        return path
    children = _children(path)
    if len(children) == 1 and children[0].is_dir() and parse_top_dir(children[0].name):
        return children[0]
    if package is not None:
        return path
    fault = top_dir_fault(path.name)
    if fault is not None:
        raise SourceError(f"directory name {path.name!r}: {fault}; name the package "
                          "(package PNAME)", source=str(path))
    raise SourceError(f"directory name {path.name!r} is not <pname>-<platform>-<version>-archive "
                      "(an unpacked redistributable); name the package (package PNAME)",
                      source=str(path))


def _descend(path: Path, levels: int) -> Path:
    for _ in range(levels):
        children = _children(path)
        if len(children) != 1 or not children[0].is_dir() or children[0].is_symlink():
            raise SourceError(f"strip_components: {path} does not hold exactly one "
                              "directory", source=str(path))
        path = children[0]
    return path


def _children(path: Path) -> list[Path]:
    try:
        return [c for c in path.iterdir() if not c.name.startswith(".")]
    except OSError as exc:
        raise SourceError(f"cannot list directory ({exc.strerror})", source=str(path)) from exc
