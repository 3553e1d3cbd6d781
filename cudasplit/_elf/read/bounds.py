"""What every reader of a file's bytes shares: a capped list of problems and the stop check.

The readers of what is inside a file (sections, fatbinaries, ``ar`` members, symbols and
versions) follow one contract (``docs/explanation/security.md``): time linear in the bytes,
memory bounded per file, a maximum for every number, overlapping regions read once, and an end
when the run ends. Two pieces of it are the same for all of them and live here:

* :class:`Problems`: what could not be read, at most :data:`MAX_PROBLEMS` lines per file (the
  same line once); the rest are counted and said once, in one last line naming the file. A
  damaged 8 KB archive of 20,000 objects used to give 20,000 warnings.
* :func:`checkpoint`: the reader's loops call it; every :data:`STOP_EVERY` steps it asks the
  caller's ``stop()`` and ends the read with :class:`Stopped` (an ``OSError``, what the callers
  already take as "this file could not be read") once the run is over.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["MAX_PROBLEMS", "STOP_EVERY", "Problems", "Stop", "Stopped", "checkpoint",
           "hand_back"]

MAX_PROBLEMS = 8         # problem lines kept per file; the rest are counted
STOP_EVERY = 1024        # loop steps between two calls of ``stop()``

Stop = Callable[[], bool]


class Stopped(OSError):
    """The run ended while a file was being read (its result is not wanted)."""


class Problems(list[str]):
    """A file's problems: each text once, at most ``cap`` of them; the rest are counted in
    :attr:`dropped` and said by :meth:`lines`. ``name`` is the file they belong to."""

    def __init__(self, name: str, cap: int = MAX_PROBLEMS) -> None:
        super().__init__()
        self.name, self.cap, self.dropped = name, cap, 0
        self._seen: set[str] = set()

    def append(self, text: str) -> None:
        if text in self._seen:
            return
        if len(self) >= self.cap:
            self.dropped += 1
            return
        self._seen.add(text)
        super().append(text)

    def lines(self) -> list[str]:
        """The kept problems, then one line for those not kept (naming the file)."""
        if not self.dropped:
            return list(self)
        return [*self, f"{self.name}: {self.dropped} more problems not listed (at most "
                       f"{self.cap} are)"]


def hand_back(found: Problems, given: list[str] | None) -> None:
    """Copy ``found`` (capped, with its last line) into the caller's plain list."""
    if given is not None and given is not found:
        given.extend(found.lines())


def checkpoint(stop: Stop | None, steps: int) -> None:
    """Every :data:`STOP_EVERY` steps: :class:`Stopped` when ``stop()`` says the run ended."""
    if stop is not None and steps % STOP_EVERY == 0 and stop():
        raise Stopped("the run ended before the file was read")
