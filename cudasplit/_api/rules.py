"""Rule files for a front end: the effective rule set of a package, and checking one file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cudasplit._argcheck import checked
from cudasplit._model import PackageId
from cudasplit._rulebook import (
    DEFAULT_PROFILE,
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
                default_rules: bool = False, profile: str = DEFAULT_PROFILE,
                platform: str | None = None) -> RuleSet:
    """The rules a split of ``package`` would use, ``files`` first (highest precedence),
    then the shipped ones.

    Args:
        package: the package (``cuda_cudart``); ``None``: the default rules only.
        files: rule files that take precedence.
        default_rules: accept a package without ``rules/packages/<NAME>.toml``.
        profile: the profile whose rules apply (``default``: Nixpkgs' outputs;
            ``conda-forge``).
        platform: the NVIDIA platform a profile's ``@name@`` variables are filled for
            (``linux-x86_64``); profiles that have variables need it.

    Returns:
        The merged :class:`RuleSet`.

    Raises:
        OptionsError: ``package`` has no rules file (most likely misspelt; the message
            names near matches) and ``default_rules`` is false, or an unknown profile.
        RulesError: a rule file is invalid, or the profile needs another platform.
    """
    options = SplitOptions(package=None if package is None else PackageId(package),
                           default_rules=default_rules, profile=profile)
    if package is not None:
        check_package_known(options)
    return load_ruleset(package, [os.fspath(f) for f in files], profile=profile,
                        platform=platform)


@checked
def check_rule_file(path: str | os.PathLike[str], *, profile: str = DEFAULT_PROFILE,
                    platform: str | None = None) -> RuleSet:
    """Read and validate one rule file on its own (with another profile: over that profile's
    ``default.toml``, whose outputs and variables it may use).

    Args:
        path: the TOML rule file.
        profile: ``default``: the file alone; another profile: the file first, then the
            profile's ``default.toml`` (a package file of ``rules/profiles/conda-forge``).
        platform: fills the profile's ``@name@`` variables (a profile that has them needs it).

    Returns:
        The :class:`RuleSet` of that file alone (with the profile's base).

    Raises:
        OptionsError: an unknown profile.
        RulesError: the file cannot be read, is not TOML, or breaks a rule (the message
            names ``file:rule``), or the profile needs another platform.
    """
    name = os.fspath(path)
    if profile != DEFAULT_PROFILE:
        SplitOptions(profile=profile)  # an unknown profile: the options' one-line error
        return load_ruleset(None, [name], profile=profile, platform=platform)
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
