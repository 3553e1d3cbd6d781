"""The per-package table's structured entries: version/platform gates and what they guard.

Nixpkgs' package files gate fixups on two different versions: the package's own
(``lib.versionAtLeast finalAttrs.version "12.8"`` for libcublas) and the CUDA release's
(``cudaOlder "13.4"`` for libnpp, whose own version is 12.x or 13.x independently). A
:class:`Gate` keeps them apart: ``since``/``before`` compare the package version,
``cuda_since``/``cuda_before`` the CUDA ``major.minor``, ``platforms`` the redist platform.

An unknown version or platform never silently disables a fixup that exists today: ``since``
gates count as met (the newest layout is the default), ``before`` gates as not met.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._globs import Glob, GlobError, compile_glob
from ._model import OUTPUT_NAMES
from .errors import RulesError

GATE_KEYS = frozenset({"since", "before", "cuda_since", "cuda_before", "platforms"})
_VERSION = re.compile(r"^\d+(\.\d+)*$")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"12.9.79"`` -> ``(12, 9, 79)``; trailing non-digits of a component are ignored."""
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d*", piece)
        parts.append(int(digits[0]) if digits and digits[0] else 0)
    return tuple(parts)


def version_at_least(version: str, floor: str) -> bool:
    """Nixpkgs' ``versionAtLeast`` on the components ``floor`` names (``12.8`` vs ``12.8.90``)."""
    have, want = version_tuple(version), version_tuple(floor)
    return have[:len(want)] >= want


@dataclass(frozen=True, slots=True)
class Where:
    """The facts a gate is evaluated against (None: unknown)."""

    version: str | None = None
    cuda_version: str | None = None
    platform: str | None = None
    python_version: str | None = None  # X.Y of the build's Python (cuda_gdb's TUI wrappers)


@dataclass(frozen=True, slots=True)
class Gate:
    since: str | None = None
    before: str | None = None
    cuda_since: str | None = None
    cuda_before: str | None = None
    platforms: tuple[str, ...] = ()

    def applies(self, where: Where) -> bool:
        if self.platforms and where.platform is not None and where.platform not in self.platforms:
            return False
        return (_since(where.version, self.since) and _before(where.version, self.before)
                and _since(where.cuda_version, self.cuda_since)
                and _before(where.cuda_version, self.cuda_before))

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in (("version >=", self.since), ("version <", self.before),
                                          ("CUDA >=", self.cuda_since),
                                          ("CUDA <", self.cuda_before)) if v]
        if self.platforms:
            parts.append("on " + "/".join(self.platforms))
        return ", ".join(parts)


def _since(version: str | None, floor: str | None) -> bool:
    return floor is None or version is None or version_at_least(version, floor)


def _before(version: str | None, ceiling: str | None) -> bool:
    if ceiling is None:
        return True
    return version is not None and not version_at_least(version, ceiling)


@dataclass(frozen=True, slots=True)
class RunpathPackage:
    """``{package = "libnvvm", subdir = "nvvm", cuda_since = "13.0"}``: another package
    (root from ``--package-root``), gated; ``copy_packages`` copies it into ``subdir``."""

    package: str
    subdir: str = "lib"
    gate: Gate = Gate()

    def entry(self) -> str:
        return f"@{self.package}@/{self.subdir}" if self.subdir else f"@{self.package}@"


@dataclass(frozen=True, slots=True)
class PcEdit:
    """One edit of the ``.pc`` files whose name matches ``files`` (see README, Rules)."""

    files: tuple[Glob, ...]
    gate: Gate = Gate()
    drop: bool = False                    # the file is not shipped (npp's nppi/nppicom)
    requires: tuple[str, ...] = ()        # "cudart" -> "Requires: cudart-<X.Y of the file>"
    replace: tuple[tuple[str, str], ...] = ()  # literal text substitutions
    libdir_output: str | None = None      # libdir=<that output>/lib (nvml: stubs)
    driver_rpath: bool = False            # Libs: ... -Wl,-rpath,<driver link>/lib
    drop_cudaroot: bool = False           # cudart: the cudaroot= line is removed
    cflags_packages: tuple[str, ...] = ()  # Cflags: -I<root of pname>/include (cudart 13)

    def matches(self, name: str, where: Where) -> bool:
        return any(g.matches(name) for g in self.files) and self.gate.applies(where)


@dataclass(frozen=True, slots=True)
class OutputWhen:
    """An output declared only where the gate applies (cuda_cupti's static)."""

    output: str
    gate: Gate


@dataclass(frozen=True, slots=True)
class DropEdit:
    """Members dropped where the gate applies (cuda_crt on CUDA 12: the nvcc payload), except
    those matching ``keep``. ``@python@`` in a ``keep`` glob is the build's Python X.Y
    (cuda_gdb keeps only its ``cuda-gdb-python<X.Y>-tui``); without one the entry drops
    nothing -- which wrapper the build can run is unknown."""

    globs: tuple[Glob, ...]
    gate: Gate = Gate()
    keep: tuple[str, ...] = ()

    def needs_python(self) -> bool:
        return any("@python@" in k for k in self.keep)

    def matches(self, path: str, where: Where) -> bool:
        if not any(g.matches(path) for g in self.globs) or not self.gate.applies(where):
            return False
        if self.needs_python() and where.python_version is None:
            return False
        python = where.python_version or ""
        return not any(compile_glob(k.replace("@python@", python)).matches(path)
                       for k in self.keep)


@dataclass(frozen=True, slots=True)
class AddNeeded:
    """``DT_NEEDED`` names added to the ELF files whose path matches ``files`` (Nixpkgs'
    ``patchelf --add-needed`` in a postFixup: tensorrt's ``trtexec``, cuDNN 8). ``@major@`` in a
    name is the package version's major (``libnvinfer_plugin.so.@major@``)."""

    files: tuple[Glob, ...]
    names: tuple[str, ...]
    gate: Gate = Gate()

    def resolve(self, version: str | None) -> tuple[str, ...]:
        """The names to add for a package of ``version`` (empty: the gate fails). A name that
        needs ``@major@`` is left out when the version is unknown (it cannot be written)."""
        if not self.gate.applies(Where(version=version)):
            return ()
        if not version:
            return tuple(n for n in self.names if "@major@" not in n)
        major = str(version_tuple(version)[0])
        return tuple(n.replace("@major@", major) for n in self.names)


def added_needed(entries: Sequence[AddNeeded],
                 version: str | None) -> tuple[tuple[tuple[Glob, ...], tuple[str, ...]], ...]:
    """``add_needed`` entries resolved for one package version: (file globs, names) pairs."""
    return tuple((e.files, names) for e in entries if (names := e.resolve(version)))


@dataclass(frozen=True, slots=True)
class LinkInto:
    """A relative link in ``directory`` to every placed file whose path matches ``files``, in
    the file's output (tensorrt: ``include/onnx/NvOnnxParser.h -> ../NvOnnxParser.h``, what
    Nixpkgs' ``ln -srt include/onnx/ NvOnnx*.h`` makes)."""

    files: tuple[Glob, ...]
    directory: str
    gate: Gate = Gate()

    def links(self, placed: Iterable[tuple[str, str]],
              where: Where) -> list[tuple[str, str, str]]:
        """``(output, link path, link text)`` for the placed ``(output, path)`` pairs."""
        if not self.gate.applies(where):
            return []
        found = []
        for output, dest in sorted(placed):
            if posixpath.dirname(dest) != self.directory and any(
                    g.matches(dest) for g in self.files):
                found.append((output, posixpath.join(self.directory, posixpath.basename(dest)),
                              posixpath.relpath(dest, self.directory)))
        return found


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replacements in the text files whose path in their output matches ``files`` (libcudss's
    CMake configs; see _textedits.py): ``replace`` literal ``(old, new)`` pairs, ``regex``
    ``(pattern, new)`` pairs (Python ``re``, one line at a time like ``sed -E``)."""

    files: tuple[Glob, ...]
    replace: tuple[tuple[str, str], ...] = ()
    regex: tuple[tuple[str, str], ...] = ()
    gate: Gate = Gate()

    def matches(self, path: str, where: Where) -> bool:
        return any(g.matches(path) for g in self.files) and self.gate.applies(where)


# -- parsing ----------------------------------------------------------------------------------


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
    for key in ("since", "before", "cuda_since", "cuda_before"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not _VERSION.match(value)):
            raise RulesError(f"{where}: '{key}' must be a version string like \"12.8\"")
        values[key] = value
    return Gate(values["since"], values["before"], values["cuda_since"], values["cuda_before"],
                string_list(table.get("platforms"), where, "platforms"))


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


_PC_KEYS = frozenset({"files", "drop", "requires", "replace", "libdir_output", "driver_rpath",
                      "drop_cudaroot", "cflags_packages", "description"})


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
            replace=tuple(replace.items()), libdir_output=libdir,
            driver_rpath=_bool(table, "driver_rpath", where),
            drop_cudaroot=_bool(table, "drop_cudaroot", where),
            cflags_packages=string_list(table.get("cflags_packages"), where, "cflags_packages")))
    return tuple(edits)


def parse_output_when(value: Any, filename: str) -> tuple[OutputWhen, ...]:
    entries = []
    for where, table in _tables(value, filename, "output_when"):
        _check(table, frozenset({"output"}), where)
        output = table.get("output")
        if output not in OUTPUT_NAMES:
            raise RulesError(f"{where}: unknown output {output!r}")
        entries.append(OutputWhen(str(output), parse_gate(table, where)))
    return tuple(entries)


def parse_drops(value: Any, filename: str) -> tuple[DropEdit, ...]:
    entries = []
    for where, table in _tables(value, filename, "drop"):
        _check(table, frozenset({"match", "keep", "description"}), where)
        keep = string_list(table.get("keep"), where, "keep")
        try:
            for pattern in keep:
                compile_glob(pattern.replace("@python@", "3.0"))
        except GlobError as exc:
            raise RulesError(f"{where}: {exc}") from exc
        entries.append(DropEdit(glob_list(table.get("match"), where, "match"),
                                parse_gate(table, where), keep))
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
        _check(table, frozenset({"files", "replace", "regex", "description"}), where)
        replace, regex = _pairs(table, "replace", where), _pairs(table, "regex", where)
        if not replace and not regex:
            raise RulesError(f"{where}: needs 'replace' or 'regex' pairs")
        for pattern, _ in regex:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise RulesError(f"{where}: bad regex {pattern!r} ({exc})") from exc
        entries.append(TextEdit(glob_list(table.get("files"), where, "files"), replace, regex,
                                parse_gate(table, where)))
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


def declared_outputs(outputs: Sequence[str], when: Sequence[OutputWhen],
                     where: Where) -> tuple[str, ...]:
    """``outputs`` less the gated ones whose gates all fail here."""
    gated: dict[str, bool] = {}
    for entry in when:
        gated[entry.output] = gated.get(entry.output, False) or entry.gate.applies(where)
    return tuple(o for o in outputs if gated.get(o, True))
