"""The ``cudasplit`` command: a thin click layer over the public API.

It imports nothing from cudasplit but public names (those of :mod:`cudasplit` and of its
documented modules, ``cudasplit.rules`` ...; ``tests/cli/test_public_api.py`` checks) and the
loader of lazy faces: all decisions live in the library. This package parses options, renders
reports and turns :class:`CudasplitError` into one-line messages and stable exit codes (see
README). One module per command, named after it; each loads when its command runs
(``_main.COMMANDS``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .._lazy import lazy_face

# click loads with the first of these: ``cudasplit --version`` (run() below) never does.
__getattr__, __dir__ = lazy_face(__name__, {"cudasplit.cli._main": ("Terminated", "main"),
                                            "cudasplit.cli._terminal": ("ProgressLine",)})

if TYPE_CHECKING:
    from ._main import Terminated, main
    from ._terminal import ProgressLine

__all__ = ["ProgressLine", "Terminated", "main", "run"]


def run() -> None:
    """Console entry point: :func:`cudasplit.cli._main.run` (click's standalone mode with the
    documented exit codes). ``cudasplit --version`` is answered before click is imported:
    the same line click prints, in a fraction of the time."""
    if sys.argv[1:] == ["--version"]:
        from .. import __version__

        try:
            print(f"cudasplit, version {__version__}", flush=True)
        except BrokenPipeError:  # the reader left (`| true`): quietly, as every command
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)  # 128 + SIGPIPE, the code the README documents
        sys.exit(0)
    from ._main import run as run_command

    run_command()
