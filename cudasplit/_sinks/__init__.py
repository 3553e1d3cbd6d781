"""Sinks: where split members go. All implement the small :class:`Sink` protocol (``base``).

A directory (``directory``: staged, with the placement guards of ``placement``, moved into
place by ``promote``, its staging directories kept crash-safe by ``staging``), memory
(``memory``) and one reproducible tarball per output (``tarball``, packed by ``tarpack``).
:class:`StagedSink` (``staged``) is the base for a new sink: it stages every member privately
(with the placement and hostile-input guards) and leaves only ``finish()`` to write; the
conda channel (``cudasplit._release.conda``) is one.

Users reach the sinks through :mod:`cudasplit.sinks`; this face serves the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face
from cudasplit._sinks.base import Sink
from cudasplit._sinks.directory import DirectorySink
from cudasplit._sinks.memory import MemorySink
from cudasplit._sinks.staged import StagedSink
from cudasplit._sinks.staging import STAGING_PREFIX, remove_dir, remove_trash

# The tarball sink loads on first use, so a split into directories imports neither repack's
# archive writer nor tarfile and the compressors.
__getattr__, __dir__ = lazy_face(__name__, {
    "cudasplit._sinks.tarball": ("DEFAULT_FORMAT", "DEFAULT_LEVEL", "TarballSink",
                                 "mtime_from_env"),
})

if TYPE_CHECKING:
    from cudasplit._sinks.tarball import (
        DEFAULT_FORMAT,
        DEFAULT_LEVEL,
        TarballSink,
        mtime_from_env,
    )

    # mypy checks that every shipped sink implements the protocol
    _SINKS: tuple[type[Sink], ...] = (DirectorySink, MemorySink, TarballSink)

__all__ = [
    "DEFAULT_FORMAT",
    "DEFAULT_LEVEL",
    "STAGING_PREFIX",
    "DirectorySink",
    "MemorySink",
    "Sink",
    "StagedSink",
    "TarballSink",
    "mtime_from_env",
    "remove_dir",
    "remove_trash",
]
