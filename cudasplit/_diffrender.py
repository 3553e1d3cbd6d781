"""``cudasplit diff``'s text: a release diff as lines, big moves grouped by directory."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._diff import Change, ReleaseDiff

__all__ = ["render_diff"]


def render_diff(diff: ReleaseDiff, members: bool) -> list[str]:
    lines = [f"--- {diff.old}", f"+++ {diff.new}"]
    for what, sign in (("package-removed", "-"), ("package-added", "+")):
        lines += [f"{sign} package {c.package} {c.old or c.new}" for c in diff.of(what)]
    lines += [f"~ package renamed {c.old} -> {c.new} ({c.path})"
              for c in diff.of("package-renamed")]
    lines += [f"~ package {c.package} {c.old} -> {c.new}" for c in diff.of("version")]
    for what, sign in (("platform-removed", "-"), ("platform-added", "+")):
        lines += [f"{sign} platform {c.package}: {c.path}" for c in diff.of(what)]
    lines += _size_lines(diff)
    lines += [f"{'+' if c.what == 'output-added' else '-'} output {c.package}:{c.path}"
              for c in diff.changes if c.what in ("output-added", "output-removed")]
    for what in ("package-moved", "relocated", "member-moved", "member-removed", "member-added"):
        lines += _grouped(diff.of(what), what, members)
    lines += [f"soname-moved {c.path}: {c.old} -> {c.new}" for c in diff.of("soname-moved")]
    for what, sign in (("soname-removed", "-"), ("soname-added", "+"),
                       ("needed-removed", "-"), ("needed-added", "+"),
                       ("dlopen-removed", "-"), ("dlopen-added", "+")):
        label = what.split("-")[0]
        lines += [f"{sign} {label} {c.package}: {c.old or c.new}" for c in diff.of(what)]
    return lines


def _size_lines(diff: ReleaseDiff) -> list[str]:
    lines = []
    for package, outs in diff.sizes.items():
        for output, (before, after) in outs.items():
            if before != after:
                lines.append(f"  size {package}:{output} {before:,} -> {after:,} "
                             f"({after - before:+,})")
    return lines


def _grouped(changes: tuple[Change, ...], what: str, members: bool) -> list[str]:
    """One line per directory and (from, to) pair unless ``members``: 1,700 CCCL headers
    moving read as one line."""
    if members:
        return [f"{what} {c.path}: {old} -> {new}" for c in changes
                for old, new in [_ends(c, member=True)[1:]]]
    groups: dict[tuple[str, str, str], int] = {}
    for c in changes:
        key = _ends(c)
        groups[key] = groups.get(key, 0) + 1
    return [f"{what} {where} ({n} file{'s' if n > 1 else ''}): {old} -> {new}"
            for (where, old, new), n in sorted(groups.items())]


def _ends(c: Change, *, member: bool = False) -> tuple[str, str, str]:
    """(directory group, from, to) as the text shows them (``member``: whole paths)."""
    where = c.path if member else _group_dir(c.path)
    if c.what == "member-removed":
        return where, f"{c.package}:{c.old}", "-"
    if c.what == "member-added":
        return where, "-", f"{c.package}:{c.new}"
    if c.what == "relocated":
        place, _, new_path = c.new.rpartition(":")
        rest = c.path[len(where):] if where.endswith("/") else ""
        same_tail = bool(rest) and new_path.endswith("/" + rest)
        new_dir = new_path[:len(new_path) - len(rest)] if same_tail else new_path
        return where, c.old, f"{place} {new_dir}"
    return where, c.old, c.new


def _group_dir(path: str) -> str:
    parts = posixpath.dirname(path).split("/")
    return "/".join(parts[:2]) + "/" if parts != [""] else path
