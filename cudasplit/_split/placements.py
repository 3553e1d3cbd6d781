"""Where every placed member went, and the name indexes derived from it.

The place stage records each file here as it is written; the link planner, early patching
(``own_names``) and the end-of-run checks read it. One writer (the split loop's thread), so
worker threads only ever see copies: the place stage hands the early-patch worker a
``frozenset`` snapshot of the names beside a file, never this object.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from cudasplit._model import Kind
from cudasplit._source import member_parent

__all__ = ["Placed", "Placements"]


@dataclass(frozen=True, slots=True)
class Placed:
    output: str
    dest: str
    kind: Kind


@dataclass(slots=True)
class Placements:
    placed: dict[str, Placed] = field(default_factory=dict)           # archive path -> place
    dir_outputs: dict[str, set[str]] = field(default_factory=dict)    # archive dir -> outputs
    occupied: dict[tuple[str, str], str] = field(default_factory=dict)  # (output, dest) -> origin
    output_dirs: set[tuple[str, str]] = field(default_factory=set)    # (output, dir) with files
    # Regular files per (output, directory), as they are written: lets a file whose DT_NEEDED
    # all live beside it be patched while later members are still decoding.
    own_names: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    hardlink_roots: dict[str, str] = field(default_factory=dict)  # hard link -> its file

    def hardlink_root(self, path: str, link: str) -> str:
        """The file a hard link ``path -> link`` names: ``link``'s own file when ``link`` is an
        earlier hard link (GNU tar links it to the same file)."""
        root = self.hardlink_roots[path] = self.hardlink_roots.get(link, link)
        return root

    def remember(self, path: str, placed: Placed) -> None:
        self.placed[path] = placed
        self.occupied[(placed.output, placed.dest)] = path
        parent = member_parent(placed.dest)
        while parent and (placed.output, parent) not in self.output_dirs:
            self.output_dirs.add((placed.output, parent))
            parent = member_parent(parent)
        if placed.kind is not Kind.SYMLINK:
            key = (placed.output, member_parent(placed.dest))
            self.own_names.setdefault(key, set()).add(posixpath.basename(placed.dest))
        parent = member_parent(path)
        while parent:
            self.dir_outputs.setdefault(parent, set()).add(placed.output)
            parent = member_parent(parent)
        self.dir_outputs.setdefault("", set()).add(placed.output)

    def conflict(self, output: str, dest: str) -> str | None:
        """Why a file cannot be written at ``(output, dest)``: the archive names a path as file
        and as directory. The sink refuses the same (it sees the disk); asked here, a dry run
        refuses what the real run will."""
        if (output, dest) in self.output_dirs:
            return ("is a directory holding earlier members (the archive names it as file "
                    "and directory)")
        parent = member_parent(dest)
        while parent:
            origin = self.occupied.get((output, parent))
            placed = self.placed.get(origin) if origin is not None else None
            if placed is not None and placed.kind is not Kind.SYMLINK:
                return ("a parent directory is a file written for an earlier member (the "
                        "archive names it as file and directory)")
            parent = member_parent(parent)
        return None

    def holders(self, dest: str) -> set[str]:
        """Outputs holding ``dest`` as a member or as a directory with content."""
        return ({o for (o, d) in self.occupied if d == dest}
                | {o for (o, d) in self.output_dirs if d == dest})
