"""The place stage: a classified file goes to its output (through the sink, or only into the
plan), text rewrites run, the ELF job is handed to the patch stage, the output counted.

One call per file member, on the split loop's thread, in source order. The same steps run in
a dry run (no sink): rewrites report their warnings, and an ELF member is spooled to read its
dynamic section, so the plan and the report are the real run's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ._classify import Classified, fallback_output
from ._elfplan import Layout
from ._links import LinkPlanner
from ._model import Member
from ._patchstage import ElfJob, PatchStage
from ._placements import Placed, Placements
from ._report import MemberRecord, OutputRecord, Report
from ._rewrites import (
    REWRITES,
    Rewrite,
    RewriteContext,
    read_small_text,
    rewrite_text_edits,
    text_edits_for,
)
from .errors import OutputError
from .sinks._base import Sink, write_bytes

__all__ = ["Placer"]


@dataclass(slots=True)
class Placer:
    sink: Sink | None                 # None: a dry run
    report: Report
    placements: Placements
    links: LinkPlanner
    rewrites: RewriteContext
    patches: PatchStage
    layout: Layout
    allowed: frozenset[str] | None
    description: str                  # the source, for error messages
    spool_elf: Callable[[MemberRecord], bool] | None  # dry run: which ELF members to plan

    def place(self, member: Member, stream: BinaryIO, classified: Classified) -> None:
        record, kind, decision = classified.record, classified.kind, classified.decision
        assert decision.output is not None and record.dest is not None
        output = fallback_output(decision.output, self.allowed)
        record.output = output
        conflict = self.placements.conflict(output, record.dest)
        if conflict is not None:
            raise OutputError(f"{self.layout.root(output)}/{record.dest}: {conflict}")
        self.patches.supersede(output, record.dest)  # never patch a file being rewritten
        local = self._write(member, stream, output, record.dest, classified)
        self.placements.remember(member.path, Placed(output, record.dest, kind))
        self.count(output, member.size)
        rename = classified.rename
        if rename is not None and rename.link_back:
            self.links.link_backs.add((output, rename))
        if kind.value.startswith("elf-"):
            self._elf_job(member, stream, record, local, classified)

    def count(self, output: str, size: int) -> None:
        record = self.output_record(output)
        record.files += 1
        record.bytes += size

    def output_record(self, output: str) -> OutputRecord:
        if output not in self.report.outputs:
            self.report.outputs[output] = OutputRecord(self.layout.root(output))
        return self.report.outputs[output]

    def _write(self, member: Member, stream: BinaryIO, output: str, dest: str,
               classified: Classified) -> Path | None:
        rule = classified.decision.rule_obj
        rewrite = REWRITES.get(rule.transform or "") if rule is not None else None
        if rewrite is None and text_edits_for(self.rewrites, dest):
            rewrite = rewrite_text_edits
        if rewrite is not None:  # dry runs too: the same warnings and alias links
            self._write_rewritten(rewrite, member, stream, output, dest)
        elif self.sink is not None:
            self.sink.write_file(output, dest, stream, member.mode)
        return self.sink.staged_path(output, dest) if self.sink is not None else None

    def _write_rewritten(self, rewrite: Rewrite, member: Member, stream: BinaryIO, output: str,
                         dest: str) -> None:
        text = read_small_text(stream, self.description, member.path)
        result = rewrite(self.rewrites, member.path, output, dest, text)
        self.report.warnings.extend(result.warnings)
        self.report.problems.extend(result.problems)
        if result.alias is not None:
            self.links.pc_aliases.append((output, dest, result.alias))
        if self.sink is not None:
            write_bytes(self.sink, output, dest, result.text.encode("utf-8", "surrogateescape"),
                        member.mode)

    def _elf_job(self, member: Member, stream: BinaryIO, record: MemberRecord,
                 local: Path | None, classified: Classified) -> None:
        rule, output, dest = classified.decision.rule_obj, record.output, record.dest
        assert output is not None and dest is not None
        if local is not None:
            self.patches.add(ElfJob(record, output, dest, local, rule))
        elif self.spool_elf is not None and self.spool_elf(record):
            shown = f"{self.layout.root(output)}/{dest}"
            info = self.patches.spool_info(member.path, stream, shown)
            self.patches.add(ElfJob(record, output, dest, None, rule, info=info))
