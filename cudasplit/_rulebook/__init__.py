"""The rule engine: TOML rule files, checked, -> a frozen :class:`RuleSet` that decides each
member's output.

Precedence (first matching rule wins), highest first: files given with ``--rules FILE`` (in the
order given), ``rules/packages/<pname>.toml`` for the package being split, ``rules/default.toml``.
The parts: loading and checking files (``load``), the rule set and one rule against one member
(``ruleset``), the ``[package]`` table (the ``package`` folder, with the version gates of its
entries in ``gates``), and ``rules show`` (``totoml``; ``--package`` reads out the settings).
"""

from __future__ import annotations

from cudasplit._rulebook.gates import version_tuple
from cudasplit._rulebook.load import (
    build_ruleset,
    default_rules_dir,
    load_ruleset,
    package_table,
    read_rule_file,
)
from cudasplit._rulebook.package.parse import (
    check_keys,
    parse_dlopen_key,
    string_list,
    table_of,
)
from cudasplit._rulebook.package.settings import PackageSettings, describe_package
from cudasplit._rulebook.package.table import (
    AddNeeded,
    DlopenNeed,
    DropEdit,
    Gate,
    LinkInto,
    OutputWhen,
    PackageLink,
    PcEdit,
    RunpathPackage,
    TextEdit,
    TextEditsFrom,
    Where,
    added_needed,
    version_at_least,
)
from cudasplit._rulebook.profile import (
    DEFAULT_PROFILE,
    Profile,
    available_profiles,
    profile_dir,
    profile_variables,
    substitute,
)
from cudasplit._rulebook.regexprobe import regex_hazard, regex_hazards
from cudasplit._rulebook.renames import aliases, name_at, renamed_pairs
from cudasplit._rulebook.ruleset import Decision, Rename, Rule, RuleRef, RuleSet
from cudasplit._rulebook.totoml import ruleset_toml

__all__ = [
    "DEFAULT_PROFILE",
    "AddNeeded",
    "Decision",
    "DlopenNeed",
    "DropEdit",
    "Gate",
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
    "added_needed",
    "aliases",
    "available_profiles",
    "build_ruleset",
    "check_keys",
    "default_rules_dir",
    "describe_package",
    "load_ruleset",
    "name_at",
    "package_table",
    "parse_dlopen_key",
    "profile_dir",
    "profile_variables",
    "read_rule_file",
    "regex_hazard",
    "regex_hazards",
    "renamed_pairs",
    "ruleset_toml",
    "string_list",
    "substitute",
    "table_of",
    "version_at_least",
    "version_tuple",
]
