"""Sinks: where split members go. All implement the small :class:`Sink` protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Sink, safe_join
from .directory import DirectorySink
from .memory import MemorySink

__all__ = ["DirectorySink", "MemorySink", "Sink", "safe_join"]


if TYPE_CHECKING:  # mypy checks that every shipped sink implements the protocol
    from .tarball import TarballSink

    _SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)
