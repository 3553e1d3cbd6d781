"""Symlinks followed inside the archive namespace, and the text a placed symlink gets.

Read-only over the complete :class:`~cudasplit._split.placements.Placements` (the stream has ended):
a symlink resolves to a placed file, to the outputs holding a directory, or to nothing
(dangling, a loop, or out of the package root).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cudasplit._model import Kind
from cudasplit._source import member_parent
from cudasplit._split.placements import Placed, Placements

__all__ = ["LinkResolver", "escapes", "join_link", "link_text"]


# The kernel follows at most 40 symlinks (ELOOP): a path needing more resolves to nothing.
MAX_HOPS = 40
Target = Placed | frozenset[str] | None


@dataclass(frozen=True, slots=True)
class LinkResolver:
    """Symlinks followed inside the archive namespace, once the stream has ended.

    Each path's resolution is remembered with its length, so N links cost O(N) however they
    chain (90,000 chained links took 27 s, each walking the next 40 again)."""

    placements: Placements
    index: Mapping[str, str]   # archive path -> symlink text
    # The symlinks resolution follows: those that will be created (default: all of index).
    follow: Mapping[str, str] | None = None
    # path -> (where it ends, how many paths the walk visits from it, itself included)
    _memo: dict[str, tuple[Target, int]] = field(default_factory=dict)

    def resolve(self, path: str) -> Placed | set[str] | None:
        """A placed file, the outputs of a directory, or None (dangling, a loop, more than
        40 links, or out of the package root)."""
        target, visits = self._walk(path)
        if target is None or visits > MAX_HOPS + 1:
            return None
        return set(target) if isinstance(target, frozenset) else target

    def _walk(self, path: str) -> tuple[Target, int]:
        """Follow ``path`` until a remembered path, an end, or a loop (iteratively: chains may
        be longer than Python's recursion limit); remember every path on the way."""
        walk: list[str] = []
        on_walk: set[str] = set()
        current: str | None = path
        end: tuple[Target, int] = (None, 0)
        while current is not None:
            if current in self._memo:
                end = self._memo[current]
                break
            if current in on_walk:  # a loop: every path on the walk leads into it
                end = (None, 0)
                break
            on_walk.add(current)
            walk.append(current)
            target, current = self._step(current)
            if current is None:
                end = (target, 0)
        target, visits = end
        for step in reversed(walk):
            visits += 1
            self._memo[step] = (target, visits if target is not None else 0)
        return self._memo.get(path, end)

    def _step(self, path: str) -> tuple[Target, str | None]:
        """One step of the walk: where ``path`` ends, or the next path to follow."""
        links = self.index if self.follow is None else self.follow
        placed = self.placements.placed.get(path)
        if placed is not None and placed.kind is not Kind.SYMLINK:
            return placed, None
        link = links.get(path)
        if link is not None:
            return None, join_link(path, link)
        if path in self.placements.dir_outputs:
            return frozenset(self.placements.dir_outputs[path]), None
        parent = member_parent(path)
        while parent:  # ``a/b/c`` where ``a/b`` is itself a symlink: substitute its target
            link = links.get(parent)
            if link is not None:
                joined = join_link(parent, link)
                if joined is None:
                    return None, None
                rest = path[len(parent) + 1:]
                return None, posixpath.join(joined, rest) if joined else rest
            parent = member_parent(parent)
        return None, None

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
