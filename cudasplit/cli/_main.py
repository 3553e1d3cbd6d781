"""The ``cudasplit`` group with every command, and the console entry point :func:`run`
(exit codes for Ctrl-C, SIGTERM, SIGHUP and a reader that left)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, NoReturn

import click

from ._completion import completion_command
from ._explain import explain_command, inspect_command, rules_group
from ._ldd import ldd_command
from ._manifests import features_command, verify_command
from ._release import closure_command, diff_command, nixify_command, nixify_sets_command
from ._repack import nix_group, repack_command
from ._split import split_command
from ._terminal import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, err
from ._text import message
from ._toolkit import toolkit_command


class _StdoutClosed(BaseException):
    """The reader of standard output left (``| head``): passes click's own EPIPE handling,
    which would exit 1, our "problems found" code."""


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _StdoutClosed() from None

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """click's standalone mode, but an option error is one line like every other error
        (``cudasplit: error: ...``, exit 2) instead of click's usage block."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            option_error(exc)
        sys.exit(code if isinstance(code, int) else 0)


def option_error(exc: click.ClickException) -> NoReturn:
    """One line on stderr naming the command to ask for help, then click's exit code (2 for
    usage errors)."""
    command = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else None
    hint = f" (see '{command} --help')" if command else ""
    err(message("error", exc.format_message().replace("\n", " ") + hint))
    sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cudasplit")
def main() -> None:
    """Split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs."""


for _command in (split_command, inspect_command, explain_command, rules_group, repack_command,
                 nix_group, verify_command, features_command, ldd_command, closure_command,
                 nixify_command, nixify_sets_command, diff_command, completion_command,
                 toolkit_command):
    main.add_command(_command)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so every ``finally``/abort runs (staging
    removed) exactly as for Ctrl-C. Not an ``Exception``: nothing may swallow it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def run() -> None:
    """Console entry point: click's standalone mode, but Ctrl-C exits 130, SIGTERM 143 and
    SIGHUP 129 (128 + signal, documented), each after removing the staging directory."""
    # The decoder thread hands over a chunk every few ms; with the default 5 ms switch
    # interval it can sit waiting for the GIL while the writer runs Python code. A shorter
    # interval measured ~2-3% faster end to end on single-block xz (the decode-bound case).
    sys.setswitchinterval(0.0005)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    try:
        main.main(prog_name="cudasplit", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err(message("error", "interrupted"))
        sys.exit(EXIT_INTERRUPTED)
    except Terminated as exc:
        err(message("error", f"terminated by {exc}"))
        sys.exit(128 + exc.signum)
    except (BrokenPipeError, _StdoutClosed):
        _quiet_broken_pipe()
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        option_error(exc)


def _quiet_broken_pipe() -> NoReturn:
    """``cudasplit inspect X | head``: the reader left; exit without a traceback. stdout is
    pointed at /dev/null so the interpreter's final flush does not fail once more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)
