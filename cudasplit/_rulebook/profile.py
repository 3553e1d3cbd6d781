"""Profiles: which distribution's layout a rule set describes, as data (``[profile]``).

A profile is a rules directory: the default profile is ``rules/`` itself (Nixpkgs' outputs),
any other is ``rules/profiles/<name>/`` with its own ``default.toml`` and ``packages/``. Its
``[profile]`` table (in that ``default.toml``) says what the split engine may not assume:

* ``outputs``: the outputs every package has (the default profile's ten); with
  ``package_outputs = true`` each package file names its own as well (conda-forge: one conda
  package per output, ``cuda-cudart_linux-64``, ``cuda-cudart-dev``, ...);
* ``base_output``: where an unclaimed member and a missing output's fallback go (``out``);
  empty: nowhere (such members are dropped, and the rules must say where everything goes);
* ``symlinks``: ``follow-target`` (a symlink goes to its target's output) or ``own-rule`` (a
  symlink is classified by its own path like a file; a link into another output is allowed
  only along a declared ``link_edges`` edge, and still never dangles or escapes);
* ``install_prefix``: every output is installed into this one prefix (conda's placeholder):
  the layout names it for every output, so ``.pc`` files and links name one shared prefix;
* ``platforms``: per NVIDIA platform, the values of ``@name@`` variables the profile's files
  use (``@target_platform@`` = ``linux-64``, ``@targets_dir@`` = ``x86_64-linux``), filled
  in before the files are checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudasplit._model import DEFAULT_PROFILE, OUTPUT_NAMES
from cudasplit.errors import RulesError

__all__ = [
    "DEFAULT_PROFILE",
    "SYMLINK_MODES",
    "Profile",
    "available_profiles",
    "parse_profile",
    "profile_dir",
    "profile_variables",
    "substitute",
]

SYMLINK_MODES = ("follow-target", "own-rule")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_VARIABLE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Profile:
    """The ``[profile]`` table of a rule set (see the module docstring).

    Attributes:
        name: the profile's name (``default``, ``conda-forge``).
        description: one line for ``rules show``.
        outputs: the outputs every package has.
        package_outputs: package files name their own outputs too.
        base_output: unclaimed members and fallbacks go here; ``None``: they are dropped.
        symlinks: ``follow-target`` or ``own-rule``.
        install_prefix: the one prefix every output installs into (``None``: each output has
            its own root).
        variables: the ``@name@`` values filled in for this run's platform.

    Raises:
        Nothing: a value.
    """

    name: str = DEFAULT_PROFILE
    description: str = ""
    outputs: tuple[str, ...] = OUTPUT_NAMES
    package_outputs: bool = False
    base_output: str | None = "out"
    symlinks: str = "follow-target"
    install_prefix: str | None = None
    variables: tuple[tuple[str, str], ...] = ()

    @property
    def follows_targets(self) -> bool:
        return self.symlinks == "follow-target"


def profile_dir(rules_dir: Path, name: str) -> Path:
    """The rules directory of profile ``name`` inside ``rules_dir`` (the default: itself)."""
    if name == DEFAULT_PROFILE:
        return rules_dir
    if not _NAME.match(name):
        raise RulesError(f"profile {name!r}: not a profile name")
    path = rules_dir / "profiles" / name
    if not (path / "default.toml").is_file():
        known = ", ".join(available_profiles(rules_dir))
        raise RulesError(f"unknown profile {name!r} (known: {known})")
    return path


def available_profiles(rules_dir: Path) -> list[str]:
    """``default`` and every ``profiles/<name>/`` with a ``default.toml``."""
    found = sorted(p.parent.name for p in (rules_dir / "profiles").glob("*/default.toml"))
    return [DEFAULT_PROFILE, *found]


def parse_profile(table: Mapping[str, Any] | None, filename: str,
                  variables: Mapping[str, str] | None = None) -> Profile:
    """The :class:`Profile` of a ``[profile]`` table (``None``: the default profile)."""
    if table is None:
        return Profile()
    where = f"{filename}:[profile]"
    outputs = _names(table.get("outputs", list(OUTPUT_NAMES)), where, "outputs")
    base = table.get("base_output", "out")
    if not isinstance(base, str):
        raise RulesError(f"{where}: base_output must be a string ('' for none)")
    symlinks = table.get("symlinks", "follow-target")
    if symlinks not in SYMLINK_MODES:
        raise RulesError(f"{where}: symlinks must be one of {', '.join(SYMLINK_MODES)}, "
                         f"not {symlinks!r}")
    prefix = table.get("install_prefix")
    if prefix is not None and (not isinstance(prefix, str) or not prefix.startswith("/")
                               or ":" in prefix or "\0" in prefix):
        raise RulesError(f"{where}: install_prefix must be an absolute path")
    package_outputs = table.get("package_outputs", False)
    if not isinstance(package_outputs, bool):
        raise RulesError(f"{where}: package_outputs must be true or false")
    if base and base not in outputs and not package_outputs:
        raise RulesError(f"{where}: base_output {base!r} is not one of its outputs")
    return Profile(
        name=str(table.get("name", DEFAULT_PROFILE)),
        description=str(table.get("description", "")),
        outputs=outputs, package_outputs=package_outputs, base_output=base or None,
        symlinks=str(symlinks), install_prefix=prefix,
        variables=tuple(sorted((variables or {}).items())))


def _names(value: Any, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RulesError(f"{where}: {key} must be a list of output names")
    bad = [v for v in value if "/" in v or v in (".", "..")]
    if bad:
        raise RulesError(f"{where}: {key}: {bad[0]!r} is not an output name")
    return tuple(value)


def profile_variables(table: Mapping[str, Any] | None, filename: str,
                      platform: str | None) -> dict[str, str]:
    """The ``@name@`` values of ``platform`` from ``[profile.platforms]`` (none declared:
    none). A profile that declares platforms cannot be used for another one, or without one."""
    platforms = (table or {}).get("platforms")
    if not platforms:
        return {}
    where = f"{filename}:[profile.platforms]"
    if not isinstance(platforms, dict):
        raise RulesError(f"{where}: must be a table of platforms")
    known = ", ".join(sorted(platforms))
    if platform is None:
        raise RulesError(f"{filename}: this profile needs the platform, and the archive "
                         f"names none: give it (platform), one of {known}")
    values = platforms.get(platform)
    if not isinstance(values, dict):
        raise RulesError(f"{filename}: this profile has no platform {platform!r} "
                         f"(known: {known})")
    for name, value in values.items():
        if not _VARIABLE.match(name) or not isinstance(value, str) or "@" in value:
            raise RulesError(f"{where}.{platform}: {name!r} must be a lower-case name with "
                             "a string value")
    return {str(k): str(v) for k, v in values.items()}


def substitute(value: Any, variables: Mapping[str, str]) -> Any:
    """``value`` (a TOML document or part of one) with ``@name@`` replaced for ``variables``'
    names only (other ``@...@`` forms, such as ``@major@``, are left to their own keys)."""
    if not variables:
        return value
    if isinstance(value, str):
        for name, text in variables.items():
            value = value.replace(f"@{name}@", text)
        return value
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    return value
