"""Sinks: where split members go. All implement the small :class:`Sink` protocol.

:class:`CondaChannelSink` packs a profile's outputs as conda packages into a channel.

:class:`StagedSink` is the base for a new sink: it stages every member privately (with the
placement and hostile-input guards) and leaves only ``finish()`` to write.
"""

from __future__ import annotations

from cudasplit.sinks._base import Sink, safe_join
from cudasplit.sinks._conda import CondaChannelSink
from cudasplit.sinks._directory import DirectorySink
from cudasplit.sinks._memory import MemorySink
from cudasplit.sinks._staged import StagedSink
from cudasplit.sinks._tarball import TarballSink

__all__ = ["CondaChannelSink", "DirectorySink", "MemorySink", "Sink", "StagedSink",
           "TarballSink", "safe_join"]

# mypy checks that every shipped sink implements the protocol
_SINKS: tuple[type[Sink], ...] = (CondaChannelSink, DirectorySink, MemorySink, TarballSink)
