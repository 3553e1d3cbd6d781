"""The place stage: a classified file goes to its output (through the sink, or only into the
plan), text rewrites run, the ELF job is handed to the patch stage; returns what it did.

One call per file member, on the split loop's thread, in source order. The same steps run in
a dry run (no sink): rewrites report their warnings, and an ELF member is spooled to read its
dynamic section, so the plan and the report are the real run's. What happened comes back as a
:class:`~cudasplit._split.reportwriter.PlaceOutcome` for the report writer.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cudasplit._layout import Layout
from cudasplit._model import Member
from cudasplit._report import Problem
from cudasplit._sinks import Sink
from cudasplit._source import member_parent
from cudasplit._split.classify import Classified
from cudasplit._split.gpucode import BackgroundReads, GpuCodeStage, reads_gpu_code
from cudasplit._split.links import HardlinkOp, LinkPlanner, place_hardlinks_to
from cudasplit._split.patchstage import ElfJob, PatchStage
from cudasplit._split.placements import Placed, Placements
from cudasplit._split.reportwriter import MemberFacts, PlaceOutcome
from cudasplit._split.rewrites import (
    REWRITES,
    Rewrite,
    RewriteContext,
    read_small_text,
    rewrite_text_edits,
    text_edits_for,
)
from cudasplit.errors import OutputError

__all__ = ["Placer", "write_bytes"]

_Said = tuple[tuple[Problem, ...], tuple[Problem, ...]]   # a rewrite's warnings and problems


@dataclass(slots=True)
class Placer:
    sink: Sink | None                 # None: a dry run
    placements: Placements
    links: LinkPlanner
    rewrites: RewriteContext
    patches: PatchStage
    layout: Layout
    description: str                  # the source, for error messages
    spool_elf: Callable[[MemberFacts], bool] | None  # dry run: which ELF members to plan
    inside: GpuCodeStage | None = None  # reads GPU code and glibc floors (SplitOptions.inside)
    background: BackgroundReads | None = None  # reads large files in a process of its own

    def place(self, member: Member, stream: BinaryIO, classified: Classified,
              position: int) -> PlaceOutcome:
        facts, kind = classified.facts, classified.kind
        output, dest = facts.output, facts.dest
        assert output is not None and dest is not None
        conflict = self.placements.conflict(output, dest)
        if conflict is not None:
            raise OutputError(f"{self.layout.root(output)}/{dest}: {conflict}")
        superseded = self.patches.supersede(output, dest)  # never patch a file being rewritten
        for op in place_hardlinks_to(self.links, member.path):  # before the old bytes go
            if self.sink is not None and isinstance(op, HardlinkOp):
                self.sink.make_hardlink(op.output, op.dest, op.src_output, op.src_dest)
        inside = self.inside if reads_gpu_code(kind.value) else None
        if inside is not None and inside.wanted is not None and not inside.wanted(facts):
            inside = None
        duplicate = self._duplicate(member.path)
        # A second copy is read here once written: the reading process could still find the
        # first copy's file under its name.
        background = None if duplicate is not None else self._background_for(
            kind.value, member.size, output, dest, position, inside is not None)
        local, said = self._write(member, stream, output, dest, classified)
        if background is not None:
            background.written(position)
        if duplicate is not None:
            said = ((*said[0], duplicate), said[1])
        placed = Placed(output, dest, kind)
        self.placements.remember(member.path, placed)
        if classified.decision.rule_obj is not None:  # link_in, every_output (profiles)
            self.links.note_placed(member.path, placed, classified.decision.rule_obj)
        rename = classified.rename
        if rename is not None and rename.link_back:
            self.links.link_backs.add((output, rename))
        is_elf = kind.value.startswith("elf-")
        if inside is not None and local is not None:
            inside.add(position, member.path, local)
        if inside is not None and self.sink is None:
            # A dry run: one spool serves this read and the patch stage's plan.
            with inside.spooled(stream) as spool:
                inside.read_now(position, member.path, spool)
                if is_elf:
                    self._elf_job(member, stream, facts, None, classified, position, spool)
        elif is_elf:
            self._elf_job(member, stream, facts, local, classified, position)
        return PlaceOutcome(output, member.size, superseded, *said)

    def _background_for(self, kind: str, size: int, output: str, dest: str, position: int,
                        inside: bool) -> BackgroundReads | None:
        """The reading process, told of a large file about to be written (read while it is
        written, or right after); None for anything it does not read."""
        background = self.background
        if self.sink is None or background is None or not background.wants(kind, size):
            return None
        local = self.sink.staged_path(output, dest)
        if local is None:
            return None
        background.begin(position, local, size, kind, inside=inside)
        return background

    def _duplicate(self, path: str) -> Problem | None:
        """The archive names this file a second time: the later copy wins (as tar), once
        whatever reads the earlier one is done with it."""
        earlier = self.placements.placed.get(path)
        if earlier is None or earlier.kind.value in ("symlink", "hardlink", "dir"):
            return None
        if self.background is not None and self.sink is not None:
            local = self.sink.staged_path(earlier.output, earlier.dest)
            if local is not None:
                self.background.forget(str(local))
        if self.inside is not None:
            self.inside.settle(path)
        return Problem("duplicate-member", path,
                       "named again later in the archive; the later copy replaces this one "
                       "(as tar does)")

    def _write(self, member: Member, stream: BinaryIO, output: str, dest: str,
               classified: Classified) -> tuple[Path | None, _Said]:
        rule = classified.decision.rule_obj
        rewrite = REWRITES.get(rule.transform or "") if rule is not None else None
        if rewrite is None and text_edits_for(self.rewrites, dest):
            rewrite = rewrite_text_edits
        said: _Said = ((), ())
        if rewrite is not None:  # dry runs too: the same warnings and alias links
            said = self._write_rewritten(rewrite, member, stream, output, dest)
        elif self.sink is not None:
            self.sink.write_file(output, dest, stream, member.mode)
        return (self.sink.staged_path(output, dest) if self.sink is not None else None), said

    def _write_rewritten(self, rewrite: Rewrite, member: Member, stream: BinaryIO, output: str,
                         dest: str) -> _Said:
        text = read_small_text(stream, self.description, member.path)
        result = rewrite(self.rewrites, member.path, output, dest, text)
        if result.alias is not None:
            self.links.pc_aliases.append((output, dest, result.alias))
        if self.sink is not None:
            write_bytes(self.sink, output, dest, result.text.encode("utf-8", "surrogateescape"),
                        member.mode)
        return tuple(result.warnings), tuple(result.problems)

    def _elf_job(self, member: Member, stream: BinaryIO, facts: MemberFacts,
                 local: Path | None, classified: Classified, position: int,
                 spool: str | None = None) -> None:
        rule, output, dest = classified.decision.rule_obj, facts.output, facts.dest
        assert output is not None and dest is not None
        if local is not None:
            # The names beside the file so far, as a snapshot: the early worker keeps it.
            own = frozenset(self.placements.own_names.get((output, member_parent(dest)), ()))
            self.patches.add(ElfJob(position, member.path, output, dest, local, rule), own)
        elif self.spool_elf is not None and self.spool_elf(facts):
            shown = f"{self.layout.root(output)}/{dest}"
            if spool is not None:
                self.patches.read_spool(member.path, spool, shown)
            else:
                self.patches.spool_info(member.path, stream, shown)
            self.patches.add(ElfJob(position, member.path, output, dest, None, rule))


def write_bytes(sink: Sink, output: str, dest: str, data: bytes, mode: int) -> None:
    """Small generated files (rewritten ``.pc``, nix-support) go through ``write_file`` too."""
    sink.write_file(output, dest, io.BytesIO(data), mode)
