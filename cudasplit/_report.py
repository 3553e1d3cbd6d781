"""The report: what happened to every member, as data, rendered as JSON or text, and its
store-path-free form (``--report-relative``)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cudasplit._argcheck import checked
from cudasplit._words import plural
from cudasplit.errors import NotFoundError

SCHEMA_VERSION = 1
_DROP_REASONS = {"<builtin>:cuda-major": "CUDA major", "<builtin>:package-drop": "package table"}


@dataclass(slots=True)
class MemberRecord:
    """One archive member in the report: where it went, by which rule, and its ELF edit.

    Attributes:
        path: the member's path inside the archive, top directory stripped.
        kind: ``file``, ``dir``, ``symlink``, ``hardlink``, ``elf-shared``, ``elf-exec``,
            ``elf-other`` or ``static``.
        output: the output it went to; ``None``: dropped or not placed.
        dest: its path inside the output, after renames.
        rule: the ``file:rule`` that decided, or ``<builtin>:reason``.
        size: its size in the source.
        link: a symlink's target as written, or a hard link's source path.
        note: why, where a rule alone does not say it.
        runpath_before: an ELF file's RUNPATH (or RPATH) as shipped.
        runpath_after: the RUNPATH written or planned.
        runpath_tag: ``RUNPATH`` or ``RPATH``.
        patch: ``in-place``, ``append``, ``lief``, ``unchanged``, ``skipped`` or ``planned``.
        needed_unresolved: DT_NEEDED names found nowhere.
        interpreter_before: the PT_INTERP found (executables).
        interpreter_after: the PT_INTERP written or planned.
        dlopen: names it may dlopen, with the package that provides each.
        gpu: the GPU code an ELF file or static archive carries, one row per kind (``sass``,
            ``ptx``, ``ltoir``) and architecture (``sm_90a``): entries, bytes stored, bytes
            unpacked, entries compressed; ``None``: none, or not read.
        glibc: the highest ``GLIBC``, ``GLIBCXX``, ``CXXABI`` and ``GCC`` version the file
            needs, each with the library and the first symbol needing it; ``None``: none.

    Raises:
        Nothing: a value.
    """

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
    gpu: list[dict[str, Any]] | None = None       # GPU code per kind and architecture
    glibc: list[dict[str, str | None]] | None = None  # highest GLIBC_/GLIBCXX_/... needed

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("gpu", "glibc"):   # only files that carry them have the keys
            if data[key] is None:
                data.pop(key)
        if self.kind not in ("elf-shared", "elf-exec", "elf-other"):
            for key in ("runpath_before", "runpath_after", "runpath_tag", "patch",
                        "needed_unresolved", "interpreter_before", "interpreter_after",
                        "dlopen"):
                data.pop(key)
        return data


@dataclass(slots=True)
class OutputRecord:
    """One output's root directory, and how many files and bytes it received.

    Attributes:
        directory: the output's root.
        files: files it received.
        bytes: their bytes (as read from the source).

    Raises:
        Nothing: a value.
    """

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
    """Something a run found wrong (a problem) or worth saying (a warning); one line.

    Attributes:
        code: what kind (``empty-output``, ``unclaimed``, ``unsafe-symlink``, ``patch-failed``,
            ``needed-unresolved``, ...).
        path: the member (or file) concerned; ``None`` for the whole run.
        message: one line for a person.

    Raises:
        Nothing: a value.
    """

    code: str       # empty-output|unclaimed|dangling-symlink|unsafe-member|patch-failed|...
    path: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class Report:
    """What a split did or would do: every member, every output, problems and warnings.

    Attributes:
        source: the source split.
        package: its identity (name, platform, version, cuda_variant).
        outputs: output name -> :class:`OutputRecord`.
        members: one :class:`MemberRecord` per member, in source order.
        problems: :class:`Problem` entries (see docs/explanation/problems-and-warnings.md).
        warnings: :class:`Problem` entries that are warnings.
        dry_run: nothing was written.
        rules_files: the rule files used, highest precedence first.
        schema: the version of :meth:`as_dict`'s JSON (``cudasplit/schemas/report.json``).
        copies: files copied in from other packages (``--package-root``: libnvvm's tree into
            a CUDA 13 nvcc), with the ELF machine of each.

    Raises:
        Nothing: a value.
    """

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
        gpu, glibc = self.gpu_code(), self.glibc_floor()
        if gpu or glibc:   # only packages with ELF files or static archives
            data["inside"] = {"gpu": gpu, "glibc": glibc}
        return data

    def gpu_code(self) -> list[dict[str, Any]]:
        """The package's GPU code added up per kind and architecture over every placed
        member (entries, bytes stored, bytes unpacked, compressed entries, files)."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for m in self.members:
            for code in (m.gpu or []) if m.output is not None else []:
                row = rows.setdefault((code["kind"], code["arch"]), {
                    "kind": code["kind"], "arch": code["arch"], "entries": 0, "stored": 0,
                    "size": 0, "compressed": 0, "files": 0})
                for key in ("entries", "stored", "size", "compressed"):
                    row[key] += code[key]
                row["files"] += 1
        return sorted(rows.values(), key=lambda r: (_KIND_ORDER.get(r["kind"], 9),
                                                    arch_order(r["arch"])))

    def glibc_floor(self) -> list[dict[str, str | None]]:
        """The package's floor: per prefix, the highest version a placed member needs, with
        that member's path, library and symbol."""
        best: dict[str, dict[str, str | None]] = {}
        for m in self.members:
            for need in (m.glibc or []) if m.output is not None else []:
                prefix = str(need["prefix"])
                held = best.get(prefix)
                if held is None or _numbers(need["version"]) > _numbers(held["version"]):
                    best[prefix] = {**need, "path": m.path}
        return [best[p] for p in ("GLIBC", "GLIBCXX", "CXXABI", "GCC") if p in best]

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
        """The record of the member ``path`` (NotFoundError, also a KeyError, if none)."""
        for record in self.members:
            if record.path == path:
                return record
        raise NotFoundError(f"no member {path!r} in the report of {self.source}")

    def summary_lines(self, sizes: Mapping[str, tuple[int, int]] | None = None) -> list[str]:
        """One line per output: files, bytes and directory; ``sizes`` (output -> (files,
        bytes), e.g. from :func:`cudasplit.outputs.measure_outputs`) replaces the report's counts of
        placed input files where given, so that the numbers are those ``closure`` prints."""
        lines = []
        measured = sizes or {}
        # As wide as the longest output name: a profile's names (conda packages) are long.
        width = max([8, *(len(name) for name in self.outputs)])
        for name, rec in sorted(self.outputs.items()):
            files, size = measured.get(name, (rec.files, rec.bytes))
            lines.append(f"{name:{width}} {plural(files, 'file'):>12} "
                         f"{plural(size, 'byte'):>20}  {rec.directory}")
        patched = sum(1 for m in self.members if m.patch in ("in-place", "append", "lief"))
        if patched:
            lines.append(f"RUNPATH rewritten in {plural(patched, 'ELF file')}")
        lines += [w.message for w in self.warnings if w.code == "lief-fallback"]
        unpatched = sum(1 for p in self.problems if p.code == "patch-failed")
        if unpatched:
            lines.append(f"NOT patched: {plural(unpatched, 'ELF file')} that should be "
                         "(patch-failed; "
                         "see the problems)")
        for package in dict.fromkeys(c.package for c in self.copies):
            mine = [c for c in self.copies if c.package == package]
            machines = sorted({c.machine for c in mine if c.machine})
            lines.append(f"copied {plural(len(mine), 'file')} of {package} (package_roots)"
                         + (f", ELF: {', '.join(machines)}" if machines else ""))
        return lines

    def dropped(self) -> dict[str, int]:
        """Why members reached no output, and how many for each reason: ``rules``,
        ``package table``, ``CUDA major``, or the code of the problem that refused them
        (``unsafe-symlink``, ...). Directories are not counted (they are created where their
        content lands). See docs/explanation/problems-and-warnings.md."""
        refused = {p.path: p.code for p in self.problems if p.path is not None}
        counts: dict[str, int] = {}
        for m in self.members:
            if m.output is not None or m.kind == "dir" or m.rule == "<builtin>:directory":
                continue
            why = refused.get(m.path) or _DROP_REASONS.get(m.rule) or (
                "rules" if m.note == "dropped by rule" else "other")
            counts[why] = counts.get(why, 0) + 1
        return counts


_MASK = "e" * 32
_KIND_ORDER = {"sass": 0, "ptx": 1, "ltoir": 2}


def arch_order(arch: str) -> tuple[int, str]:
    """``sm_90a`` -> ``(90, "a")``: architectures sort by number, then suffix."""
    match = re.fullmatch(r"sm_(\d+)([a-z]*)", arch)
    return (int(match[1]), match[2]) if match else (1 << 31, arch)


def _numbers(version: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in (version or "0").split(".") if p.isdigit())


@checked
def relative_report(report: Report, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``report`` as JSON data safe to keep in ``$out``: output roots as ``$<output>``,
    source and rule files by name, other store paths' hashes masked.

    Args:
        report: a split's :class:`Report`.
        env: where ``NIX_STORE`` is read (default: ``os.environ``; else ``/nix/store``).

    Returns:
        The report's JSON data without absolute store paths.

    Raises:
        Nothing.
    """
    env = os.environ if env is None else env
    data = report.as_dict()
    roots = sorted(((rec["directory"], name) for name, rec in data["outputs"].items()),
                   key=lambda item: -len(item[0]))
    # The base name of a store path still holds its hash (what Nix scans for): drop it.
    data["source"] = re.sub(r"^[0-9a-z]{32}-", "", os.path.basename(report.source))
    data["rules_files"] = [_rules_name(f) for f in report.rules_files]
    store = re.escape(env.get("NIX_STORE", "/nix/store").rstrip("/"))
    pattern = re.compile(store + r"/[0-9a-z]{32}-")
    result: dict[str, Any] = _walk(data, roots, pattern)
    return result


def _rules_name(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] == "packages" else parts[-1]


def _walk(value: Any, roots: list[tuple[str, str]], pattern: re.Pattern[str]) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, roots, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, roots, pattern) for v in value]
    if isinstance(value, str):
        for root, name in roots:
            value = value.replace(root, "$" + name)
        return pattern.sub(lambda m: m[0][: -33] + _MASK + "-", value)
    return value
