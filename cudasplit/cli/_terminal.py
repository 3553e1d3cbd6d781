"""What the CLI writes to standard error: one status line on a real terminal, messages, and
the one-line error with its exit code.

Every message goes through :func:`err` (log records through :class:`ClearingHandler`), which
clears the status line first, so an error never lands in the middle of it. Inside a Nix
builder (``NIX_BUILD_TOP`` set) stderr is a pty whose bytes end up in the build log: there is
no status line there at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NoReturn

import click

from ._text import flag_named, message, shown

if TYPE_CHECKING:  # annotations only: `cudasplit --version` loads none of them
    from .. import CudasplitError, Problem, Progress, Report
    from ..outputs import ClosureReport

# The exit codes the README documents; a CudasplitError brings its own (exit_code, 2 or 1).
EXIT_OK, EXIT_PROBLEMS, EXIT_INTERRUPTED = 0, 1, 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that left
EXIT_FOUND = 1  # closure --strict found warnings; diff found a change


class ProgressLine:
    """One self-overwriting status line on an interactive terminal; nothing otherwise."""

    MIN_INTERVAL = 0.1

    def __init__(self, unit: str = "member") -> None:
        self.unit = unit  # what Progress.members counts: member, tarball, file
        self._last = 0.0
        self._start = time.monotonic()
        # When each source was first heard of: a rate per source (a batch's, a repack's
        # compressing phase), not bytes of one over the time of all.
        self._starts: dict[str, float] = {}
        self._lock = threading.Lock()
        self._width = 0
        self._heard: Progress | None = None   # the last update and when: for beat()
        self._heard_at = 0.0

    @classmethod
    def for_terminal(cls, quiet: bool, env: Mapping[str, str] | None = None,
                     unit: str = "member") -> ProgressLine | None:
        if quiet or not wants_status_line(env):
            return None
        line = cls(unit)
        _ACTIVE[0] = line
        return line

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        self._heard, self._heard_at = progress, now
        self._draw(progress, now)

    def beat(self) -> None:
        """Draw the last update again with the seconds since it came: a phase that calls
        nothing for a while (writing a document) still moves the line."""
        heard, now = self._heard, time.monotonic()
        if heard is not None:
            waited = f"{heard.current} ({now - self._heard_at:.0f} s)".lstrip()
            self._draw(dataclasses.replace(heard, current=waited, done=False), now)

    def _draw(self, progress: Progress, now: float) -> None:
        if not progress.done and now - self._last < self.MIN_INTERVAL:
            return
        self._last = now
        start = self._starts.setdefault(progress.source, self._start if not self._starts
                                        else now)
        rate = progress.bytes / max(now - start, 1e-6)
        unit = progress.unit or self.unit  # a phase may count something else (archives)
        line = shown(f"{Path(progress.source).name}: {plural(progress.members, unit)}, "
                     f"{progress.bytes / 1e6:,.0f} MB, {rate / 1e6:,.0f} MB/s  "
                     f"{progress.current}")
        columns = shutil.get_terminal_size().columns - 1
        with self._lock:
            self._write(line[:columns])

    def _write(self, line: str) -> None:
        sys.stderr.write("\r" + line.ljust(self._width))
        sys.stderr.flush()
        self._width = len(line)

    def clear(self) -> None:
        with self._lock:
            if self._width:
                sys.stderr.write("\r" + " " * self._width + "\r")
                sys.stderr.flush()
                self._width = 0


_ACTIVE: list[ProgressLine | None] = [None]


@contextlib.contextmanager
def status_line(unit: str = "member", quiet: bool = False) -> Iterator[ProgressLine | None]:
    """The status line of one command (None off a terminal), cleared when it ends: every
    long command shows its progress this one way."""
    line = ProgressLine.for_terminal(quiet, unit=unit)
    try:
        yield line
    finally:
        if line is not None:
            line.clear()


@contextlib.contextmanager
def beating(line: ProgressLine | None, every: float = 0.5) -> Iterator[None]:
    """While the block runs, redraw ``line`` every ``every`` seconds (:meth:`ProgressLine.beat`)
    from a thread of its own: a command whose library calls stay silent for seconds (``sbom``
    writing its documents) still moves at least once a second."""
    if line is None:
        yield
        return
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            line.beat()

    thread = threading.Thread(target=run, name="cudasplit-status", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def wants_status_line(env: Mapping[str, str] | None = None) -> bool:
    """A status line only for a person at a terminal: not in a Nix builder (its stderr is a
    pty that feeds the build log), not on a dumb terminal, not into a pipe or file."""
    env = os.environ if env is None else env
    if env.get("NIX_BUILD_TOP") or env.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def clear_status() -> None:
    line = _ACTIVE[0]
    if line is not None:
        line.clear()


def err(text: str) -> None:
    """One line on stderr (through :func:`shown`), after clearing the status line."""
    clear_status()
    click.echo(shown(text), err=True)


def warn(text: str, code: str | None = None) -> None:
    """``cudasplit: warning: TEXT [code]`` on stderr."""
    err(message("warning", text, code))


def note(text: str) -> None:
    """``cudasplit: note: TEXT`` on stderr: information, neither a warning nor an error."""
    err(message("note", text))


def fail(exc: CudasplitError) -> NoReturn:
    """``cudasplit: error: MESSAGE`` on stderr, then exit with the error's code."""
    err(message("error", error_text(exc)))
    sys.exit(exc.exit_code)


def error_text(exc: CudasplitError) -> str:
    """An error's message naming the options as typed (``--jobs``, ``--max-size``), not the
    API's parameters (``jobs``, ``max_total_bytes``): see :func:`flag_named`; the first word
    too where the error is about an option's value."""
    from .. import OptionsError, RunpathPolicyError  # an error is being reported: loaded

    return flag_named(str(exc), leading=isinstance(exc, OptionsError | RunpathPolicyError))


class ClearingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log records on stderr, each after clearing the status line."""

    def emit(self, record: logging.LogRecord) -> None:
        clear_status()
        self.stream = sys.stderr  # whatever stderr is now (tests and callers may swap it)
        super().emit(record)


class MessageFormatter(logging.Formatter):
    """A log record as ``cudasplit: warning: MESSAGE`` (error, warning, note for info, debug),
    through :func:`shown` like every other line (records name members and files)."""

    _KINDS: ClassVar[dict[int, str]] = {logging.ERROR: "error", logging.WARNING: "warning",
                                        logging.INFO: "note"}

    def format(self, record: logging.LogRecord) -> str:
        kind = self._KINDS.get(record.levelno, "error" if record.levelno > logging.ERROR
                               else "debug")
        text = message(kind, flag_named(record.getMessage(), leading=False))
        if record.exc_info:  # -v: the traceback, lines kept, each made safe
            text += "\n" + "\n".join(shown(line) for line in
                                      self.formatException(record.exc_info).splitlines())
        return text


def setup_logging(quiet: bool, verbose: bool) -> None:
    """The library's log records on stderr: errors only (``-q``), everything (``-v``), else
    warnings."""
    level = logging.ERROR if quiet else logging.DEBUG if verbose else logging.WARNING
    logger = logging.getLogger("cudasplit")
    logger.setLevel(level)
    if not any(isinstance(h, ClearingHandler) for h in logger.handlers):
        handler = ClearingHandler(sys.stderr)
        handler.setFormatter(MessageFormatter())
        logger.addHandler(handler)


def issue_line(kind: str, source: str, issue: Problem) -> str:
    """``cudasplit: warning: ARCHIVE: member 'lib/x': message [code]`` (one line)."""
    where = f"{source}: member {issue.path!r}" if issue.path else source
    return message(kind, f"{where}: {flag_named(issue.message, leading=False)}", issue.code)


def print_issues(report: Report, *, warnings: bool = True) -> None:
    """Every problem (and warning, unless ``-q``) of a run, one line each (also in batch
    mode)."""
    for problem in report.problems:
        err(issue_line("problem", report.source, problem))
    for warning in report.warnings if warnings else ():
        err(issue_line("warning", report.source, warning))


def closure_warnings(report: ClosureReport) -> None:
    """Each closure warning in the one message form, ``cudasplit: warning: ...
    [closure-reach]`` on standard error (a bare ``warning:`` among the table's lines on
    standard output read like one of them)."""
    for item in report.warnings:
        warn(str(item), "closure-reach")


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,234 problems``."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


_DROP_WORDS = {"rules": "by rules", "package table": "by the package table",
               "CUDA major": "of another CUDA major", "unsafe-symlink": "unsafe symlink",
               "dangling-symlink": "dangling symlink", "duplicate-member": "duplicate name",
               "under-symlink": "below a symlink"}


def dropped_line(counts: dict[str, int]) -> str:
    """``dropped 3 members: 2 by rules, 1 unsafe symlink (see the report)``."""
    total = sum(counts.values())
    parts = ", ".join(f"{n} {_DROP_WORDS.get(why, why)}" for why, n in sorted(
        counts.items(), key=lambda item: (-item[1], item[0])))
    return f"dropped  {plural(total, 'member')}: {parts} (see the report)"
