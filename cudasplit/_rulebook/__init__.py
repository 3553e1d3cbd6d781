"""The rule engine: TOML rule files, checked, -> a frozen :class:`RuleSet` that decides each
member's output.

Precedence (first matching rule wins), highest first: files given with ``--rules FILE`` (in the
order given), ``rules/packages/<pname>.toml`` for the package being split, ``rules/default.toml``.
The parts: loading and checking files (``load``), the rule set and one rule against one member
(``ruleset``), the ``[package]`` table (``pkgload``, ``pkgparse``, ``pkgsettings``,
``pkgtable``, ``gates``), and ``rules show`` (``show``, ``totoml``).
"""

from __future__ import annotations

from cudasplit._rulebook.gates import version_tuple
from cudasplit._rulebook.load import (
    ACTIONS,
    PROFILE_KEYS,
    RENAME_KEYS,
    RULE_KEYS,
    TOP_KEYS,
    TRANSFORMS,
    build_ruleset,
    default_rules_dir,
    load_ruleset,
    read_rule_file,
)
from cudasplit._rulebook.pkgload import PACKAGE_KEYS
from cudasplit._rulebook.pkgparse import parse_dlopen_key
from cudasplit._rulebook.pkgsettings import PackageSettings
from cudasplit._rulebook.pkgtable import (
    DlopenNeed,
    Gate,
    TextEdit,
    Where,
    added_needed,
    version_at_least,
)
from cudasplit._rulebook.regexprobe import regex_hazard, regex_hazards
from cudasplit._rulebook.renames import aliases, name_at, renamed_pairs
from cudasplit._rulebook.ruleset import (
    KIND_NAMES,
    Decision,
    Rename,
    Rule,
    RuleRef,
    RuleSet,
    kind_matches,
)
from cudasplit._rulebook.show import describe_package
from cudasplit._rulebook.totoml import ruleset_toml

__all__ = [
    "ACTIONS",
    "KIND_NAMES",
    "PACKAGE_KEYS",
    "PROFILE_KEYS",
    "RENAME_KEYS",
    "RULE_KEYS",
    "TOP_KEYS",
    "TRANSFORMS",
    "Decision",
    "DlopenNeed",
    "Gate",
    "PackageSettings",
    "Rename",
    "Rule",
    "RuleRef",
    "RuleSet",
    "TextEdit",
    "Where",
    "added_needed",
    "aliases",
    "build_ruleset",
    "default_rules_dir",
    "describe_package",
    "kind_matches",
    "load_ruleset",
    "name_at",
    "parse_dlopen_key",
    "read_rule_file",
    "regex_hazard",
    "regex_hazards",
    "renamed_pairs",
    "ruleset_toml",
    "version_at_least",
    "version_tuple",
]
