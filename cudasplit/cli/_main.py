"""The ``cudasplit`` group with every command, and the console entry point :func:`run`
(exit codes for Ctrl-C, SIGTERM, SIGHUP and a reader that left).

Commands load on first use: ``cudasplit split`` imports the split command's module and
nothing of ``verify``, ``nixify`` or ``ldd`` (``cudasplit --version`` none at all), which is
most of the start-up a short run pays (benchmarks §12).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, NoReturn

import click

from .. import __version__
from ._terminal import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, err
from ._text import message

# Every command: its name, the module of this package that defines it (named after the
# command; nixify-sets beside nixify), and its name there.
COMMANDS: dict[str, tuple[str, str]] = {
    "split": ("_split", "split_command"),
    "inspect": ("_inspect", "inspect_command"),
    "explain": ("_explain", "explain_command"),
    "rules": ("_rules", "rules_group"),
    "repack": ("_repack", "repack_command"),
    "nix": ("_nix", "nix_group"),
    "verify": ("_verify", "verify_command"),
    "features": ("_features", "features_command"),
    "ldd": ("_ldd", "ldd_command"),
    "closure": ("_closure", "closure_command"),
    "nixify": ("_nixify", "nixify_command"),
    "nixify-sets": ("_nixify", "nixify_sets_command"),
    "diff": ("_diff", "diff_command"),
    "completion": ("_completion", "completion_command"),
    "toolkit": ("_toolkit", "toolkit_command"),
    "gpu-plan": ("_gpu_plan", "gpu_plan_command"),
    "sbom": ("_sbom", "sbom_command"),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's ``commands``: names known up front, each command imported when it is first
    looked up (click asks ``get``/``[]`` for the one being run, iterates names for help)."""

    def __init__(self, table: dict[str, tuple[str, str]]) -> None:
        self._table = dict(table)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attr = self._table[name]  # KeyError: no such command
            where = f"{__package__}.{module}"
            __import__(where)  # not importlib's: -X importtime shows this one
            command = getattr(sys.modules[where], attr)
            assert command.name == name, (name, command.name)
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._table.setdefault(name, ("", ""))
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._table[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table


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
# The version the package says, not the installed metadata's (importlib.metadata costs a
# scan of sys.path on every --version; the two agree: tests/cli/test_startup.py).
@click.version_option(__version__, package_name="cudasplit")
def main() -> None:
    """Split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs."""


main.commands = LazyCommands(COMMANDS)


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
