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

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from cudasplit._argcheck import checked
from cudasplit._rulebook.package.load import load_package
from cudasplit._rulebook.package.parse import (
    check_keys,
    glob_list,
    parse_text_edits,
    string_list,
    table_of,
)
from cudasplit._rulebook.package.settings import PackageSettings
from cudasplit._rulebook.package.table import TextEdit, TextEditsFrom
from cudasplit._rulebook.profile import (
    DEFAULT_PROFILE,
    Profile,
    parse_profile,
    profile_dir,
    profile_variables,
    substitute,
)
from cudasplit._rulebook.regexprobe import regex_hazards
from cudasplit._rulebook.ruleset import (
    KIND_NAMES,
    Rename,
    Rule,
    RuleRef,
    RuleSet,
)
from cudasplit._rulebook.tomlread import read_toml
from cudasplit._searchpath import is_origin_relative, is_stub_entry
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
    "package_table",
    "read_rule_file",
]

_PACKAGE_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")

RULE_KEYS = frozenset(
    {"name", "match", "kind", "output", "action", "patch", "keep_runpath", "runpath_append",
     "transform", "description", "fallback", "relocate", "link_in", "link_under", "runpath",
     "runpath_tag", "every_output"}
)
RENAME_KEYS = frozenset({"name", "from", "to", "link_back", "description", "file"})
TOP_KEYS = frozenset({"schema", "profile", "package", "rule", "rename"})
PROFILE_KEYS = frozenset({"name", "description", "outputs", "package_outputs", "base_output",
                          "symlinks", "install_prefix", "platforms"})
ACTIONS = frozenset({"place", "drop"})
# pkgconfig-prefix: cudaroot= names the one install prefix (conda); nvcc-profile-prefix:
# NVIDIA's own profile, for nvcc in a prefix that holds targets/<dir>/ (as `cudasplit toolkit`).
TRANSFORMS = frozenset({"pkgconfig", "nvcc-profile", "pkgconfig-prefix", "nvcc-profile-prefix"})
_TAGS = {"rpath": "RPATH", "runpath": "RUNPATH"}


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
    *,
    profile: str = DEFAULT_PROFILE,
    platform: str | None = None,
) -> RuleSet:
    """The rules of one package: ``extra_files`` first (highest precedence), then
    ``<profile>/packages/<package_name>.toml`` when it exists, then ``<profile>/default.toml``
    (the default profile's directory is ``rules/`` itself, another's ``rules/profiles/<name>/``).

    Args:
        package_name: the package (``cuda_cudart``); ``None``: the default rules only.
        extra_files: rule files that take precedence over the shipped ones.
        rules_dir: a directory replacing the shipped ``rules/``.
        profile: the profile whose rules apply (``default``: Nixpkgs' outputs).
        platform: the NVIDIA platform (``linux-x86_64``); a profile that declares
            ``[profile.platforms]`` fills its ``@name@`` variables from it.

    Returns:
        The merged :class:`RuleSet` (rules, renames, package settings, the files read).

    Raises:
        RulesError: a file cannot be read, is not TOML, or breaks a rule (the message
            names ``file:rule``); an unknown profile, or a platform the profile lacks.
    """
    base = profile_dir(Path(rules_dir) if rules_dir is not None else default_rules_dir(),
                       profile)
    files: list[Path] = [Path(f) for f in extra_files]
    # A package's file is looked up by a name that can be a file name (a top directory's
    # pname always is): "../x" or a 5,000-byte word has none, and is never a path.
    if package_name and _PACKAGE_FILE.fullmatch(package_name):
        pkg_file = base / "packages" / f"{package_name}.toml"
        if pkg_file.is_file():
            files.append(pkg_file)
    files.append(base / "default.toml")
    documents = [(str(f), read_rule_file(f)) for f in files]
    if profile != DEFAULT_PROFILE:  # the default profile has no variables: read as written
        table = documents[-1][1].get("profile")
        variables = profile_variables(table if isinstance(table, dict) else None,
                                      documents[-1][0], platform)
        documents = [(name, substitute(doc, variables)) for name, doc in documents]
        return build_ruleset(documents, base, variables)
    return build_ruleset(documents, base)


@functools.cache
def package_table(package_name: str, rules_dir: Path | None = None) -> PackageSettings | None:
    """The ``[package]`` table of the default profile's ``packages/<package_name>.toml`` alone,
    as :func:`load_ruleset` would merge it (its ``text_edits_from`` resolved), or None when
    the package has no file. The rules are not read: a caller that only asks what the table
    says (``nixify``: outputs, RUNPATH packages, edges) for many packages pays for one file
    each, once per process (the value is cached; the shipped files do not change under it).

    Raises:
        RulesError: the file cannot be read or breaks a ``[package]`` key.
    """
    base = rules_dir or default_rules_dir()
    path = base / "packages" / f"{package_name}.toml"
    if not path.is_file():
        return None
    doc = read_rule_file(path)
    if doc.get("schema", 1) != 1:
        raise RulesError(f"{path}: unsupported schema {doc.get('schema')!r} (expected 1)")
    table = table_of(doc.get("package", {}), str(path), "package")
    package = load_package([(str(path), table)])
    if package.text_edits_from:
        package = replace(package, text_edits=package.text_edits + tuple(
            _edits_from(base, package.text_edits_from)))
    return package


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
    """The TOML of one rule file, read within the bounds of
    :mod:`cudasplit._rulebook.tomlread` (:class:`RulesError` naming the file)."""
    return read_toml(path)


def build_ruleset(documents: Iterable[tuple[str, Mapping[str, Any]]],
                  rules_dir: Path | None = None,
                  variables: Mapping[str, str] | None = None) -> RuleSet:
    """The rules of ``documents`` (highest precedence first); ``text_edits_from`` names
    packages of ``rules_dir`` (default: the shipped rules). The last document with a
    ``[profile]`` table (the profile's own ``default.toml``) decides the outputs a rule may
    name; ``variables``: the ``@name@`` values already filled in (kept on the profile)."""
    documents = list(documents)
    profile = _profile(documents, variables)
    known = _known_outputs(documents, profile)
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
        rules.extend(_load_rules(doc.get("rule", []), filename, label, known))
        renames.extend(_load_renames(doc.get("rename", []), filename, label))
        if "package" in doc:
            package_tables.append((filename, table_of(doc["package"], filename, "package")))
        names.append(filename)
    package = load_package(package_tables, known)
    _refuse_slow_regexes(package_tables)
    if package.text_edits_from:
        package = replace(package, text_edits=package.text_edits + tuple(
            _edits_from(rules_dir or default_rules_dir(), package.text_edits_from)))
    return RuleSet(tuple(rules), tuple(renames), package, tuple(names), profile)


def _profile(documents: Sequence[tuple[str, Mapping[str, Any]]],
             variables: Mapping[str, str] | None) -> Profile:
    for filename, doc in reversed(documents):
        if "profile" in doc:
            table = table_of(doc["profile"], filename, "profile")
            check_keys(table, PROFILE_KEYS, filename, "[profile]")
            return parse_profile(table, filename, variables)
    return Profile()


def _known_outputs(documents: Sequence[tuple[str, Mapping[str, Any]]],
                   profile: Profile) -> tuple[str, ...]:
    """The outputs rules may name: the profile's, and with ``package_outputs`` the package's
    (``outputs`` of the first ``[package]`` table that sets it, as the merge takes it)."""
    if not profile.package_outputs:
        return profile.outputs
    for filename, doc in documents:
        table = doc.get("package")
        if isinstance(table, dict) and "outputs" in table:
            own = string_list(table["outputs"], f"{filename}:[package]", "outputs")
            return tuple(dict.fromkeys((*profile.outputs, *own)))
    return profile.outputs


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


def _load_rules(entries: Any, filename: str, label: str,
                known: tuple[str, ...]) -> list[Rule]:
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
        rules.append(_load_rule(table, filename, label, name, known))
    return rules


def _load_rule(table: Mapping[str, Any], filename: str, label: str, name: str,
               known: tuple[str, ...]) -> Rule:
    where = f"{filename}:{name}"
    check_keys(table, RULE_KEYS, filename, name)
    action = table.get("action", "place")
    if action not in ACTIONS:
        raise RulesError(f"{where}: unknown action {action!r} (use place or drop)")
    output = table.get("output")
    if action == "place":
        if output not in known:
            raise RulesError(
                f"{where}: unknown or missing output {output!r} "
                f"(known: {', '.join(known)})"
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
        fallback=_fallback(table.get("fallback"), where, known),
        **_placement_keys(table, where, known),
    )


def _fallback(value: Any, where: str, known: tuple[str, ...]) -> str | None:
    if value is not None and value not in known:
        raise RulesError(f"{where}: unknown fallback output {value!r}")
    return None if value is None else str(value)


def _placement_keys(table: Mapping[str, Any], where: str,
                    known: tuple[str, ...]) -> dict[str, Any]:
    """relocate, link_in/link_under, the exact runpath and its tag, every_output."""
    keys: dict[str, Any] = {}
    for key in ("relocate", "link_under"):
        if key in table:
            keys[key] = _directory_prefix(table[key], where, key)
    link_in = table.get("link_in")
    if link_in is not None:
        if link_in not in known:
            raise RulesError(f"{where}: link_in names an unknown output {link_in!r}")
        keys["link_in"] = str(link_in)
    elif "link_under" in table:
        raise RulesError(f"{where}: link_under needs link_in (the output the link goes to)")
    if "runpath" in table:
        keys["runpath"] = _exact_runpath(table["runpath"], where)
    tag = table.get("runpath_tag")
    if tag is not None:
        if not isinstance(tag, str) or tag.lower() not in _TAGS:
            raise RulesError(f"{where}: runpath_tag must be rpath or runpath, not {tag!r}")
        keys["runpath_tag"] = _TAGS[tag.lower()]
    every = _opt_bool(table, "every_output", where)
    if every:
        keys["every_output"] = True
    return keys


def _directory_prefix(value: Any, where: str, key: str) -> str:
    """``targets/x86_64-linux/``: relative, no ``.``/``..``, one trailing ``/`` ('' = none)."""
    if not isinstance(value, str):
        raise RulesError(f"{where}: {key} must be a directory path")
    text = value.strip("/")
    if not text:
        return ""
    if value.startswith("/") or any(p in ("", ".", "..") for p in text.split("/")) \
            or "\0" in text:
        raise RulesError(f"{where}: {key} must be a relative directory without '.' or '..', "
                         f"not {value!r}")
    return text + "/"


def _exact_runpath(value: Any, where: str) -> tuple[str, ...]:
    entries = string_list(value, where, "runpath")
    if not entries:
        raise RulesError(f"{where}: runpath must name at least one entry")
    for entry in entries:
        bad = (not entry or ":" in entry or "\0" in entry
               or not (is_origin_relative(entry) or entry.startswith("/")))
        if bad or is_stub_entry(entry, ()):
            raise RulesError(f"{where}: runpath entry {entry!r} must be $ORIGIN-relative or "
                             "absolute, without ':' and outside any stubs directory")
    return entries


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
