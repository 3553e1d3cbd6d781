"""The inside stage: what each ELF file and static archive carries, read in the split's one pass.

A written ELF file is read from its staged file on the early worker thread (the patch stage's,
so the read never overlaps that file's early RUNPATH edit: one thread, jobs in order); a static
archive (never patched) is read while the sink writes it, on a thread of its own; a dry
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
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, cast

from cudasplit._elf.read import read_inside, version_key
from cudasplit._report import Problem, Report
from cudasplit._split.reportwriter import InsideOutcome, MemberFacts

__all__ = ["InsideOutcome", "InsideStage", "glibc_ceiling_problems", "reads_inside"]

_KINDS = ("elf-shared", "elf-exec", "elf-other", "static")


def reads_inside(kind: str) -> bool:
    """Members whose insides are read: ELF files and static archives."""
    return kind in _KINDS


class InsideStage:
    """Reads members' insides (on ``pool`` when given, else at once) and keeps the results.

    A static archive is read while it is written, on a thread of its own (:meth:`following`):
    ``libcublas_static.a`` holds thousands of objects, and reading them only once the file
    was complete put a third of a second after the last byte decoded on the 16-core host
    (a libcublas split there takes under three seconds)."""

    def __init__(self, pool: ThreadPoolExecutor | None,
                 wanted: Callable[[MemberFacts], bool] | None = None) -> None:
        self._pool = pool
        self.wanted = wanted   # a dry run: which members to spool and read (default: all)
        self._futures: list[tuple[int, str, Future[tuple[InsideOutcome, tuple[str, ...]]]]] = []
        self._done: list[tuple[int, str, InsideOutcome, tuple[str, ...]]] = []
        self._follower: ThreadPoolExecutor | None = None
        self._growing: _Growing | None = None   # the archive being written
        self._stop = threading.Event()    # the split ended: a follower waits no longer

    def following(self, stream: BinaryIO, position: int, path: str, size: int,
                  local: Callable[[], Path | None]) -> BinaryIO:
        """``stream``, read by the sink as it writes a static archive; the archive's members
        are read as they land (``local()`` names the file once the sink has created it)."""
        if self._pool is None:
            return stream
        if self._follower is None:
            self._follower = ThreadPoolExecutor(1, thread_name_prefix="cudasplit-inside")
        growing = self._growing = _Growing(size, self._stop)
        future = self._follower.submit(_read_growing, local, growing)
        self._futures.append((position, path, future))
        return cast(BinaryIO, _Watched(stream, growing))

    def written(self) -> None:
        """The sink returned from writing the member :meth:`following` watched: its file is
        complete (also when the sink never read the stream to its end)."""
        if self._growing is not None:
            self._growing.opened.set()
            self._growing.ended.set()
            self._growing = None

    def close(self) -> None:
        """Stop a follower still waiting for bytes (the split failed or ended)."""
        self._stop.set()
        if self._follower is not None:
            self._follower.shutdown(wait=True)

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
        self.close()
        outcomes = [(position, outcome) for position, _, outcome, _ in self._done]
        warnings = [Problem("inside-unreadable", path, f"not all of it could be read: {text}")
                    for _, path, _, problems in self._done for text in problems]
        return outcomes, warnings


class _Growing:
    """How much of a file being written is there: its writer counts the bytes it hands on
    (:class:`_Watched`); a read waits for the bytes it needs."""

    def __init__(self, size: int, stop: threading.Event) -> None:
        self.size, self.stop = size, stop
        self.written = 0
        self.ended = threading.Event()    # the writer read its stream to the end
        self.opened = threading.Event()   # the sink has the file open: it can be read

    def __call__(self, offset: int) -> None:
        """Return once the file holds the bytes before ``offset`` (or all it will hold)."""
        offset = min(offset, self.size)
        while self.written < offset and not self.ended.is_set():
            if self.stop.is_set():
                raise OSError("the split ended before the file was written")
            self.ended.wait(0.002)

    def wait_opened(self) -> None:
        while not self.opened.wait(0.01):
            if self.stop.is_set():
                raise OSError("the split ended before the file was written")


class _Watched:
    """A member's stream that tells :class:`_Growing` what the sink has read from it (and so
    written: the sink writes a chunk before it reads the next). Anything else is the wrapped
    stream's."""

    def __init__(self, stream: BinaryIO, growing: _Growing) -> None:
        self._stream, self._growing = stream, growing
        self._pending = 0      # bytes handed on so far

    def _saw(self, count: int, asked: int) -> None:
        growing = self._growing
        growing.opened.set()   # a sink reads once it has created the file
        # What was read before this call is written by now; this chunk is not yet.
        growing.written = self._pending
        self._pending += count
        if count == 0 and asked != 0:
            growing.written = self._pending
            growing.ended.set()

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._saw(len(data), size)
        return data

    def read1(self, size: int = -1) -> bytes | memoryview:
        read1 = getattr(self._stream, "read1", None)
        data: bytes | memoryview = read1(size) if read1 is not None else self._stream.read(size)
        self._saw(len(data), size)
        return data

    def readinto(self, buffer: Any) -> int:
        count = int(self._stream.readinto(buffer) or 0)  # type: ignore[attr-defined]
        self._saw(count, len(buffer))
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _read_growing(local: Callable[[], Path | None],
                  growing: _Growing) -> tuple[InsideOutcome, tuple[str, ...]]:
    try:
        growing.wait_opened()
    except OSError as exc:
        return InsideOutcome(), (str(exc),)
    path = local()
    if path is None:
        return InsideOutcome(), ()
    # A sink may read ahead of creating the file: it is there by the end of the stream.
    while not path.exists() and not growing.ended.wait(0.002):
        if growing.stop.is_set():
            return InsideOutcome(), ("the split ended before the file was written",)
    return _read(path, growing)


def _read(local: Path, growing: _Growing | None = None
          ) -> tuple[InsideOutcome, tuple[str, ...]]:
    try:
        inside = (read_inside(local) if growing is None
                  else read_inside(local, size=growing.size, wait=growing))
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
                    f"newer than max_glibc {ceiling}"))
    return found
