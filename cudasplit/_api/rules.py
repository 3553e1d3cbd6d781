"""Rule files for a front end: the effective rule set of a package, and checking one file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cudasplit._argcheck import checked
from cudasplit._model import PackageId
from cudasplit._rulebook import (
    RuleSet,
    build_ruleset,
    describe_package,
    load_ruleset,
    read_rule_file,
    ruleset_toml,
)
from cudasplit._split.options import SplitOptions, check_package_known

__all__ = ["check_rule_file", "package_entry_lines", "ruleset_for", "ruleset_toml"]


@checked
def ruleset_for(package: str | None = None, files: Sequence[str | os.PathLike[str]] = (), *,
                default_rules: bool = False) -> RuleSet:
    """The rules a split of ``package`` would use, ``files`` first (highest precedence),
    then the shipped ones.

    Args:
        package: the package (``cuda_cudart``); ``None``: the default rules only.
        files: rule files that take precedence.
        default_rules: accept a package without ``rules/packages/<NAME>.toml``.

    Returns:
        The merged :class:`RuleSet`.

    Raises:
        OptionsError: ``package`` has no rules file (most likely misspelt; the message
            names near matches) and ``default_rules`` is false.
        RulesError: a rule file is invalid.
    """
    if package is not None:
        check_package_known(SplitOptions(package=PackageId(package), default_rules=default_rules))
    return load_ruleset(package, [os.fspath(f) for f in files])


@checked
def check_rule_file(path: str | os.PathLike[str]) -> RuleSet:
    """Read and validate one rule file on its own.

    Args:
        path: the TOML rule file.

    Returns:
        The :class:`RuleSet` of that file alone.

    Raises:
        RulesError: the file cannot be read, is not TOML, or breaks a rule (the message
            names ``file:rule``).
    """
    name = os.fspath(path)
    return build_ruleset([(name, read_rule_file(Path(name)))])


@checked
def package_entry_lines(ruleset: RuleSet) -> list[str]:
    """The rule set's package-table entry as ``key = value`` lines, every key (defaults
    too) with its gates spelt out, so the entry reads the same for every package (for
    reading; :func:`ruleset_toml` gives TOML).

    Args:
        ruleset: from :func:`load_ruleset` or :func:`ruleset_for`.

    Returns:
        One line per key.

    Raises:
        Nothing.
    """
    return describe_package(ruleset.package)
