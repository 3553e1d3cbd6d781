"""Sinks: where split members go. All implement the small :class:`Sink` protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base import Sink, safe_join
from ._directory import DirectorySink
from ._memory import MemorySink

__all__ = ["DirectorySink", "MemorySink", "Sink", "safe_join"]


if TYPE_CHECKING:  # mypy checks that every shipped sink implements the protocol
    from ._tarball import TarballSink

    _SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)
