"""Sinks: where split members go. All implement the small :class:`Sink` protocol.

:class:`StagedSink` is the base for a new sink: it stages every member privately (with the
placement and hostile-input guards) and leaves only ``finish()`` to write.
"""

from __future__ import annotations

from ._base import Sink, safe_join
from ._directory import DirectorySink
from ._memory import MemorySink
from ._staged import StagedSink
from ._tarball import TarballSink

__all__ = ["DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink", "safe_join"]

# mypy checks that every shipped sink implements the protocol
_SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)
