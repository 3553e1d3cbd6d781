"""Sinks: where split members go. All implement the small :class:`Sink` protocol.

:class:`CondaChannelSink` packs a profile's outputs as conda packages into a channel.

:class:`StagedSink` is the base for a new sink: it stages every member privately (with the
placement and hostile-input guards) and leaves only ``finish()`` to write.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cudasplit.sinks._base import Sink
from cudasplit.sinks._directory import DirectorySink
from cudasplit.sinks._memory import MemorySink
from cudasplit.sinks._staged import StagedSink

if TYPE_CHECKING:
    from cudasplit.sinks._conda import CondaChannelSink
    from cudasplit.sinks._tarball import TarballSink

    # mypy checks that every shipped sink implements the protocol
    _SINKS: tuple[type[Sink], ...] = (CondaChannelSink, DirectorySink, MemorySink, TarballSink)

__all__ = [
    "CondaChannelSink",
    "DirectorySink",
    "MemorySink",
    "Sink",
    "StagedSink",
    "TarballSink",
]

# Loaded on first use, so a split into directories imports neither: repack's archive writer
# (tarfile, the compressors) and the conda channel writer.
_LAZY = {"TarballSink": "cudasplit.sinks._tarball", "CondaChannelSink": "cudasplit.sinks._conda"}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(where)
    value = getattr(sys.modules[where], name)
    globals()[name] = value
    return value
