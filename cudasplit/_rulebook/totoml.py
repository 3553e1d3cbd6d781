"""``rules show``: the effective rules of several files as one TOML document that reads back
(``tomllib``, then :func:`build_ruleset`) into the same rules, renames and package settings.

The files are re-read as written, not re-described from the parsed rules: the merge is
``[package]`` key by key (the first file that sets a key wins, as :func:`load_package`
merges), then every ``[[rename]]`` and ``[[rule]]`` in precedence order. A rule name that two
files use is qualified with its file (``default.toml:samples``), so the one document stays
valid; a comment before each rule says where it came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cudasplit._argcheck import checked
from cudasplit._rulebook.load import read_rule_file
from cudasplit._rulebook.profile import DEFAULT_PROFILE, substitute
from cudasplit._rulebook.ruleset import RuleSet

__all__ = ["ruleset_toml"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@checked
def ruleset_toml(ruleset: RuleSet) -> str:
    """The rule set's files merged into one TOML document that ``tomllib`` reads back
    into the same rules (``rules show``): ``[package]`` key by key as the merge takes
    them, then every ``[[rename]]`` and ``[[rule]]`` in precedence order.

    Args:
        ruleset: from :func:`load_ruleset` or :func:`ruleset_for` (its files are re-read).

    Returns:
        The TOML text, with a comment naming each rule's file.

    Raises:
        RulesError: a file of the rule set can no longer be read.
    """
    variables = dict(ruleset.profile.variables)
    documents = [(name, substitute(read_rule_file(Path(name)), variables))
                 for name in ruleset.files]
    lines = ["# files, highest precedence first: " + _visible(", ".join(ruleset.files)),
             "schema = 1"]
    profile = next((doc["profile"] for _name, doc in reversed(documents) if "profile" in doc),
                   None)
    if ruleset.profile.name != DEFAULT_PROFILE and isinstance(profile, Mapping):
        if variables:
            lines.insert(1, "# profile variables: " + ", ".join(
                f"@{k}@ = {v}" for k, v in sorted(variables.items())))
        lines += ["", "[profile]", *_table_lines(profile)]
    package = _merged_package(documents)
    if package:
        lines += ["", "[package]", *(f"{_key(k)} = {_value(v)}" for k, v in package.items())]
    for name, doc in documents:
        for table in doc.get("rename", []):
            lines += ["", f"# {_visible(Path(name).name)}", "[[rename]]", *_table_lines(table)]
    seen = _duplicate_names(documents)
    index = 0
    for name, doc in documents:
        label = Path(name).name
        for table in doc.get("rule", []):
            index += 1
            rule = dict(table)
            if rule.get("name") in seen:
                rule["name"] = f"{label}:{rule['name']}"
            lines += ["", _visible(f"# {index}. {label}:{table.get('name')}"), "[[rule]]",
                      *_table_lines(rule)]
    return "\n".join(lines) + "\n"


def _merged_package(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for _name, doc in documents:
        for key, value in doc.get("package", {}).items():
            merged.setdefault(key, value)
    return merged


def _duplicate_names(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> set[str]:
    counts: dict[str, int] = {}
    for _name, doc in documents:
        for table in doc.get("rule", []):
            counts[str(table.get("name"))] = counts.get(str(table.get("name")), 0) + 1
    return {name for name, count in counts.items() if count > 1}


def _table_lines(table: Mapping[str, Any]) -> list[str]:
    return [f"{_key(k)} = {_value(v)}" for k, v in table.items()]


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _visible(json.dumps(key, ensure_ascii=False))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes (\", \\, \n, \uXXXX) are TOML basic-string escapes too.
        return _visible(json.dumps(value, ensure_ascii=False))
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))  # dates and times: TOML would need their own syntax


def _visible(text: str) -> str:
    """Characters a terminal would act on or that reorder text (C1 controls such as U+009B,
    bidi overrides such as U+202E; JSON leaves them raw) as TOML's ``\\uXXXX`` escapes:
    ``rules show`` prints to a terminal, and the text still reads back the same."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else
                   f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}"
                   for ch in text)
