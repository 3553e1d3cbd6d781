"""Loading rule files: TOML, checked, -> a frozen :class:`RuleSet` (with the package table).

Precedence (first matching rule wins), highest first:

1. files given with ``--rules FILE`` (in the order given);
2. ``rules/packages/<pname>.toml`` for the package being split, when present;
3. ``rules/default.toml``, the default profile.

Inside one file, rules are tried top to bottom. Renames (path normalisation such as
``pkg-config/`` -> ``share/pkgconfig/``) follow the same precedence and are applied before
classification, so rules match the normalised path. Every decision names the rule that made it.

"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from cudasplit._argcheck import checked
from cudasplit._model import OUTPUT_NAMES
from cudasplit._rulebook.pkgload import load_package
from cudasplit._rulebook.pkgparse import (
    check_keys,
    glob_list,
    parse_text_edits,
    string_list,
    table_of,
)
from cudasplit._rulebook.pkgtable import TextEdit, TextEditsFrom
from cudasplit._rulebook.regexprobe import regex_hazards
from cudasplit._rulebook.ruleset import (
    KIND_NAMES,
    Rename,
    Rule,
    RuleRef,
    RuleSet,
)
from cudasplit.errors import RulesError

__all__ = [
    "ACTIONS",
    "PROFILE_KEYS",
    "RENAME_KEYS",
    "RULE_KEYS",
    "TOP_KEYS",
    "TRANSFORMS",
    "build_ruleset",
    "default_rules_dir",
    "load_ruleset",
    "read_rule_file",
]

RULE_KEYS = frozenset(
    {"name", "match", "kind", "output", "action", "patch", "keep_runpath", "runpath_append",
     "transform", "description", "fallback"}
)
RENAME_KEYS = frozenset({"name", "from", "to", "link_back", "description", "file"})
TOP_KEYS = frozenset({"schema", "profile", "package", "rule", "rename"})
PROFILE_KEYS = frozenset({"name", "description", "outputs"})
ACTIONS = frozenset({"place", "drop"})
TRANSFORMS = frozenset({"pkgconfig", "nvcc-profile"})


def default_rules_dir() -> Path:
    """``rules/`` inside the installed wheel, else the source checkout's top-level ``rules/``."""
    packaged = resources.files("cudasplit") / "rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


@checked
def load_ruleset(
    package_name: str | None = None,
    extra_files: Sequence[str | Path] = (),
    rules_dir: Path | None = None,
) -> RuleSet:
    """The rules of one package: ``extra_files`` first (highest precedence), then
    ``rules/packages/<package_name>.toml`` when it exists, then ``rules/default.toml``.

    Args:
        package_name: the package (``cuda_cudart``); ``None``: the default rules only.
        extra_files: rule files that take precedence over the shipped ones.
        rules_dir: a directory replacing the shipped ``rules/``.

    Returns:
        The merged :class:`RuleSet` (rules, renames, package settings, the files read).

    Raises:
        RulesError: a file cannot be read, is not TOML, or breaks a rule (the message
            names ``file:rule``).
    """
    base = rules_dir or default_rules_dir()
    files: list[Path] = [Path(f) for f in extra_files]
    if package_name:
        pkg_file = base / "packages" / f"{package_name}.toml"
        if pkg_file.is_file():
            files.append(pkg_file)
    files.append(base / "default.toml")
    return build_ruleset([(str(f), read_rule_file(f)) for f in files], base)


def _edits_from(base: Path, sources: Iterable[TextEditsFrom]) -> Iterable[TextEdit]:
    """The other packages' text_edits, each under its own gate and the importing entry's."""
    for source in sources:
        path = base / "packages" / f"{source.package}.toml"
        if not path.is_file():
            raise RulesError(f"text_edits_from: no package file {path}")
        table = read_rule_file(path).get("package", {})
        if "text_edits_from" in table:
            raise RulesError(f"{path}: text_edits_from does not chain (it is imported)")
        for edit in parse_text_edits(table.get("text_edits", []), str(path)):
            gate = edit.gate.both(source.gate)
            if not gate.never():
                yield replace(edit, gate=gate)


def read_rule_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise RulesError(f"{path}: cannot read rule file ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{path}: invalid TOML ({exc})") from exc
    except UnicodeDecodeError as exc:  # tomllib decodes before parsing
        raise RulesError(f"{path}: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset "
                         f"{exc.start}); TOML files must be UTF-8") from exc


def build_ruleset(documents: Iterable[tuple[str, Mapping[str, Any]]],
                  rules_dir: Path | None = None) -> RuleSet:
    """The rules of ``documents`` (highest precedence first); ``text_edits_from`` names
    packages of ``rules_dir`` (default: the shipped rules)."""
    rules: list[Rule] = []
    renames: list[Rename] = []
    package_tables: list[tuple[str, Mapping[str, Any]]] = []
    names: list[str] = []
    for filename, doc in documents:
        label = Path(filename).name
        check_keys(doc, TOP_KEYS, f"{filename}", "top level")
        if doc.get("schema", 1) != 1:
            raise RulesError(f"{filename}: unsupported schema {doc.get('schema')!r} (expected 1)")
        if "profile" in doc:
            check_keys(table_of(doc["profile"], filename, "profile"), PROFILE_KEYS, filename,
                        "[profile]")
        rules.extend(_load_rules(doc.get("rule", []), filename, label))
        renames.extend(_load_renames(doc.get("rename", []), filename, label))
        if "package" in doc:
            package_tables.append((filename, table_of(doc["package"], filename, "package")))
        names.append(filename)
    package = load_package(package_tables)
    _refuse_slow_regexes(package_tables)
    if package.text_edits_from:
        package = replace(package, text_edits=package.text_edits + tuple(
            _edits_from(rules_dir or default_rules_dir(), package.text_edits_from)))
    return RuleSet(tuple(rules), tuple(renames), package, tuple(names))


def _refuse_slow_regexes(tables: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """A user's ``text_edits`` regex runs on archive text: one that backtracks
    catastrophically on a probe line is refused here, before any archive is read (the shipped
    files are probed by the test suite instead, so a split does not pay for it)."""
    shipped = default_rules_dir().resolve()
    for filename, table in tables:
        if Path(filename).resolve().is_relative_to(shipped):
            continue
        entries = table.get("text_edits", [])
        patterns = [pair[0] for entry in entries for pair in entry.get("regex", [])]
        for pattern, hazard in zip(patterns, regex_hazards(patterns), strict=True):
            if hazard is not None:
                raise RulesError(f"{filename}: text_edits regex {pattern!r} {hazard}")


def _load_rules(entries: Any, filename: str, label: str) -> list[Rule]:
    if not isinstance(entries, list):
        raise RulesError(f"{filename}: 'rule' must be an array of tables ([[rule]])")
    seen: set[str] = set()
    rules = []
    for index, entry in enumerate(entries):
        where = f"rule #{index + 1}"
        table = table_of(entry, filename, where)
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise RulesError(f"{filename}:{where}: 'name' (a non-empty string) is required")
        if name in seen:
            raise RulesError(f"{filename}:{name}: duplicate rule name")
        seen.add(name)
        rules.append(_load_rule(table, filename, label, name))
    return rules


def _load_rule(table: Mapping[str, Any], filename: str, label: str, name: str) -> Rule:
    where = f"{filename}:{name}"
    check_keys(table, RULE_KEYS, filename, name)
    action = table.get("action", "place")
    if action not in ACTIONS:
        raise RulesError(f"{where}: unknown action {action!r} (use place or drop)")
    output = table.get("output")
    if action == "place":
        if output not in OUTPUT_NAMES:
            raise RulesError(
                f"{where}: unknown or missing output {output!r} "
                f"(known: {', '.join(OUTPUT_NAMES)})"
            )
    elif output is not None:
        raise RulesError(f"{where}: a 'drop' rule takes no output")
    transform = table.get("transform")
    if transform is not None and transform not in TRANSFORMS:
        raise RulesError(f"{where}: unknown transform {transform!r}")
    return Rule(
        ref=RuleRef(label, name),
        globs=glob_list(table.get("match"), where, "match"),
        kinds=_kinds(table.get("kind"), where),
        output=output,
        action=action,
        patch=_opt_bool(table, "patch", where),
        keep_runpath=_opt_bool(table, "keep_runpath", where),
        runpath_append=string_list(table.get("runpath_append", []), where, "runpath_append"),
        transform=transform,
        description=str(table.get("description", "")),
        fallback=_fallback(table.get("fallback"), where),
    )


def _fallback(value: Any, where: str) -> str | None:
    if value is not None and value not in OUTPUT_NAMES:
        raise RulesError(f"{where}: unknown fallback output {value!r}")
    return None if value is None else str(value)


def _kinds(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    kinds = string_list(value, where, "kind")
    bad = sorted(set(kinds) - KIND_NAMES)
    if bad:
        raise RulesError(f"{where}: unknown kind(s) {', '.join(bad)} "
                         f"(known: {', '.join(sorted(KIND_NAMES))})")
    return frozenset(kinds)


def _opt_bool(table: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = table.get(key)
    if value is not None and not isinstance(value, bool):
        raise RulesError(f"{where}: '{key}' must be true or false")
    return value


def _load_renames(entries: Any, filename: str, label: str) -> list[Rename]:
    if not isinstance(entries, list):
        raise RulesError(f"{filename}: 'rename' must be an array of tables ([[rename]])")
    renames = []
    for index, entry in enumerate(entries):
        table = table_of(entry, filename, f"rename #{index + 1}")
        name = table.get("name") or f"rename #{index + 1}"
        where = f"{filename}:{name}"
        check_keys(table, RENAME_KEYS, filename, str(name))
        source, target = table.get("from"), table.get("to")
        if not isinstance(source, str) or not isinstance(target, str) or not source or not target:
            raise RulesError(f"{where}: 'from' and 'to' (directory prefixes) are required")
        climbs = ".." in (source + "/" + target).split("/")
        if source.startswith("/") or target.startswith("/") or climbs:
            raise RulesError(f"{where}: 'from' and 'to' must be relative paths without '..'")
        if table.get("file", False) is True:
            # One file moves (nsight_compute's ncu -> bin/ncu): exact paths, no link back.
            if source.endswith("/") or target.endswith("/") or table.get("link_back"):
                raise RulesError(f"{where}: a file rename takes file paths and no link_back")
            renames.append(Rename(RuleRef(label, str(name)), source, target))
            continue
        renames.append(Rename(RuleRef(label, str(name)), source.rstrip("/") + "/",
                              target.rstrip("/") + "/", bool(table.get("link_back", False))))
    return renames
