"""The report: what happened to every member, as data, rendered as JSON or text."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass(slots=True)
class MemberRecord:
    """One archive member in the report: where it went, by which rule, and its ELF edit."""

    path: str                 # inside the archive, top directory stripped
    kind: str                 # file|dir|symlink|hardlink|elf-shared|elf-exec|elf-other|static
    output: str | None        # None: dropped or not placed (directories, skipped members)
    dest: str | None          # path inside the output after normalisation
    rule: str                 # file:rule that decided, or <builtin>:reason
    size: int = 0
    link: str | None = None   # symlink target as written (or hardlink source path)
    note: str | None = None
    runpath_before: str | None = None
    runpath_after: str | None = None
    runpath_tag: str | None = None
    patch: str | None = None  # in-place|append|lief|unchanged|skipped
    needed_unresolved: list[str] | None = None
    interpreter_before: str | None = None  # PT_INTERP found (executables only)
    interpreter_after: str | None = None   # PT_INTERP written or planned
    dlopen: list[dict[str, str | None]] | None = None  # names it may dlopen, with provider

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.kind not in ("elf-shared", "elf-exec", "elf-other"):
            for key in ("runpath_before", "runpath_after", "runpath_tag", "patch",
                        "needed_unresolved", "interpreter_before", "interpreter_after",
                        "dlopen"):
                data.pop(key)
        return data


@dataclass(slots=True)
class OutputRecord:
    """One output's root directory, and how many files and bytes it received."""

    directory: str
    files: int = 0
    bytes: int = 0


@dataclass(slots=True)
class CopyRecord:
    """A file another package's root gave this split (``copy_packages``: libnvvm's cicc)."""

    package: str              # the package copied from
    source: str               # the file read (under its --package-root)
    output: str
    dest: str
    size: int
    machine: str | None = None  # ELF machine (x86-64, AArch64); None: not ELF


@dataclass(slots=True)
class Problem:
    """Something a run found wrong (a problem) or worth saying (a warning); one line."""

    code: str       # empty-output|unclaimed|dangling-symlink|unsafe-member|patch-failed|...
    path: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class Report:
    """What a split did or would do: every member, every output, problems and warnings."""

    source: str
    package: dict[str, str | None]
    outputs: dict[str, OutputRecord] = field(default_factory=dict)
    members: list[MemberRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    dry_run: bool = False
    rules_files: list[str] = field(default_factory=list)
    schema: int = SCHEMA_VERSION
    copies: list[CopyRecord] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = self._as_dict()
        if self.copies:  # only compiler packages copy; other reports keep their keys
            data["copies"] = [asdict(c) for c in self.copies]
        return data

    def _as_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "source": self.source,
            "package": self.package,
            "dry_run": self.dry_run,
            "rules_files": self.rules_files,
            "outputs": {name: asdict(rec) for name, rec in sorted(self.outputs.items())},
            "members": [m.as_dict() for m in self.members],
            "problems": [asdict(p) for p in self.problems],
            "warnings": [asdict(p) for p in self.warnings],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=False) + "\n"

    def member(self, path: str) -> MemberRecord:
        for record in self.members:
            if record.path == path:
                return record
        raise KeyError(path)

    def summary_lines(self) -> list[str]:
        lines = []
        for name, rec in sorted(self.outputs.items()):
            lines.append(f"{name:8} {rec.files:6} files {rec.bytes:>14,} bytes  {rec.directory}")
        patched = sum(1 for m in self.members if m.patch in ("in-place", "append", "lief"))
        if patched:
            lines.append(f"RUNPATH rewritten in {patched} ELF files")
        for package in dict.fromkeys(c.package for c in self.copies):
            mine = [c for c in self.copies if c.package == package]
            machines = sorted({c.machine for c in mine if c.machine})
            lines.append(f"copied {len(mine)} files of {package} (--package-root)"
                         + (f", ELF: {', '.join(machines)}" if machines else ""))
        return lines
