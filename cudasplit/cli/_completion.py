"""``cudasplit completion SHELL``: the shell completion script (click's own)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from ._text import data

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    """Print the completion script of SHELL; load it from your shell's startup file:

    \b
      bash: eval "$(cudasplit completion bash)"      (~/.bashrc)
      zsh:  eval "$(cudasplit completion zsh)"       (~/.zshrc)
      fish: cudasplit completion fish | source        (~/.config/fish/config.fish)

    The same script comes from click's variable: _CUDASPLIT_COMPLETE=bash_source cudasplit.
    """
    root = ctx.find_root().command
    completer = get_completion_class(shell)
    assert completer is not None  # every name in SHELLS is one of click's
    data(completer(root, {}, "cudasplit", "_CUDASPLIT_COMPLETE").source())
