"""The normalise and classify stages: archive path -> output path, member -> kind -> output.

Pure functions of the member record and the frozen rule set (no sink, no report), so ``explain``
and every planner get the same answer for a path.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from .elf import kind_from_head
from .model import Kind, Member, MemberType
from .pkgtable import Where
from .rules import Rename, RuleSet

__all__ = ["AR_MAGIC", "PACKAGE_DROP", "Normaliser", "fallback_output", "member_kind"]

AR_MAGIC = b"!<arch>\n"
_CUDA_MAJOR_DIR = re.compile(r"^lib/(\d{2})/")
PACKAGE_DROP = "dropped by the package table"


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
    cuda_major: str | None

    def __call__(self, path: str) -> tuple[str | None, Rename | None, str | None]:
        lifted = self.ruleset.package.lift_path(path)
        if lifted is None:
            return None, None, None
        match = _CUDA_MAJOR_DIR.match(lifted)
        if match is not None and self.cuda_major is not None:
            if match[1] != self.cuda_major.split(".")[0]:
                return None, None, f"built for CUDA {match[1]}, not {self.cuda_major}"
            lifted = "lib/" + lifted[match.end():]
        # Drops name archive paths before renames: cuda_cccl 13 deletes the stale top-level
        # include/nv/ *before* include/cccl/nv/ is un-nested into its place.
        if self.ruleset.package.dropped(lifted, self.where):
            return None, None, PACKAGE_DROP + " (drop)"
        dest, rename = self.ruleset.normalise(lifted)
        if dest.endswith(".pc") and any(
                e.drop and e.matches(posixpath.basename(dest), self.where)
                for e in self.ruleset.package.pkgconfig_edits):
            return None, None, PACKAGE_DROP + " (pkgconfig_edits)"
        return dest, rename, None

    def dest(self, path: str) -> str | None:
        return self(path)[0]
