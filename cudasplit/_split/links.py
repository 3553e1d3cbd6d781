"""The link plan: symlinks, hard links and generated links, placed once the stream has ended.

Symlinks may name members that come later in the archive, so they are deferred and resolved
against the complete :class:`~cudasplit._split.placements.Placements`: a symlink follows its
target's output (or every output holding a directory target), never dangles and never climbs out of
the package root. The planner returns what to create (:class:`SymlinkOp`, :class:`HardlinkOp`),
which hard-linked ELF copies need their own patch, and the link members' revised facts (where
each went, or why not) for the report writer; the split loop hands the ops to the sink.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cudasplit._model import Kind, Member
from cudasplit._rulebook import Rename, Rule, RuleSet, Where
from cudasplit._source import member_parent
from cudasplit._split.classify import BUILTIN, fallback_output, relocated, unrelocated
from cudasplit._split.linkresolve import LinkResolver, join_link, link_text
from cudasplit._split.placements import Placed, Placements
from cudasplit._split.reportwriter import MemberFacts

__all__ = ["BUILTIN", "EVERY_OUTPUT", "Deferred", "ElfCopy", "HardlinkOp", "LinkOp",
           "LinkPlanner", "SymlinkOp", "join_link", "link_text"]

Complain = Callable[[str, str | None, str], None]   # (code, archive path, message)
# The origin of an every_output copy in Placements.occupied: not what makes an output non-empty.
EVERY_OUTPUT = f"{BUILTIN}:every-output"


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

    position: int       # the hard link member's, in source order
    path: str
    output: str
    dest: str
    rule: Rule | None
    src_output: str = ""  # the file it was copied from
    src_dest: str = ""


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
    symlinks: list[Deferred] = field(default_factory=list)
    hardlinks: list[Deferred] = field(default_factory=list)
    revised: list[tuple[int, MemberFacts]] = field(default_factory=list)  # link members' facts
    link_backs: set[tuple[str, Rename]] = field(default_factory=set)
    pc_aliases: list[tuple[str, str, str]] = field(default_factory=list)  # output, dest, alias
    ops: list[LinkOp] = field(default_factory=list)
    elf_copies: list[ElfCopy] = field(default_factory=list)
    # Files whose rule asks for a link_in link or a copy in every output (profiles).
    placed_by_rule: list[tuple[str, Placed, Rule]] = field(default_factory=list)
    _resolver: LinkResolver | None = None   # once the stream has ended
    _link_dests: dict[str, str] = field(default_factory=dict)  # symlink path -> its dest

    # -- during the stream ------------------------------------------------------------------

    def defer_symlink(self, member: Member, facts: MemberFacts, position: int) -> None:
        self.symlinks.append(Deferred(member, facts, position))

    def defer_hardlink(self, member: Member, facts: MemberFacts, position: int) -> None:
        """Tar semantics: a hard link names an *earlier* file. Links are placed at the end, so
        without this check a link to itself, to a later member or to a symlink could resolve."""
        root = self.placements.hardlink_root(member.path, member.link or "")
        link = Deferred(replace(member, link=root), facts, position)
        if root in self.placements.placed:
            self.hardlinks.append(link)
            return
        self._revise(link, replace(link.facts, dest=None))
        self.warn("dangling-hardlink", member.path,
                  f"hard link to {member.link!r}, which is not an earlier placed file; skipped")

    def note_placed(self, path: str, placed: Placed, rule: Rule) -> None:
        """A file whose rule links it from another output or copies it into every output:
        done once the stream has ended (every output is known then)."""
        if rule.link_in or rule.every_output:
            self.placed_by_rule.append((path, placed, rule))

    # -- after the stream -------------------------------------------------------------------

    def plan(self) -> None:
        symlinks = last_of_each_name(self.symlinks, self._revise, self.warn)
        self._resolver = following_resolver(self.placements, symlinks)
        self._link_dests = {d.member.path: d.facts.dest for d in symlinks
                            if d.facts.dest is not None}
        for link in self.hardlinks:
            self._place_hardlink(link)
        for link in symlinks:
            self._place_symlink(link)
        self._place_link_backs()
        self._place_pc_aliases()
        self._place_extra_links()
        if self.placed_by_rule or self.ruleset.package.links:
            self._place_profile_links()

    def take(self) -> tuple[list[LinkOp], list[ElfCopy], list[tuple[int, MemberFacts]]]:
        """The ops, ELF copies and revised facts so far (handed over once: later calls start
        anew)."""
        ops, copies, revised = self.ops, self.elf_copies, self.revised
        self.ops, self.elf_copies, self.revised = [], [], []
        return ops, copies, revised

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

    def _revise(self, link: Deferred, facts: MemberFacts) -> None:
        """The link member's facts as the plan leaves them (a new value for the writer)."""
        self.revised.append((link.position, facts))

    def _place_hardlink(self, link: Deferred) -> None:
        member, facts = link.member, link.facts
        assert member.link is not None
        source = self.placements.placed.get(member.link)
        if source is None:
            self._revise(link, replace(link.facts, dest=None))
            self.warn("dangling-hardlink", member.path,
                      f"hard link to {member.link!r}, which was not placed")
            return
        decision = self.ruleset.classify(facts.dest or member.path, source.kind, self.allowed)
        if decision.output is None:
            self._revise(link, replace(link.facts, dest=None, note="dropped by rule",
                                       rule=str(decision.rule)))
            return
        output = fallback_output(decision.output, self.allowed)
        assert facts.dest is not None
        dest = relocated(decision, facts.dest)  # a profile rule's relocate, as for files
        self._revise(link, replace(link.facts, output=output, rule=str(decision.rule),
                                   dest=dest))
        self.ops.append(HardlinkOp(output, dest, source.output, source.dest))
        self.placements.remember(member.path, Placed(output, dest, source.kind))
        if output != source.output and source.kind.value.startswith("elf-"):
            self.elf_copies.append(ElfCopy(link.position, member.path, output, dest,
                                           decision.rule_obj, source.output, source.dest))

    def _place_symlink(self, link: Deferred) -> None:
        member = link.member
        assert member.link is not None and link.facts.dest is not None
        assert self._resolver is not None
        refusal = self._resolver.refusal(member.path, member.link)
        if refusal is not None:
            self._revise(link, replace(link.facts, dest=None))
            self.problem(refusal[0], member.path, refusal[1])
            return
        target = self._resolver.resolve(member.path)
        if target is None:
            self._revise(link, replace(link.facts, dest=None))
            self.problem("dangling-symlink", member.path,
                         f"symlink target {member.link!r} is not in the archive "
                         "(or was dropped); link skipped")
            return
        if not self.ruleset.profile.follows_targets:
            self._place_by_own_rule(link, target)
            return
        self._follow_target(link, target)

    # -- profiles: links by their own rule, across outputs along declared edges -------------

    def _place_by_own_rule(self, link: Deferred, target: Placed | set[str]) -> None:
        """``symlinks = "own-rule"``: the link goes where its own path's rule says; its target
        may lie in another output only along a ``link_edges`` edge (the outputs share one
        prefix, so the relative text resolves once they are installed together)."""
        member, facts = link.member, link.facts
        assert member.link is not None and facts.dest is not None
        decision = self.ruleset.classify(self.normalise(member.path) or member.path,
                                         Kind.SYMLINK, self.allowed)
        if decision.output is None:
            self._revise(link, replace(facts, dest=None, note="dropped by rule",
                                       rule=str(decision.rule)))
            return
        output = fallback_output(decision.output, self.allowed)
        holders = [target.output] if isinstance(target, Placed) else sorted(target)
        if not self._may_link(output, holders, member.path, member.link):
            self._revise(link, replace(facts, dest=None))
            return
        immediate = join_link(member.path, member.link)
        assert immediate is not None
        text = link_text(self._final_dest, member.link, facts.dest, immediate)
        self._revise(link, replace(facts, output=output, link=text, rule=str(decision.rule)))
        self.add_link(output, facts.dest, text, member.path)
        self.placements.placed[member.path] = Placed(output, facts.dest, Kind.SYMLINK)
        rule = decision.rule_obj
        if rule is not None and rule.link_in:
            final = target.dest if isinstance(target, Placed) else self._final_dest(immediate)
            self._link_in(member.path, rule, unrelocated(rule, facts.dest), final,
                          holders, output)

    def _final_dest(self, path: str) -> str:
        """Where an archive path ends in its output: a placed file's dest, a symlink's
        (relocated) dest, else its normalised path."""
        placed = self.placements.placed.get(path)
        if placed is not None:
            return placed.dest
        return self._link_dests.get(path) or self.normalise(path) or path

    def _may_link(self, output: str, holders: list[str], path: str, text: str) -> bool:
        if any(self.ruleset.package.may_link(output, h) for h in holders):
            return True
        self.problem("link-edge-undeclared", path,
                     f"a link in {output} to {text!r}, which lands in {', '.join(holders)}: "
                     "no [package] link_edges entry allows it; link skipped")
        return False

    def _link_in(self, origin: str, rule: Rule, path: str, final: str, holders: list[str],
                 placed_in: str) -> None:
        """A rule's ``link_in``: a relative link at ``link_under + path`` in that output to
        ``final`` (the placed file, through any links). The output the rule placed the member
        in (``placed_in``) is an edge the rule itself declares; any other holder of the target
        needs ``link_edges``."""
        assert rule.link_in is not None
        where = rule.link_under + path
        if where == final and rule.link_in in holders:
            return
        if placed_in not in holders and not self._may_link(rule.link_in, holders, origin,
                                                               final):
            return
        text = posixpath.relpath(final, member_parent(where) or ".")
        self.add_link(rule.link_in, where, text, f"{BUILTIN}:link-in")

    def _place_profile_links(self) -> None:
        """Files' ``link_in`` links and ``every_output`` copies, then the package's ``links``."""
        for path, placed, rule in self.placed_by_rule:
            if rule.link_in:
                self._link_in(path, rule, unrelocated(rule, placed.dest), placed.dest,
                              [placed.output], placed.output)
            if rule.every_output:
                for other in sorted(self.allowed or ()):
                    if other != placed.output and (other, placed.dest) not in \
                            self.placements.occupied:
                        self.ops.append(HardlinkOp(other, placed.dest, placed.output,
                                                   placed.dest))
                        self.placements.occupied[(other, placed.dest)] = EVERY_OUTPUT
        for entry in self.ruleset.package.links:
            holders = sorted(self.placements.holders(entry.target))
            origin = f"{BUILTIN}:package-link"
            if not holders:
                self.problem("dangling-symlink", None, f"{entry.output}: {entry.path} -> "
                             f"{entry.target}: this package places nothing there; not created")
            elif self._may_link(entry.output, holders, origin, entry.target):
                self.add_link(entry.output, entry.path, entry.text(), origin)

    def _follow_target(self, link: Deferred, target: Placed | set[str]) -> None:
        member, dest = link.member, link.facts.dest
        assert member.link is not None and dest is not None
        immediate = join_link(member.path, member.link)
        assert immediate is not None
        outputs = [target.output] if isinstance(target, Placed) else sorted(target)
        text = link_text(self.normalise, member.link, dest, immediate)
        note = f"placed with its target (own rule {link.facts.rule})" + (
            f"; also in {', '.join(outputs[1:])}" if len(outputs) > 1 else "")
        self._revise(link, replace(link.facts, output=outputs[0], link=text,
                                   rule=f"{BUILTIN}:follow-target", note=note))
        for output in outputs:
            self.add_link(output, dest, text, member.path)
        if isinstance(target, Placed):
            self.placements.placed[member.path] = Placed(target.output, dest, Kind.SYMLINK)

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
            for output in _stub_link_outputs(dest, target, self.placements, self.warn):
                self.add_link(output, dest, target, f"{BUILTIN}:stub-link")
        for entry in self.ruleset.package.link_into:  # tensorrt's include/onnx
            for output, dest, target in entry.links(list(self.placements.occupied), self.where):
                self.add_link(output, dest, target, f"{BUILTIN}:link-into")


def is_stub_path(path: str) -> bool:
    """``lib/stubs/...`` or ``stubs/...`` (at any depth): link-time stand-ins."""
    parts = path.split("/")
    return "stubs" in parts[:-1]


def _stub_link_outputs(dest: str, target: str, placements: Placements,
                       warn: Complain) -> list[str]:
    """The outputs a package ``stub_links`` entry is created in: every one holding the target
    (a link to a directory, cuda_cccl's ``include/cccl -> .``, goes where it has content),
    except that a link outside a stubs directory to a stub is refused (with a warning) in any
    output but ``stubs``: it would be found through that output's library directory
    (``lib/libcuda.so -> stubs/libcuda.so``, NixOS/nixpkgs#293320)."""
    target_dest = posixpath.normpath(posixpath.join(member_parent(dest), target))
    exposes = is_stub_path(target_dest) and not is_stub_path(dest)
    made = []
    for output in sorted(placements.holders(target_dest)):
        if exposes and output != "stubs":
            warn("stub-link-skipped", None, f"{output}: {dest} -> {target} not created: it "
                 f"would put a stub next to {output}'s libraries (no separate stubs output)")
        else:
            made.append(output)
    return made


@dataclass(frozen=True, slots=True)
class Deferred:
    """A link member waiting for the end of the stream, with its facts as classified."""

    member: Member
    facts: MemberFacts
    position: int


def last_of_each_name(symlinks: list[Deferred], revise: Callable[[Deferred, MemberFacts], None],
                      warn: Complain) -> list[Deferred]:
    """Tar semantics: of two symlinks with one name the later replaces the earlier."""
    last = {d.member.path: d for d in symlinks}
    for link in symlinks:
        if last[link.member.path] is not link:
            revise(link, replace(link.facts, dest=None))
            warn("duplicate-member", link.member.path,
                 "replaced by a later symlink of the same name (as tar does); skipped")
    return [d for d in symlinks if last[d.member.path] is d]


def following_resolver(placements: Placements, symlinks: list[Deferred]) -> LinkResolver:
    """A resolver that follows only the links that will exist: not those a file, a directory
    or a symlink above them displaces (a link through one was placed dangling)."""
    index = {d.member.path: d.member.link for d in symlinks if d.member.link is not None}
    everything = LinkResolver(placements, index)
    follow = {path: text for path, text in index.items()
              if everything.refusal(path, text) is None}
    return LinkResolver(placements, index, follow)


def place_hardlinks_to(planner: LinkPlanner, path: str) -> list[LinkOp]:
    """The hard links to ``path``, placed now: a later member of that name is about to
    replace it, and a link keeps the earlier bytes (GNU tar)."""
    now = [link for link in planner.hardlinks if link.member.link == path]
    planner.hardlinks = [link for link in planner.hardlinks if link not in now]
    before = len(planner.ops)
    for link in now:
        planner._place_hardlink(link)
    ops, planner.ops = planner.ops[before:], planner.ops[:before]
    return ops
