"""Sinks: where split members go. All implement the small :class:`Sink` protocol.

:class:`CondaChannelSink` packs a profile's outputs as conda packages into a channel.

:class:`StagedSink` is the base for a new sink: it stages every member privately (with the
placement and hostile-input guards) and leaves only ``finish()`` to write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudasplit.sinks._base import Sink, safe_join
from cudasplit.sinks._directory import DirectorySink
from cudasplit.sinks._memory import MemorySink
from cudasplit.sinks._staged import StagedSink
from cudasplit.sinks._tarball import TarballSink

__all__ = ["CondaChannelSink", "DirectorySink", "MemorySink", "Sink", "StagedSink",
           "TarballSink", "safe_join"]

if TYPE_CHECKING:
    from cudasplit.sinks._conda import CondaChannelSink

# mypy checks that every shipped sink implements the protocol
_SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)


def __getattr__(name: str) -> Any:
    """The conda channel sink loads on first use: a split never needs it."""
    if name != "CondaChannelSink":
        raise AttributeError(f"module 'cudasplit.sinks' has no attribute {name!r}")
    from cudasplit.sinks._conda import CondaChannelSink

    _check: type[Sink] = CondaChannelSink  # mypy: it implements the protocol too
    globals()[name] = CondaChannelSink
    return _check
