"""Writing ELF edits: byte-level plans in place (tier 1) or appended (tier 2), and the patcher.

A plan is a list of ``(offset, bytes)`` writes computed from a parsed :class:`RawElf`; the
planning modules write nothing. ``patcher`` runs the tiers with an undo log and verification;
``want`` is what both tiers share, ``inplace`` tier 1, ``append`` tier 2 with the strip-safe
placement of its program header (``room``) and the header rewrites that follow moved bytes
(``hdrwrite``). This face names the planning functions the rest of the package uses.
"""

from __future__ import annotations

from cudasplit._elf.patch.append import SPARE_BYTES, plan_append
from cudasplit._elf.patch.apply import PATCHERS, FailFastBackend
from cudasplit._elf.patch.backends import (
    BACKENDS,
    DryRunBackend,
    EditResult,
    ElfBackend,
    ElfEdit,
    LiefBackend,
    NativeBackend,
    UnknownPatcherError,
    backend_for,
)
from cudasplit._elf.patch.inplace import plan_in_place
from cudasplit._elf.patch.liefbudget import FallbackBudget
from cudasplit._elf.patch.patcher import (
    PatchResult,
    apply_edit,
    rename_needed,
    set_runpath,
)
from cudasplit._elf.patch.room import Room, choose_room
from cudasplit._elf.patch.tiers import restore_original
from cudasplit._elf.patch.want import Plan, Want, new_dynamic

__all__ = [
    "BACKENDS",
    "PATCHERS",
    "SPARE_BYTES",
    "DryRunBackend",
    "EditResult",
    "ElfBackend",
    "ElfEdit",
    "FailFastBackend",
    "FallbackBudget",
    "LiefBackend",
    "NativeBackend",
    "PatchResult",
    "Plan",
    "Room",
    "UnknownPatcherError",
    "Want",
    "apply_edit",
    "backend_for",
    "choose_room",
    "new_dynamic",
    "plan_append",
    "plan_in_place",
    "rename_needed",
    "restore_original",
    "set_runpath",
]
