"""The ``[package]`` table's key parsers: TOML values -> checked entries, or a ``RulesError``.

Every parser names the file, key and entry index in its message, so a typo in a package file
points at the line to fix. The entries they build are in :mod:`cudasplit._rulebook.package.table`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cudasplit._globs import Glob, GlobError, compile_glob
from cudasplit._model import OUTPUT_NAMES
from cudasplit._rulebook.gates import GATE_KEYS, Gate
from cudasplit._rulebook.package.table import (
    AddNeeded,
    DlopenNeed,
    DropEdit,
    LinkInto,
    OutputWhen,
    PackageLink,
    PcEdit,
    RunpathPackage,
    TextEdit,
    TextEditsFrom,
    version_key,
)
from cudasplit.errors import RulesError

__all__ = [
    "check_keys",
    "glob_list",
    "parse_add_needed",
    "parse_dlopen_key",
    "parse_drops",
    "parse_gate",
    "parse_link_edges",
    "parse_link_into",
    "parse_output_when",
    "parse_package_links",
    "parse_package_refs",
    "parse_pc_edits",
    "parse_text_edits",
    "parse_text_edits_from",
    "string_list",
    "table_of",
]

_VERSION = re.compile(r"^\d+(\.\d+)*$")


def table_of(value: Any, filename: str, what: str) -> Mapping[str, Any]:
    """``value`` when it is a TOML table; else a ``RulesError`` naming ``what``."""
    if not isinstance(value, dict):
        raise RulesError(f"{filename}:{what}: must be a table")
    return value


def check_keys(table: Mapping[str, Any], allowed: frozenset[str], filename: str,
               where: str) -> None:
    """A ``RulesError`` listing the keys of ``table`` that are not ``allowed``."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise RulesError(
            f"{filename}:{where}: unknown key(s) {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _where(filename: str, key: str, index: int) -> str:
    return f"{filename}:[package].{key}[{index}]"


def string_list(value: Any, where: str, key: str) -> tuple[str, ...]:
    """A TOML string or list of strings as a tuple (``None``: empty); else a ``RulesError``."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise RulesError(f"{where}: '{key}' must be a string or a list of strings")


def _tables(value: Any, filename: str, key: str) -> list[tuple[str, Mapping[str, Any]]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RulesError(f"{filename}:[package].{key}: must be an array of tables")
    return [(_where(filename, key, i), v) for i, v in enumerate(value)]


def _check(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - allowed - GATE_KEYS)
    if unknown:
        raise RulesError(f"{where}: unknown key(s) {', '.join(unknown)} "
                         f"(allowed: {', '.join(sorted(allowed | GATE_KEYS))})")


def parse_gate(table: Mapping[str, Any], where: str) -> Gate:
    values: dict[str, str | None] = {}
    for key in ("since", "before", "cuda_since", "cuda_before", "glibc_since"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not _VERSION.match(value)):
            raise RulesError(f"{where}: '{key}' must be a version string like \"12.8\"")
        values[key] = value
    return Gate(values["since"], values["before"], values["cuda_since"], values["cuda_before"],
                string_list(table.get("platforms"), where, "platforms"), values["glibc_since"])


def glob_list(value: Any, where: str, key: str) -> tuple[Glob, ...]:
    """One glob or a non-empty list of globs, compiled; else a ``RulesError`` naming ``key``."""
    patterns = string_list(value, where, key)
    if not patterns:
        raise RulesError(f"{where}: '{key}' needs at least one glob")
    try:
        return tuple(compile_glob(p) for p in patterns)
    except GlobError as exc:
        raise RulesError(f"{where}: {exc}") from exc


def parse_package_refs(value: Any, filename: str) -> tuple[RunpathPackage, ...]:
    entries = []
    for where, table in _tables(value, filename, "copy_packages"):
        _check(table, frozenset({"package", "subdir"}), where)
        package, subdir = table.get("package"), table.get("subdir", "lib")
        if not isinstance(package, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]+", package):
            raise RulesError(f"{where}: 'package' (a pname) is required")
        if not isinstance(subdir, str) or subdir.startswith("/") or ".." in subdir.split("/"):
            raise RulesError(f"{where}: 'subdir' must be a relative directory")
        entries.append(RunpathPackage(package, subdir.strip("/"), parse_gate(table, where)))
    return tuple(entries)


_PC_KEYS = frozenset({"files", "drop", "requires", "requires_modules", "replace",
                      "libdir_output", "driver_rpath", "drop_cudaroot", "cflags_packages",
                      "description"})


def parse_pc_edits(value: Any, filename: str) -> tuple[PcEdit, ...]:
    edits = []
    for where, table in _tables(value, filename, "pkgconfig_edits"):
        _check(table, _PC_KEYS, where)
        replace = table.get("replace", {})
        if not isinstance(replace, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in replace.items()):
            raise RulesError(f"{where}: 'replace' must be a table of strings")
        libdir = table.get("libdir_output")
        if libdir is not None and libdir not in OUTPUT_NAMES:
            raise RulesError(f"{where}: unknown libdir_output {libdir!r}")
        edits.append(PcEdit(
            files=glob_list(table.get("files"), where, "files"), gate=parse_gate(table, where),
            drop=_bool(table, "drop", where), requires=string_list(table.get("requires"), where,
                                                              "requires"),
            requires_modules=string_list(table.get("requires_modules"), where,
                                         "requires_modules"),
            replace=tuple(replace.items()), libdir_output=libdir,
            driver_rpath=_bool(table, "driver_rpath", where),
            drop_cudaroot=_bool(table, "drop_cudaroot", where),
            cflags_packages=string_list(table.get("cflags_packages"), where, "cflags_packages")))
    return tuple(edits)


def parse_output_when(value: Any, filename: str,
                      known: Sequence[str] = OUTPUT_NAMES) -> tuple[OutputWhen, ...]:
    entries = []
    for where, table in _tables(value, filename, "output_when"):
        _check(table, frozenset({"output"}), where)
        output = table.get("output")
        if output not in known:
            raise RulesError(f"{where}: unknown output {output!r}")
        entries.append(OutputWhen(str(output), parse_gate(table, where)))
    return tuple(entries)


def parse_drops(value: Any, filename: str) -> tuple[DropEdit, ...]:
    entries = []
    for where, table in _tables(value, filename, "drop"):
        _check(table, frozenset({"match", "keep", "description", "unlifted"}), where)
        unlifted = table.get("unlifted", False)
        if not isinstance(unlifted, bool):
            raise RulesError(f"{where}: 'unlifted' must be true or false")
        keep = string_list(table.get("keep"), where, "keep")
        try:
            for pattern in keep:
                compile_glob(pattern.replace("@python@", "3.0"))
        except GlobError as exc:
            raise RulesError(f"{where}: {exc}") from exc
        entries.append(DropEdit(glob_list(table.get("match"), where, "match"),
                                parse_gate(table, where), keep, unlifted))
    return tuple(entries)


def parse_link_into(value: Any, filename: str) -> tuple[LinkInto, ...]:
    entries = []
    for where, table in _tables(value, filename, "link_into"):
        _check(table, frozenset({"files", "dir", "description"}), where)
        directory = table.get("dir")
        if (not isinstance(directory, str) or not directory.strip("/")
                or directory.startswith("/") or ".." in directory.split("/")):
            raise RulesError(f"{where}: 'dir' must be a relative directory")
        entries.append(LinkInto(glob_list(table.get("files"), where, "files"),
                                directory.strip("/"), parse_gate(table, where)))
    return tuple(entries)


def parse_text_edits(value: Any, filename: str) -> tuple[TextEdit, ...]:
    entries = []
    for where, table in _tables(value, filename, "text_edits"):
        _check(table, frozenset({"files", "replace", "regex", "description", "quiet", "forbid"}),
               where)
        replace, regex = _pairs(table, "replace", where), _pairs(table, "regex", where)
        if not replace and not regex:
            raise RulesError(f"{where}: needs 'replace' or 'regex' pairs")
        for pattern, _ in regex:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise RulesError(f"{where}: bad regex {pattern!r} ({exc})") from exc
        quiet = table.get("quiet", False)
        if not isinstance(quiet, bool):
            raise RulesError(f"{where}: 'quiet' must be true or false")
        forbid = table.get("forbid", [])
        if not isinstance(forbid, list) or not all(isinstance(f, str) and f for f in forbid):
            raise RulesError(f"{where}: 'forbid' must be a list of non-empty strings")
        entries.append(TextEdit(glob_list(table.get("files"), where, "files"), replace, regex,
                                parse_gate(table, where), quiet, tuple(forbid)))
    return tuple(entries)


def parse_text_edits_from(value: Any, filename: str) -> tuple[TextEditsFrom, ...]:
    entries = []
    for where, table in _tables(value, filename, "text_edits_from"):
        _check(table, frozenset({"package"}), where)
        package = table.get("package")
        if not isinstance(package, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]+", package):
            raise RulesError(f"{where}: 'package' (a pname) is required")
        entries.append(TextEditsFrom(package, parse_gate(table, where)))
    return tuple(entries)


def _pairs(table: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            and p[0] for p in value):
        raise RulesError(f"{where}: '{key}' must be a list of [\"old\", \"new\"] pairs")
    return tuple((p[0], p[1]) for p in value)


_LIBRARY_NAME = re.compile(r"^[A-Za-z0-9_.+@-]+$")


def parse_add_needed(value: Any, filename: str) -> tuple[AddNeeded, ...]:
    entries = []
    for where, table in _tables(value, filename, "add_needed"):
        _check(table, frozenset({"files", "names", "description"}), where)
        # The ELF planner knows the package's own version only (Nixpkgs gates these edits on
        # finalAttrs.version too).
        if set(table) & {"cuda_since", "cuda_before", "platforms"}:
            raise RulesError(f"{where}: add_needed is gated by 'since'/'before' only")
        names = string_list(table.get("names"), where, "names")
        if not names or not all(_LIBRARY_NAME.match(n) for n in names):
            raise RulesError(f"{where}: 'names' must be library names like \"libfoo.so.1\"")
        entries.append(AddNeeded(glob_list(table.get("files"), where, "files"), names,
                                 parse_gate(table, where)))
    return tuple(entries)


def _bool(table: Mapping[str, Any], key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise RulesError(f"{where}: '{key}' must be true or false")
    return value


def parse_dlopen_key(value: object, where: str) -> tuple[DlopenNeed, ...]:
    """Parse the ``dlopen`` key of a ``[package]`` table (``where`` names it in errors)."""
    if not isinstance(value, list):
        raise RulesError(f"{where}: dlopen must be a list of tables")
    needs = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("package"), str) \
                or set(item) - {"package", "since", "before"}:
            raise RulesError(f"{where}: dlopen entries are {{ package = \"PNAME\", since = "
                             f"\"X.Y\", before = \"X.Y\" }} (since/before optional), not {item!r}")
        gates = [item.get(k) for k in ("since", "before")]
        if any(g is not None and (not isinstance(g, str) or not version_key(g)) for g in gates):
            raise RulesError(f"{where}: dlopen since/before must be versions like \"12.8\"")
        needs.append(DlopenNeed(item["package"], gates[0], gates[1]))
    return tuple(needs)


def parse_link_edges(value: Any, filename: str,
                     known: Sequence[str]) -> Mapping[str, tuple[str, ...]]:
    """``link_edges = { "cuda-cudart-dev" = ["cuda-cudart_linux-64"] }``: the outputs a link
    placed in an output may point into (profiles whose outputs share one prefix)."""
    where = f"{filename}:[package].link_edges"
    table = table_of(value, filename, "[package].link_edges")
    edges: dict[str, tuple[str, ...]] = {}
    for source, targets in table.items():
        names = string_list(targets, f"{where}.{source}", "targets")
        unknown = [n for n in (source, *names) if n not in known]
        if unknown:
            raise RulesError(f"{where}: unknown output {unknown[0]!r}")
        edges[str(source)] = names
    return edges


def parse_package_links(value: Any, filename: str,
                        known: Sequence[str]) -> tuple[PackageLink, ...]:
    """``[[package.links]]`` entries: ``output``, ``path`` (the link) and ``target`` (a path in
    the shared prefix), both relative and without ``..``."""
    entries = []
    for where, table in _tables(value, filename, "links"):
        _check(table, frozenset({"output", "path", "target"}), where)
        output = table.get("output")
        if output not in known:
            raise RulesError(f"{where}: unknown output {output!r}")
        paths = []
        for key in ("path", "target"):
            text = table.get(key)
            if not isinstance(text, str) or not _relative_path(text):
                raise RulesError(f"{where}: '{key}' must be a relative path without '.' or "
                                 "'..'")
            paths.append(text.strip("/"))
        entries.append(PackageLink(str(output), *paths))
    return tuple(entries)


def _relative_path(text: str) -> bool:
    parts = text.strip("/").split("/")
    return bool(text) and not text.startswith("/") and "\0" not in text and all(
        p not in ("", ".", "..") for p in parts)
