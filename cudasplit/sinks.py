"""Sinks: where a split's members go (``cudasplit.split(source, sink)``).

Every sink implements the small :class:`Sink` protocol. :class:`DirectorySink` writes one
directory per output (what :func:`cudasplit.split_to_dir` uses), :class:`MemorySink` keeps
them in memory (tests, dry looks), :class:`TarballSink` writes one reproducible tarball per
output (what :func:`cudasplit.repack_to_dir` uses). :class:`StagedSink` is the base for a new
sink: it stages every member privately (with the placement and hostile-input guards) and
leaves only ``finish()`` to write.

The same names are also in :mod:`cudasplit` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._sinks": ("DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._sinks import DirectorySink, MemorySink, Sink, StagedSink, TarballSink

__all__ = ["DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink"]
