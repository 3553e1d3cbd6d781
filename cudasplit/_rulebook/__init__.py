"""The rule engine: TOML rule files, checked, -> a frozen :class:`RuleSet` that decides each
member's output.

Precedence (first matching rule wins), highest first: files given with ``--rules FILE`` (in the
order given), ``rules/packages/<pname>.toml`` for the package being split, ``rules/default.toml``.
The parts: loading and checking files (``load``), the rule set and one rule against one member
(``ruleset``), the ``[package]`` table (the ``package`` folder, with the version gates of its
entries in ``gates``), and ``rules show`` (``totoml``; ``--package`` reads out the settings).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cudasplit._rulebook.gates import version_tuple
from cudasplit._rulebook.load import (
    build_ruleset,
    default_rules_dir,
    load_ruleset,
    package_table,
    read_rule_file,
)
from cudasplit._rulebook.package.parse import parse_dlopen_key
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
)
from cudasplit._rulebook.regexprobe import regex_hazard, regex_hazards
from cudasplit._rulebook.renames import aliases, name_at, renamed_pairs
from cudasplit._rulebook.ruleset import Decision, Rename, Rule, RuleRef, RuleSet
from cudasplit._rulebook.totoml import ruleset_toml

if TYPE_CHECKING:
    from cudasplit._rulebook.condaspec import (
        build_problem,
        name_problem,
        spec_problem,
        version_problem,
    )
    from cudasplit._rulebook.recipes import (
        CondaOutput,
        CondaProfile,
        RunValues,
        conda_profile,
        outputs_for,
    )

# A profile's package metadata (recipes/) and conda's grammar load on first use: a split
# never reads them.
_LAZY = {**dict.fromkeys(("CondaOutput", "CondaProfile", "RunValues", "conda_profile",
                          "outputs_for"), "cudasplit._rulebook.recipes"),
         **dict.fromkeys(("build_problem", "name_problem", "spec_problem", "version_problem"),
                         "cudasplit._rulebook.condaspec")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cudasplit._rulebook' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_PROFILE",
    "AddNeeded",
    "CondaOutput",
    "CondaProfile",
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
    "RunValues",
    "RunpathPackage",
    "TextEdit",
    "TextEditsFrom",
    "Where",
    "added_needed",
    "aliases",
    "available_profiles",
    "build_problem",
    "build_ruleset",
    "conda_profile",
    "default_rules_dir",
    "describe_package",
    "load_ruleset",
    "name_at",
    "name_problem",
    "outputs_for",
    "package_table",
    "parse_dlopen_key",
    "profile_dir",
    "read_rule_file",
    "regex_hazard",
    "regex_hazards",
    "renamed_pairs",
    "ruleset_toml",
    "spec_problem",
    "version_at_least",
    "version_problem",
    "version_tuple",
]
