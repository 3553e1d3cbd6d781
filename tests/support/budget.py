"""Measure one call of a reader: the CPU time of this thread and the peak of Python's allocations.

The reader contract (``docs/explanation/security.md``) bounds time and memory; the fuzz targets
check both on every generated input. CPU time of the calling thread (``time.thread_time``), not
wall-clock time, so other processes on a loaded machine do not fail a test; the peak of every
allocation Python makes during the call (``tracemalloc``: ``bytes`` objects, lists, strings),
which is where the hostile shapes spent their gigabytes.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spent:
    """What one call took: its result or exception, CPU seconds, peak bytes allocated."""

    result: Any
    error: BaseException | None
    cpu: float
    peak: int

    def within(self, *, cpu: float, memory: int, what: str = "") -> None:
        """AssertionError naming ``what`` when the call took more than ``cpu`` seconds or
        ``memory`` bytes."""
        assert self.cpu <= cpu, f"{what}: {self.cpu:.2f} s of CPU, more than {cpu} s"
        assert self.peak <= memory, (f"{what}: {self.peak >> 10} KiB allocated at the peak, "
                                     f"more than {memory >> 10} KiB")


def spend(call: Callable[[], Any], expected: tuple[type[BaseException], ...] = ()) -> Spent:
    """Run ``call`` measured; an exception of ``expected`` is kept as the outcome, any other
    propagates."""
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    started = time.thread_time()
    result: Any = None
    error: BaseException | None = None
    try:
        result = call()
    except expected as exc:
        error = exc
    finally:
        cpu = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1] - base
        if started_tracing:
            tracemalloc.stop()
    return Spent(result, error, cpu, max(0, peak))
