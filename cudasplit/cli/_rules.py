"""Command ``rules`` (``show``, ``check``): the effective rules as one file, and rule files
checked."""

from __future__ import annotations

from collections.abc import Sequence

import click

from .. import CudasplitError, platform_name
from ..rules import check_rule_file, ruleset_for, ruleset_toml
from ._terminal import fail
from ._text import data, say


@click.group("rules")
def rules_group() -> None:
    """Show or check rule files."""


@rules_group.command("show")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--package", help="Include rules/packages/<NAME>.toml.")
@click.option("--profile", default="default", show_default=True, metavar="NAME",
              help="Whose layout: default (Nixpkgs' outputs) or conda-forge.")
@click.option("--platform", "platform", metavar="NAME", help="The platform a profile's "
              "@target_platform@/@targets_dir@ are filled for (linux-x86_64, linux-sbsa).")
def rules_show(files: Sequence[str], package: str | None, profile: str,
               platform: str | None) -> None:
    """Print the effective rules in precedence order (FILES first, then the shipped ones) as
    one TOML rule file: the package table merged key by key, then every rename and rule.
    Read back (tomllib), it gives the same rules; comments say which file each came from."""
    try:
        ruleset = ruleset_for(package, files, profile=profile,
                              platform=None if platform is None else platform_name(platform))
        data(ruleset_toml(ruleset), nl=False)
    except CudasplitError as exc:
        fail(exc)


@rules_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--profile", default="default", show_default=True, metavar="NAME",
              help="Check each file over this profile's default.toml (its outputs, variables).")
@click.option("--platform", "platform", metavar="NAME", help="The platform a profile's "
              "@target_platform@/@targets_dir@ are filled for (linux-x86_64, linux-sbsa).")
def rules_check(files: Sequence[str], profile: str, platform: str | None) -> None:
    """Validate rule files (each on its own); exit 2 with file:rule on the first error."""
    try:
        for name in files:
            check_rule_file(name, profile=profile,
                            platform=None if platform is None else platform_name(platform))
            say(f"{name}: ok")
    except CudasplitError as exc:
        fail(exc)
