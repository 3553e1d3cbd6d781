"""GPU code and glibc floors (and dlopen names) of each ELF file and static archive, read in
the split's one pass.

A large written file (:data:`BACKGROUND_FROM` and up) is read by a process of its own
(:class:`~cudasplit._elf.read.ReaderProcess`, through :class:`BackgroundReads`), from the page
cache right after the sink wrote it; a static archive while it is being written, member by
member as its bytes land (``libcublas_static.a`` holds thousands of objects: read only once
complete, they put a third of a second after the last byte decoded on the 16-core host).
That reading is Python work; in the split's own process it held the interpreter lock while
the thread moving member bytes waited for it. The same process scans the names an ELF file
may ``dlopen`` (the patch stage takes them from here, and patches a file only after it was
read). A small file is read where it was before: on the early worker thread (the patch
stage's, so the read never overlaps that file's early RUNPATH edit); a dry run spools the
member to a temporary file just long enough to read it. Only headers are read
(:func:`~cudasplit._elf.read.read_inside`). Results come back to the split loop's thread as
frozen values, in source order, before the end-of-run checks (``max_glibc``) read the report.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from cudasplit._elf.read import FileRead, Inside, ReaderProcess, read_inside, version_key
from cudasplit._report import Problem, Report
from cudasplit._split.reportwriter import GpuCodeOutcome, MemberFacts

__all__ = ["BACKGROUND_FROM", "READING_PROCESS_FROM_JOBS", "BackgroundReads", "GpuCodeOutcome",
           "GpuCodeStage", "glibc_ceiling_problems", "reads_gpu_code"]

_KINDS = ("elf-shared", "elf-exec", "elf-other", "static")
# Files this large are read by the reading process. Smaller ones cost a few milliseconds in
# the split's own process, less than the child's start (about 50 ms of CPU) would.
BACKGROUND_FROM = 4 << 20
# The reading process runs from this many cores (the split's jobs). On the 16-core host it took
# a zstd split of libcublas from 2.43 to 2.04 s; on 2 cores it competes with the decoder and the
# writer for them, and the split was faster without it (0.95 against 1.06 s; benchmarks §19).
READING_PROCESS_FROM_JOBS = 4

_Result = tuple[GpuCodeOutcome, tuple[str, ...]]


def reads_gpu_code(kind: str) -> bool:
    """Members whose insides are read: ELF files and static archives."""
    return kind in _KINDS


class BackgroundReads:
    """Large written files, read by a process of its own (started on the first one), keyed
    by member position: their inside (when ``want_inside``) and ELF files' dlopen names."""

    def __init__(self, want_inside: bool) -> None:
        self.want_inside = want_inside
        self._process = ReaderProcess()
        self._futures: dict[int, Future[FileRead]] = {}
        self._paths: dict[int, str] = {}
        self._by_path: dict[str, int] = {}

    def wants(self, kind: str, size: int) -> bool:
        return size >= BACKGROUND_FROM and reads_gpu_code(kind)

    def begin(self, position: int, local: Path, size: int, kind: str,
              inside: bool = True) -> None:
        """``local`` is about to be written with ``size`` bytes: read it (a static archive
        as it grows, anything else once complete)."""
        self._paths[position] = str(local)
        self._by_path[str(local)] = position
        self._futures[position] = self._process.submit(
            str(local), size=size, grows=kind == "static",
            want_inside=self.want_inside and inside, want_dlopen=kind.startswith("elf-"))

    def written(self, position: int) -> None:
        """The sink returned from writing the member :meth:`begin` announced: its file is
        complete at whatever size it has (also when the sink did not read its stream to
        the end)."""
        path = self._paths.get(position)
        if path is None:
            return
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0
        self._process.written(path, size)

    def forget(self, local: str) -> None:
        """``local`` is about to be written again (the archive names it twice): its earlier
        copy is read to the end first, so no read mixes the two copies' bytes."""
        position = self._by_path.pop(local, None)
        if position is not None:
            self.result(position)

    def has(self, position: int) -> bool:
        return position in self._futures

    def staged(self, position: int) -> str:
        """The file member ``position`` was read from (named in no message)."""
        return self._paths.get(position, "")

    def result(self, position: int) -> FileRead | None:
        """What the process read of member ``position`` (waiting for it); ``None`` for a
        member it was not asked to read."""
        future = self._futures.get(position)
        return None if future is None else future.result()

    def close(self) -> None:
        """Stop the process (the split ended or failed); unanswered reads say so."""
        self._process.close()


class GpuCodeStage:
    """Reads members' insides (on ``pool`` when given, else at once, or by ``background``
    for large files) and keeps the results."""

    def __init__(self, pool: ThreadPoolExecutor | None,
                 wanted: Callable[[MemberFacts], bool] | None = None,
                 background: BackgroundReads | None = None) -> None:
        self._pool = pool
        self.wanted = wanted   # a dry run: which members to spool and read (default: all)
        self.background = background
        self._futures: list[tuple[int, str, Future[_Result]]] = []
        self._done: list[tuple[int, str, GpuCodeOutcome, tuple[str, ...]]] = []
        self._from_background: list[tuple[int, str]] = []

    def add(self, position: int, path: str, local: Path) -> None:
        """A written member: read its staged file (on the worker when there is one), unless
        the reading process has it."""
        if self.background is not None and self.background.has(position):
            self._from_background.append((position, path))
        elif self._pool is not None:
            self._futures.append((position, path, self._pool.submit(_read, local)))
        else:
            self.read_now(position, path, local)

    def settle(self, path: str) -> None:
        """Member ``path`` is about to be written again: reads of its earlier copy end first."""
        for _, earlier, future in self._futures:
            if earlier == path:
                future.result()

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

    def finish(self) -> tuple[list[tuple[int, GpuCodeOutcome]], list[Problem]]:
        """Every result (waiting for the worker's and the reading process's), and a warning
        per file not fully read."""
        for position, path, future in self._futures:
            self._done.append((position, path, *future.result()))
        self._futures.clear()
        for position, path in self._from_background:
            assert self.background is not None
            found = self.background.result(position)
            local = self.background.staged(position)
            if found is not None and found.lost:   # the process is gone: read it here
                self._done.append((position, path, *_read(Path(local))))
            else:
                self._done.append((position, path, *_outcome(found, local)))
        self._from_background.clear()
        outcomes = [(position, outcome) for position, _, outcome, _ in self._done]
        warnings = [Problem("inside-unreadable", path, f"not all of it could be read: {text}")
                    for _, path, _, problems in self._done for text in problems]
        return outcomes, warnings


def _outcome(found: FileRead | None, local: str) -> _Result:
    if found is None:
        return GpuCodeOutcome(), ()
    if found.error is not None:
        return GpuCodeOutcome(), (found.error.replace(local, "").lstrip(": ") or found.error,)
    return _summary(found.inside, local)


def _read(local: Path) -> _Result:
    try:
        inside = read_inside(local)
    except OSError as exc:
        return GpuCodeOutcome(), (exc.strerror or str(exc),)
    return _summary(inside, str(local))


def _summary(inside: Inside | None, local: str) -> _Result:
    if inside is None:
        return GpuCodeOutcome(), ()
    # Messages name the member, not the staged or spooled file they were read from.
    problems = tuple(p.replace(local, "").lstrip(": ") or p for p in inside.problems)
    return GpuCodeOutcome(inside.gpu, inside.floors), problems


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
                    f"newer than max_glibc {ceiling}"))
    return found
