"""The link plan: symlinks, hard links and generated links, placed once the stream has ended.

Symlinks may name members that come later in the archive, so they are deferred and resolved
against the complete :class:`~cudasplit._placements.Placements`: a symlink follows its target's
output (or every output holding a directory target), never dangles and never climbs out of
the package root. The planner returns what to create (:class:`SymlinkOp`, :class:`HardlinkOp`)
and which hard-linked ELF copies need their own patch; the split loop hands the ops to the sink.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ._classify import BUILTIN, fallback_output
from ._model import Kind, Member
from ._pkgtable import Where
from ._placements import Placed, Placements
from ._report import MemberRecord
from ._rules import Rename, Rule, RuleSet
from ._sources import member_parent

__all__ = ["BUILTIN", "ElfCopy", "HardlinkOp", "LinkOp", "LinkPlanner", "SymlinkOp", "join_link"]

Complain = Callable[[str, str | None, str], None]   # (code, archive path, message)


@dataclass(frozen=True, slots=True)
class SymlinkOp:
    output: str
    dest: str
    target: str


@dataclass(frozen=True, slots=True)
class HardlinkOp:
    output: str
    dest: str
    src_output: str
    src_dest: str


@dataclass(frozen=True, slots=True)
class ElfCopy:
    """A hard link to an ELF file that landed in another output: a copy with its own RUNPATH."""

    record: MemberRecord
    output: str
    dest: str
    rule: Rule | None


LinkOp = SymlinkOp | HardlinkOp


@dataclass(slots=True)
class LinkPlanner:
    ruleset: RuleSet
    where: Where
    allowed: frozenset[str] | None
    normalise: Callable[[str], str | None]
    placements: Placements
    problem: Complain
    warn: Complain
    symlinks: list[tuple[Member, MemberRecord]] = field(default_factory=list)
    hardlinks: list[tuple[Member, MemberRecord]] = field(default_factory=list)
    link_backs: set[tuple[str, Rename]] = field(default_factory=set)
    pc_aliases: list[tuple[str, str, str]] = field(default_factory=list)  # output, dest, alias
    ops: list[LinkOp] = field(default_factory=list)
    elf_copies: list[ElfCopy] = field(default_factory=list)
    _resolver: LinkResolver | None = None   # once the stream has ended

    # -- during the stream ------------------------------------------------------------------

    def defer_symlink(self, member: Member, record: MemberRecord) -> None:
        self.symlinks.append((member, record))

    def defer_hardlink(self, member: Member, record: MemberRecord) -> None:
        """Tar semantics: a hard link names an *earlier* file. Links are placed at the end, so
        without this check a link to itself, to a later member or to a symlink could resolve."""
        if member.link in self.placements.placed:
            self.hardlinks.append((member, record))
            return
        record.dest = None
        self.warn("dangling-hardlink", member.path,
                  f"hard link to {member.link!r}, which is not an earlier placed file; skipped")

    # -- after the stream -------------------------------------------------------------------

    def plan(self) -> None:
        index = {m.path: m.link for m, _ in self.symlinks if m.link is not None}
        self._resolver = LinkResolver(self.placements, index)
        for member, record in self.hardlinks:
            self._place_hardlink(member, record)
        for member, record in self.symlinks:
            self._place_symlink(member, record)
        self._place_link_backs()
        self._place_pc_aliases()
        self._place_extra_links()

    def take(self) -> tuple[list[LinkOp], list[ElfCopy]]:
        """The ops planned so far (handed over once: a later :meth:`add_link` starts anew)."""
        ops, copies = self.ops, self.elf_copies
        self.ops, self.elf_copies = [], []
        return ops, copies

    def add_link(self, output: str, dest: str, text: str, origin: str) -> None:
        """Create a symlink unless the name is taken: by a member, an earlier link, or a real
        directory holding files (the link would replace it)."""
        if (output, dest) in self.placements.occupied:
            return
        if (output, dest) in self.placements.output_dirs:
            self.warn("link-over-directory", origin,
                      f"not placed in {output}: a directory of that name holds files")
            return
        self.ops.append(SymlinkOp(output, dest, text))
        self.placements.occupied[(output, dest)] = origin

    def _place_hardlink(self, member: Member, record: MemberRecord) -> None:
        assert member.link is not None
        source = self.placements.placed.get(member.link)
        if source is None:
            record.dest = None
            self.warn("dangling-hardlink", member.path,
                      f"hard link to {member.link!r}, which was not placed")
            return
        decision = self.ruleset.classify(record.dest or member.path, source.kind, self.allowed)
        if decision.output is None:
            record.dest, record.note, record.rule = None, "dropped by rule", str(decision.rule)
            return
        output = fallback_output(decision.output, self.allowed)
        record.output, record.rule = output, str(decision.rule)
        assert record.dest is not None
        self.ops.append(HardlinkOp(output, record.dest, source.output, source.dest))
        self.placements.remember(member.path, Placed(output, record.dest, source.kind))
        if output != source.output and source.kind.value.startswith("elf-"):
            self.elf_copies.append(ElfCopy(record, output, record.dest, decision.rule_obj))

    def _place_symlink(self, member: Member, record: MemberRecord) -> None:
        assert member.link is not None and record.dest is not None
        if join_link(member.path, member.link) is None:
            # Like tarfile's "data" filter: a link that leaves the package root is refused
            # whatever else the archive does with its name.
            record.dest = None
            self.problem("unsafe-symlink", member.path,
                         f"symlink target {member.link!r} leaves the package root; refused")
            return
        assert self._resolver is not None
        clash = self._resolver.clash(member.path)
        if clash is not None:
            record.dest = None
            self.problem(clash[0], member.path, clash[1])
            return
        target = self._resolver.resolve(member.path)
        if target is None:
            record.dest = None
            self.problem("dangling-symlink", member.path,
                         f"symlink target {member.link!r} is not in the archive "
                         "(or was dropped); link skipped")
            return
        self._follow_target(member, record, target)

    def _follow_target(self, member: Member, record: MemberRecord,
                       target: Placed | set[str]) -> None:
        assert member.link is not None and record.dest is not None
        immediate = join_link(member.path, member.link)
        assert immediate is not None
        outputs = [target.output] if isinstance(target, Placed) else sorted(target)
        text = self._link_text(member.link, record.dest, immediate)
        record.output, record.link = outputs[0], text
        own = record.rule
        record.rule = f"{BUILTIN}:follow-target"
        record.note = f"placed with its target (own rule {own})" + (
            f"; also in {', '.join(outputs[1:])}" if len(outputs) > 1 else "")
        for output in outputs:
            self.add_link(output, record.dest, text, member.path)
        if isinstance(target, Placed):
            self.placements.placed[member.path] = Placed(target.output, record.dest, Kind.SYMLINK)

    def _link_text(self, original: str, link_dest: str, immediate: str) -> str:
        """Keep the archive's relative text unless normalisation moved one side.

        Only canonical text is kept: the kernel resolves ``a/../b`` through ``a``'s target
        when ``a`` is a symlink, so ``up/../..`` can climb further than ``normpath`` says.
        """
        immediate_dest = self.normalise(immediate) or immediate
        link_dir = member_parent(link_dest)
        if (_canonical_link(original)
                and posixpath.normpath(posixpath.join(link_dir, original)) == immediate_dest):
            return original
        return posixpath.relpath(immediate_dest or ".", link_dir or ".")

    def _place_link_backs(self) -> None:
        """``lib64 -> lib`` in each output that received files from a real ``lib64/``."""
        for output, rename in sorted(self.link_backs, key=lambda x: (x[0], x[1].source)):
            dest = rename.source.rstrip("/")
            text = posixpath.relpath(rename.target.rstrip("/"), member_parent(dest) or ".")
            self.add_link(output, dest, text, f"{BUILTIN}:{rename.ref}")

    def _place_pc_aliases(self) -> None:
        """``cuda.pc -> cuda-12.9.pc``: pkg-config users ask for the unversioned name."""
        for output, dest, alias in self.pc_aliases:
            self.add_link(output, posixpath.join(member_parent(dest), alias),
                          posixpath.basename(dest), f"{BUILTIN}:pkgconfig-alias")

    def _place_extra_links(self) -> None:
        """Package ``stub_links``: created in every output holding the target, if still free."""
        for dest, target in sorted(self.ruleset.package.stub_links.items()):
            target_dest = posixpath.normpath(posixpath.join(member_parent(dest), target))
            # A link to a directory (cuda_cccl's include/cccl -> .) goes where it has content.
            for output in sorted(self.placements.holders(target_dest)):
                self.add_link(output, dest, target, f"{BUILTIN}:stub-link")
        for entry in self.ruleset.package.link_into:  # tensorrt's include/onnx
            for output, dest, target in entry.links(list(self.placements.occupied), self.where):
                self.add_link(output, dest, target, f"{BUILTIN}:link-into")


@dataclass(frozen=True, slots=True)
class LinkResolver:
    """Symlinks followed inside the archive namespace, once the stream has ended."""

    placements: Placements
    index: Mapping[str, str]   # archive path -> symlink text

    def resolve(self, path: str) -> Placed | set[str] | None:
        """A placed file, the outputs of a directory, or None (dangling, a loop, or out)."""
        return self._resolve(path, set())

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
