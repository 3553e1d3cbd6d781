"""One rule against one member: the :class:`Rule` and :class:`Rename` records and kind matching.

A rule matches a member when its kind is one the rule names (``file`` and ``elf`` stand for
groups of kinds) and its path matches one of the rule's globs. A rename moves a directory
prefix. Which rule wins among several is :class:`~cudasplit._ruleset.RuleSet`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._globs import Glob
from ._model import Kind

__all__ = ["KIND_NAMES", "Rename", "Rule", "RuleRef", "kind_matches"]

# "file" matches every regular file whatever its content; "elf" every ELF kind.
KIND_NAMES = frozenset({k.value for k in Kind} | {"elf"})


@dataclass(frozen=True, slots=True)
class RuleRef:
    file: str
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.name}"


@dataclass(frozen=True, slots=True)
class Rule:
    ref: RuleRef
    globs: tuple[Glob, ...]
    kinds: frozenset[str] | None
    output: str | None
    action: str = "place"
    patch: bool | None = None
    keep_runpath: bool | None = None
    runpath_append: tuple[str, ...] = ()
    transform: str | None = None
    description: str = ""
    # Where the member goes when ``output`` is missing, instead of the next matching rule.
    fallback: str | None = None

    def matches(self, path: str, kind: Kind) -> bool:
        if self.kinds is not None and not kind_matches(self.kinds, kind):
            return False
        return any(g.matches(path) for g in self.globs)


@dataclass(frozen=True, slots=True)
class Rename:
    ref: RuleRef
    source: str  # prefix ending in "/"; without one, a single file (``file = true``)
    target: str  # prefix ending in "/" (a file rename: the new path)
    link_back: bool = False

    def apply(self, path: str) -> str | None:
        if not self.source.endswith("/"):  # nsight_compute's ncu -> bin/ncu
            return self.target if path == self.source else None
        # Only paths strictly below the prefix move: a member named exactly like the prefix
        # (``lib64`` as a symlink to ``lib``) keeps its name.
        if path.startswith(self.source):
            return self.target + path[len(self.source):]
        return None


def kind_matches(kinds: frozenset[str], kind: Kind) -> bool:
    if kind.value in kinds:
        return True
    regular = kind in (Kind.FILE, Kind.ELF_SHARED, Kind.ELF_EXEC, Kind.ELF_OTHER, Kind.STATIC)
    if "file" in kinds and regular:
        return True
    return "elf" in kinds and kind.value.startswith("elf-")
