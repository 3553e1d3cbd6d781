"""Symlinks followed inside the archive namespace, and the text a placed symlink gets.

Read-only over the complete :class:`~cudasplit._placements.Placements` (the stream has ended):
a symlink resolves to a placed file, to the outputs holding a directory, or to nothing
(dangling, a loop, or out of the package root).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ._model import Kind
from ._placements import Placed, Placements
from ._sources import member_parent

__all__ = ["LinkResolver", "escapes", "join_link", "link_text"]


@dataclass(frozen=True, slots=True)
class LinkResolver:
    """Symlinks followed inside the archive namespace, once the stream has ended."""

    placements: Placements
    index: Mapping[str, str]   # archive path -> symlink text

    def resolve(self, path: str) -> Placed | set[str] | None:
        """A placed file, the outputs of a directory, or None (dangling, a loop, or out)."""
        return self._resolve(path, set())

    def refusal(self, path: str, link: str) -> tuple[str, str] | None:
        """Why a symlink is not placed whatever its target: it leaves the package root (like
        tarfile's "data" filter), or a file of that name or a symlinked parent came first."""
        if join_link(path, link) is None:
            return ("unsafe-symlink",
                    f"symlink target {link!r} leaves the package root; refused")
        return self.clash(path)

    def clash(self, path: str) -> tuple[str, str] | None:
        """Files win over symlinks of the same name, and no symlink is placed below another:
        creating it would replace earlier members or be written through the other link."""
        placed = self.placements.placed.get(path)
        if ((placed is not None and placed.kind is not Kind.SYMLINK)
                or path in self.placements.dir_outputs):
            return ("duplicate-member",
                    "a file or directory of the same name came first; symlink skipped")
        parent = member_parent(path)
        while parent:
            if self.index.get(parent) is not None:
                return "under-symlink", f"lies below the symlink {parent!r}; skipped"
            parent = member_parent(parent)
        return None

    def _resolve(self, path: str, seen: set[str]) -> Placed | set[str] | None:
        """Follow symlinks inside the archive namespace: a placed file, a dir's outputs, or None."""
        if path in seen or len(seen) > 40:
            return None
        seen.add(path)
        placed = self.placements.placed.get(path)
        if placed is not None and placed.kind is not Kind.SYMLINK:
            return placed
        link = self.index.get(path)
        if link is not None:
            joined = join_link(path, link)
            return None if joined is None else self._resolve(joined, seen)
        if path in self.placements.dir_outputs:
            return set(self.placements.dir_outputs[path])
        return self._resolve_through_parent(path, seen)

    def _resolve_through_parent(self, path: str, seen: set[str]) -> Placed | set[str] | None:
        """``a/b/c`` where ``a/b`` is itself a symlink: substitute the parent's target."""
        parent = member_parent(path)
        while parent:
            link = self.index.get(parent)
            if link is not None:
                joined = join_link(parent, link)
                if joined is None:
                    return None
                rest = path[len(parent) + 1:]
                return self._resolve(posixpath.join(joined, rest) if joined else rest, seen)
            parent = member_parent(parent)
        return None


def link_text(normalise: Callable[[str], str | None], original: str, link_dest: str,
              immediate: str) -> str:
    """A symlink's text: the archive's relative text unless normalisation moved one side.

    Only canonical text is kept: the kernel resolves ``a/../b`` through ``a``'s target
    when ``a`` is a symlink, so ``up/../..`` can climb further than ``normpath`` says.
    """
    immediate_dest = normalise(immediate) or immediate
    link_dir = member_parent(link_dest)
    if (_canonical_link(original)
            and posixpath.normpath(posixpath.join(link_dir, original)) == immediate_dest):
        return original
    return posixpath.relpath(immediate_dest or ".", link_dir or ".")


def escapes(link_path: str, target: str) -> bool:
    """Whether a symlink's target is absolute or climbs out of the package root (an empty
    target points nowhere and is no escape: it is reported as dangling)."""
    return bool(target) and join_link(link_path, target) is None


def join_link(link_path: str, target: str) -> str | None:
    """Archive path a relative link points at; None when it is absolute or climbs out."""
    if target.startswith("/") or not target:
        return None
    joined = posixpath.normpath(posixpath.join(member_parent(link_path), target))
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == "..":
        return None
    return joined


def _canonical_link(text: str) -> bool:
    """``../../a/b``: every ``..`` leads, no ``.`` or empty component follows."""
    parts = text.split("/")
    while parts and parts[0] == "..":
        parts.pop(0)
    return all(p not in ("", ".", "..") for p in parts)
