"""Writing ELF edits: byte-level plans in place (tier 1) or appended (tier 2), and the patcher.

A plan is a list of ``(offset, bytes)`` writes computed from a parsed :class:`RawElf`; the
planning modules write nothing. ``backends`` picks the writer for ``--patcher``; ``patcher``
applies one edit, tier by tier, with an undo log and verification (``verify``);
``want`` and ``delta`` are what the tiers share, ``inplace`` tier 1, ``append`` tier 2 with the
strip-safe placement of its program header (``room``); ``liefbudget`` and ``lief_worker`` the
LIEF fallback. This face names what the rest of the package uses.
"""

from __future__ import annotations

from cudasplit._elf.patch.append import SPARE_BYTES
from cudasplit._elf.patch.backends import (
    EditResult,
    ElfBackend,
    ElfEdit,
    FailFastBackend,
    backend_for,
)
from cudasplit._elf.patch.liefbudget import FallbackBudget
from cudasplit._elf.patch.patcher import apply_edit, rename_needed, restore_original, set_runpath

__all__ = [
    "SPARE_BYTES",
    "EditResult",
    "ElfBackend",
    "ElfEdit",
    "FailFastBackend",
    "FallbackBudget",
    "apply_edit",
    "backend_for",
    "rename_needed",
    "restore_original",
    "set_runpath",
]
