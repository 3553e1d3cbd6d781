"""The normalise and classify stages: archive path -> output path, member -> kind -> output.

Pure functions of the member record and the frozen rule set (no sink, no report), so ``explain``
and every planner get the same answer for a path. A member's facts are returned as a frozen
value (:class:`~cudasplit._split.reportwriter.MemberFacts`) for the report writer.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import Enum

from cudasplit._elf.read import kind_from_head
from cudasplit._model import Kind, Member, MemberType
from cudasplit._rulebook import Decision, Rename, Rule, RuleSet, Where
from cudasplit._split.libmajor import LibMajor
from cudasplit._split.reportwriter import MemberFacts

__all__ = ["ARCHIVE_NIX_SUPPORT", "AR_MAGIC", "BUILTIN", "PACKAGE_DROP", "Action", "Classified",
           "Normaliser", "classify_member", "fallback_output", "member_kind", "relocated",
           "unrelocated"]

AR_MAGIC = b"!<arch>\n"
PACKAGE_DROP = "dropped by the package table"
BUILTIN = "<builtin>"
# stdenv sources ``<output>/nix-support/setup-hook`` in every dependent's build and
# follows ``propagated-build-inputs``: an archive's own ``nix-support/`` would be build code.
ARCHIVE_NIX_SUPPORT = f"{BUILTIN}:archive-nix-support"
NIX_SUPPORT_NOTE = ("the archive's own nix-support/ is data, not build code (stdenv would "
                    "source or follow it in every dependent); not placed")


def is_nix_support(dest: str) -> bool:
    """Whether an output path lies in (or is) the output's ``nix-support/``."""
    return dest == "nix-support" or dest.startswith("nix-support/")


def member_kind(member: Member) -> Kind:
    """Content-aware kind: ELF files and ``ar`` archives are recognised by magic bytes."""
    if member.type is MemberType.DIR:
        return Kind.DIR
    if member.type is MemberType.SYMLINK:
        return Kind.SYMLINK
    if member.type is MemberType.HARDLINK:
        return Kind.HARDLINK
    elf_kind = kind_from_head(member.head)
    if elf_kind is not None:
        return elf_kind
    if member.head.startswith(AR_MAGIC) or member.path.endswith(".a"):
        return Kind.STATIC
    return Kind.FILE


def fallback_output(output: str, allowed: frozenset[str] | None) -> str:
    """Nixpkgs' fallback when an output does not exist: include -> dev -> out, others -> out."""
    if allowed is None or output in allowed:
        return output
    if output == "include" and "dev" in allowed:
        return "dev"
    return "out"


@dataclass(frozen=True, slots=True)
class Normaliser:
    """Archive path -> (dest, rename used, reason to drop). ``dest`` None: a lifted directory.

    Order: package lift (``nsight-systems/<ver>/``), then ``lib/<cudaMajor>/`` lifting
    (multi-CUDA packages; other majors are dropped, as Nixpkgs does), then renames.
    """

    ruleset: RuleSet
    where: Where
    lib_major: LibMajor   # lib/<major>/ lifting (libmajor.py), learnt as members arrive

    def __call__(self, path: str) -> tuple[str | None, Rename | None, str | None]:
        lifted = self.ruleset.package.lift_path(path)
        if lifted is None:
            return None, None, None
        moved = lifted != path
        lifted, lib_drop = self.lib_major.route(lifted)
        if lib_drop is not None:
            return None, None, lib_drop
        # Drops name archive paths before renames: cuda_cccl 13 deletes the stale top-level
        # include/nv/ *before* include/cccl/nv/ is un-nested into its place.
        if self.ruleset.package.dropped(lifted, self.where, lifted=moved):
            return None, None, PACKAGE_DROP + " (drop)"
        dest, rename = self.ruleset.normalise(lifted)
        if dest.endswith(".pc") and any(
                e.drop and e.matches(posixpath.basename(dest), self.where)
                for e in self.ruleset.package.pkgconfig_edits):
            return None, None, PACKAGE_DROP + " (pkgconfig_edits)"
        return dest, rename, None

    def dest(self, path: str) -> str | None:
        return self(path)[0]


class Action(Enum):
    SKIP = "skip"               # dropped, or a directory (created where its content lands)
    SYMLINK = "symlink"         # deferred to the link plan
    HARDLINK = "hardlink"       # deferred to the link plan
    PLACE = "place"             # a file: written to its output


@dataclass(frozen=True, slots=True)
class Classified:
    facts: MemberFacts          # what the report says of the member, as classified
    action: Action
    kind: Kind
    decision: Decision
    rename: Rename | None


def relocated(decision: Decision, dest: str) -> str:
    """A profile rule's ``relocate`` (conda-forge: ``targets/x86_64-linux/``)."""
    rule = decision.rule_obj
    return dest if rule is None or not rule.relocate else rule.placed_at(dest)


def unrelocated(rule: Rule | None, dest: str) -> str:
    """The path a relocated member had before its rule moved it (where ``link_in`` links)."""
    if rule is None or not rule.relocate or not dest.startswith(rule.relocate):
        return dest
    return dest[len(rule.relocate):]


def classify_member(member: Member, normalise: Normaliser,
                    allowed: frozenset[str] | None) -> Classified:
    """The normalise and classify stages for one member: its record and what to do with it."""
    kind = member_kind(member)
    dest, rename, dropped = normalise(member.path)
    decision = normalise.ruleset.classify(dest or member.path, kind, allowed)
    output, rule, note = None, str(decision.rule), None
    action = Action.SKIP
    if dropped is not None:
        why = "package-drop" if dropped.startswith(PACKAGE_DROP) else "cuda-major"
        dest, rule, note = None, f"{BUILTIN}:{why}", dropped
    elif member.type is MemberType.DIR or dest is None:
        rule, dest = f"{BUILTIN}:directory", None
        note = "directories are created where their content lands"
    elif is_nix_support(dest):
        dest, rule, note = None, ARCHIVE_NIX_SUPPORT, NIX_SUPPORT_NOTE
    elif decision.output is None and decision.rule_obj is not None:
        # An explicit drop rule wins over link placement too (tensorrt's bin -> targets/…).
        dest, note = None, "dropped by rule"
    elif member.type is MemberType.SYMLINK:
        action = Action.SYMLINK
        dest = relocated(decision, dest)
    elif member.type is MemberType.HARDLINK:
        action = Action.HARDLINK
    elif decision.output is None:
        dest, note = None, "dropped by rule"
    else:
        action = Action.PLACE
        output = fallback_output(decision.output, allowed)
        dest = relocated(decision, dest)
    facts = MemberFacts(member.path, kind.value, output, dest, rule, member.size, member.link,
                        note)
    return Classified(facts, action, kind, decision, rename)
