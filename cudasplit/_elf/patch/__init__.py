"""Byte-level plans that apply one ELF edit: in place (tier 1) or appended (tier 2).

A plan is a list of ``(offset, bytes)`` writes computed from a parsed :class:`RawElf`; nothing is
written here. See :mod:`cudasplit._elf.patch.patcher` for the tiers, the undo log and the verification.

The planning is split by tier: what both share (:mod:`cudasplit._elf.patch.want`), tier 1
(:mod:`cudasplit._elf.patch.inplace`), tier 2 (:mod:`cudasplit._elf.patch.append`) with the strip-safe
placement of its program header (:mod:`cudasplit._elf.patch.room`) and the header rewrites that follow
moved bytes (:mod:`cudasplit._elf.patch.hdrwrite`). This module keeps their names importable from here.
"""

from __future__ import annotations

from cudasplit._elf.patch.append import SPARE_BYTES, plan_append
from cudasplit._elf.patch.inplace import plan_in_place
from cudasplit._elf.patch.room import Room, choose_room
from cudasplit._elf.patch.want import Plan, Want, new_dynamic

__all__ = ["SPARE_BYTES", "Plan", "Room", "Want", "choose_room", "new_dynamic", "plan_append",
           "plan_in_place"]
