"""The RUNPATH planner as the public API offers it (:func:`plan_runpath`): the planner's own
function with its arguments checked at the call.

The split's planner calls the unchecked function once per ELF file; a caller of the public
name gets the check every public entry point makes (:func:`cudasplit._argcheck.checked`).
A module of its own so that the planner (and the ELF reader under it) loads only when the
public name is asked for, never with the options a command line parses.
"""

from __future__ import annotations

from cudasplit._argcheck import checked
from cudasplit._elf.plan import plan_runpath as _plan_runpath

__all__ = ["plan_runpath"]

plan_runpath = checked(_plan_runpath)
