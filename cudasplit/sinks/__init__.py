"""Sinks: where split members go. All implement the small :class:`Sink` protocol."""

from __future__ import annotations

from .base import Sink, safe_join
from .directory import DirectorySink
from .memory import MemorySink

__all__ = ["DirectorySink", "MemorySink", "Sink", "safe_join"]
