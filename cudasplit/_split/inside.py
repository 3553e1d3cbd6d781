"""The inside stage: what each ELF file and static archive carries, read in the split's one pass.

A written member is read from its staged file on the early worker thread (the patch stage's,
so the read never overlaps that file's early RUNPATH edit: one thread, jobs in order); a dry
run spools the member to a temporary file just long enough to read it (the patch stage plans
from the same spool). Only headers are read (:func:`~cudasplit._elf.read.read_inside`): a few
hundred ``pread`` calls for libcublasLt's 5,737 fatbinary entries, about 50 ms, against seconds
of decompression. Results come back to the split loop's thread as frozen values, in source
order, before the end-of-run checks (``max_glibc``) read the report.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from cudasplit._elf.read import read_inside, version_key
from cudasplit._report import Problem, Report
from cudasplit._split.reportwriter import InsideOutcome, MemberFacts

__all__ = ["InsideOutcome", "InsideStage", "glibc_ceiling_problems", "reads_inside"]

_KINDS = ("elf-shared", "elf-exec", "elf-other", "static")


def reads_inside(kind: str) -> bool:
    """Members whose insides are read: ELF files and static archives."""
    return kind in _KINDS


class InsideStage:
    """Reads members' insides (on ``pool`` when given, else at once) and keeps the results."""

    def __init__(self, pool: ThreadPoolExecutor | None,
                 wanted: Callable[[MemberFacts], bool] | None = None) -> None:
        self._pool = pool
        self.wanted = wanted   # a dry run: which members to spool and read (default: all)
        self._futures: list[tuple[int, str, Future[tuple[InsideOutcome, tuple[str, ...]]]]] = []
        self._done: list[tuple[int, str, InsideOutcome, tuple[str, ...]]] = []

    def add(self, position: int, path: str, local: Path) -> None:
        """A written member: read its staged file (on the worker when there is one)."""
        if self._pool is not None:
            self._futures.append((position, path, self._pool.submit(_read, local)))
        else:
            self.read_now(position, path, local)

    def read_now(self, position: int, path: str, local: Path | str) -> None:
        self._done.append((position, path, *_read(Path(local))))

    @staticmethod
    @contextlib.contextmanager
    def spooled(stream: BinaryIO) -> Iterator[str]:
        """A dry run: the member's bytes in a temporary file while the block runs (disk use:
        one member)."""
        with tempfile.NamedTemporaryFile(prefix="cudasplit-inside-") as spool:
            shutil.copyfileobj(stream, spool, 1 << 20)
            spool.flush()
            yield spool.name

    def finish(self) -> tuple[list[tuple[int, InsideOutcome]], list[Problem]]:
        """Every result (waiting for the worker's), and a warning per file not fully read."""
        for position, path, future in self._futures:
            self._done.append((position, path, *future.result()))
        self._futures.clear()
        outcomes = [(position, outcome) for position, _, outcome, _ in self._done]
        warnings = [Problem("inside-unreadable", path, f"not all of it could be read: {text}")
                    for _, path, _, problems in self._done for text in problems]
        return outcomes, warnings


def _read(local: Path) -> tuple[InsideOutcome, tuple[str, ...]]:
    try:
        inside = read_inside(local)
    except OSError as exc:
        return InsideOutcome(), (exc.strerror or str(exc),)
    if inside is None:
        return InsideOutcome(), ()
    # Messages name the member, not the staged or spooled file they were read from.
    problems = tuple(p.replace(str(local), "").lstrip(": ") or p for p in inside.problems)
    return InsideOutcome(inside.gpu, inside.floors), problems


def glibc_ceiling_problems(report: Report, ceiling: str) -> list[Problem]:
    """The members needing a ``GLIBC_`` version above ``ceiling`` (``X.Y``), each named with
    the symbol and library that need it."""
    limit = version_key(ceiling)
    found = []
    for member in report.members:
        for need in member.glibc or ():
            version = str(need.get("version") or "0")
            if need.get("prefix") == "GLIBC" and version_key(version) > limit:
                symbol = need.get("symbol") or "(no symbol bound to it)"
                found.append(Problem(
                    "glibc-too-new", member.path,
                    f"needs GLIBC_{version} (symbol {symbol} from {need.get('library')}), "
                    f"newer than --max-glibc {ceiling}"))
    return found
