"""Command ``nix`` (``setup-hook``, ``consumer-hook``): the hooks a Nix build sources."""

from __future__ import annotations

from importlib.resources import as_file, files

import click

from ._text import say


@click.group("nix")
def nix_group() -> None:
    """Helpers for Nix builds."""


@nix_group.command("setup-hook")
def nix_setup_hook() -> None:
    """Print the path of the setup hook (defines cudasplitInstallPhase)."""
    # The package is installed as files (wheel or editable), so the path is stable.
    with as_file(files("cudasplit") / "nix" / "setup-hook.sh") as path:
        say(str(path))


@nix_group.command("consumer-hook")
def nix_consumer_hook() -> None:
    """Print the path of the consumer-guards hook (ambiguous RUNPATHs, dlopen RUNPATH entries,
    closure budgets; what `split --consumer-guards` writes into the lib output)."""
    from ..guards import consumer_guards_hook

    say(consumer_guards_hook())
