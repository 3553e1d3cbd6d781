"""Bounded LIEF fallback work for one run: identical inputs patched once, a cap on the rest.

Each file the native tiers cannot patch costs a LIEF child process (about 1.3 s, and up to
3x the file in memory), so an archive of many copies of one small such file would cost minutes.
A :class:`FallbackBudget` lives as long as one run's backend: inputs with the same bytes and the
same edit are rewritten once (later copies get the verified result, or the same refusal), and
once ``max_runs`` children have run or ``max_bytes`` of input were handed to them, further
files are refused with a :class:`~cudasplit.errors.PatchError` naming the cap (a
``patch-failed`` problem). :meth:`FallbackBudget.summary` says what the fallback cost.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field

from cudasplit._elf.patch.want import Want
from cudasplit.errors import PatchError

MAX_RUNS = 64            # LIEF children per run
MAX_BYTES = 8 << 30      # input bytes handed to LIEF per run
MAX_CACHED = 256 << 20   # verified outputs kept in memory for identical inputs


@dataclass(slots=True)
class Outcome:
    """One distinct (bytes, edit): its verified output, or why it was refused."""

    path: str
    done: threading.Event = field(default_factory=threading.Event)
    patched: bytes | None = None     # the LIEF child's output file, when small enough to keep
    error: str | None = None


def file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class FallbackBudget:
    """The LIEF work of one run (thread-safe: the patch stage runs files in threads)."""

    def __init__(self, max_runs: int = MAX_RUNS, max_bytes: int = MAX_BYTES) -> None:
        self.max_runs, self.max_bytes = max_runs, max_bytes
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, Want], Outcome] = {}
        self.runs = self.bytes = self._cached = 0
        self._over: set[str] = set()
        self._reused: set[str] = set()  # files that got a result without a run (a file may be
        # tried twice: early in the stream, and again in the final pass)
        self.seconds = 0.0

    def claim(self, path: str, want: Want, size: int) -> tuple[Outcome, bool]:
        """(the outcome for this input, whether the caller must produce it). PatchError when
        the input is new and the budget is spent."""
        key = (file_digest(path), want)
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                if path != seen.path:
                    self._reused.add(path)
                return seen, False
            if self.runs >= self.max_runs or self.bytes + size > self.max_bytes:
                self._over.add(path)
                raise PatchError(
                    f"{path}: LIEF fallback budget spent ({self.runs} runs, "
                    f"{self.bytes >> 20} MiB; caps {self.max_runs} runs, "
                    f"{self.max_bytes >> 20} MiB per run); not patched")
            self.runs += 1
            self.bytes += size
            outcome = self._seen[key] = Outcome(path)
            return outcome, True

    def settle(self, outcome: Outcome, output: bytes | None, error: str | None,
               seconds: float) -> None:
        """Record what the owner's run produced and wake the copies waiting for it."""
        with self._lock:
            self.seconds += seconds
            if output is not None and self._cached + len(output) <= MAX_CACHED:
                outcome.patched = output
                self._cached += len(output)
            outcome.error = error
        outcome.done.set()

    @property
    def reused(self) -> int:
        return len(self._reused)

    @property
    def over(self) -> int:
        """Files refused because the budget was spent."""
        return len(self._over)

    def summary(self) -> str | None:
        """One line on the fallback's cost; None when it never ran."""
        if not (self.runs or self.reused or self.over):
            return None
        text = (f"LIEF fallback: {self.runs} run(s), {self.bytes >> 10} KiB, "
                f"{self.seconds:.1f} s; {self.reused} identical file(s) reused a result")
        if self.over:
            text += f"; {self.over} file(s) refused over the cap ({self.max_runs} runs)"
        return text


def now() -> float:
    return time.monotonic()
