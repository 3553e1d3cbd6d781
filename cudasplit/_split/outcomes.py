"""The values stages hand to the report writer: a member's facts, a placement, an ELF outcome.

Frozen: a stage that learns more about a member (the link planner, the patch stage) returns a
new value instead of changing the old one, and only :mod:`~cudasplit._split.reportwriter` turns
them into report records.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudasplit._report import Problem

__all__ = ["ElfOutcome", "MemberFacts", "PlaceOutcome"]


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What classification (and, for links, the link planner) says about one member."""

    path: str                 # inside the archive, top directory stripped
    kind: str
    output: str | None        # None: dropped or not placed
    dest: str | None
    rule: str
    size: int = 0
    link: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ElfOutcome:
    """What the patch stage found, planned and did for one ELF member."""

    patch: str | None = None
    runpath_before: str | None = None
    runpath_after: str | None = None
    runpath_tag: str | None = None
    needed_unresolved: tuple[str, ...] | None = None
    interpreter_before: str | None = None
    interpreter_after: str | None = None
    dlopen: tuple[tuple[str, str | None], ...] | None = None  # (name, providing package)
    note: str | None = None   # replaces the member's note when set


@dataclass(frozen=True, slots=True)
class PlaceOutcome:
    """What placing one file did: the output counted, an earlier copy it replaced (no longer
    patched), and the rewrites' warnings and problems."""

    output: str
    size: int
    superseded: tuple[int, ElfOutcome] | None = None   # (earlier member's position, outcome)
    warnings: tuple[Problem, ...] = ()
    problems: tuple[Problem, ...] = ()
