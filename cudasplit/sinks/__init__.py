"""Sinks: where split members go. All implement the small :class:`Sink` protocol.

:class:`StagedSink` is the base for a new sink: it stages every member privately (with the
placement and hostile-input guards) and leaves only ``finish()`` to write.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cudasplit.sinks._base import Sink, safe_join
from cudasplit.sinks._directory import DirectorySink
from cudasplit.sinks._memory import MemorySink
from cudasplit.sinks._staged import StagedSink

if TYPE_CHECKING:
    from cudasplit.sinks._tarball import TarballSink

    # mypy checks that every shipped sink implements the protocol
    _SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)

__all__ = ["DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink", "safe_join"]


def __getattr__(name: str) -> Any:
    """``TarballSink`` (repack's archive writer: tarfile, the compressors) loads on first
    use, so a split into directories does not import it."""
    if name != "TarballSink":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__("cudasplit.sinks._tarball")
    value = sys.modules["cudasplit.sinks._tarball"].TarballSink
    globals()[name] = value
    return value
