"""Rule files: loading and checking them, the rule set they make, and the package table.

A split takes its rules from a profile and the package's own file (``rules/``); these are for a
front end, a test or a rules author: :func:`load_ruleset` and :func:`ruleset_for` give the
:class:`RuleSet` a split would use, :func:`check_rule_file` checks one file,
:func:`ruleset_toml` and :func:`package_entry_lines` print them back (``cudasplit rules``). The
other classes are the values a :class:`RuleSet` holds: its rules, the decisions they make, and
the package table's entries (:class:`PackageSettings`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.rules": (
        "check_rule_file", "package_entry_lines", "ruleset_for", "ruleset_toml"),
    "cudasplit._rulebook": (
        "AddNeeded", "Decision", "DlopenNeed", "DropEdit", "Gate", "LinkInto", "OutputWhen",
        "PackageLink", "PackageSettings", "PcEdit", "Profile", "Rename", "Rule", "RuleRef",
        "RuleSet", "RunpathPackage", "TextEdit", "TextEditsFrom", "Where", "load_ruleset"),
    "cudasplit._globs": ("Glob",),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.rules import check_rule_file, package_entry_lines, ruleset_for, ruleset_toml
    from cudasplit._globs import Glob
    from cudasplit._rulebook import (
        AddNeeded,
        Decision,
        DlopenNeed,
        DropEdit,
        Gate,
        LinkInto,
        OutputWhen,
        PackageLink,
        PackageSettings,
        PcEdit,
        Profile,
        Rename,
        Rule,
        RuleRef,
        RuleSet,
        RunpathPackage,
        TextEdit,
        TextEditsFrom,
        Where,
        load_ruleset,
    )

__all__ = [
    "AddNeeded",
    "Decision",
    "DlopenNeed",
    "DropEdit",
    "Gate",
    "Glob",
    "LinkInto",
    "OutputWhen",
    "PackageLink",
    "PackageSettings",
    "PcEdit",
    "Profile",
    "Rename",
    "Rule",
    "RuleRef",
    "RuleSet",
    "RunpathPackage",
    "TextEdit",
    "TextEditsFrom",
    "Where",
    "check_rule_file",
    "load_ruleset",
    "package_entry_lines",
    "ruleset_for",
    "ruleset_toml",
]
