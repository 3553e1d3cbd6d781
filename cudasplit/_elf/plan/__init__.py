"""Planning ELF edits: the RUNPATH policy and plan, where needed libraries resolve, and the one
planner that turns a member's facts and the output layout into an edit value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

# Each name loads with its module on first use: the RUNPATH policy an option needs is light,
# the planner and the library index (and the ELF reader below them) are not.
_HOMES = {
    "cudasplit._elf.plan.edit": ("EditResult", "ElfEdit"),
    "cudasplit._elf.plan.hostloader": ("HostLoader", "default_dirs", "host_interpreter",
                                       "read_ld_so_cache"),
    "cudasplit._elf.plan.planner": ("ElfPlan", "PlacedElf", "PlanContext", "plan_elf"),
    "cudasplit._elf.plan.policy": ("RunpathPolicy",),
    "cudasplit._elf.plan.resolve": ("LibraryIndex", "loader_arch",
                                    "parse_interpreters", "unresolved_error"),
    "cudasplit._elf.plan.runpath": ("RunpathPlan", "index_library_paths", "is_driver_name",
                                    "is_glibc_name", "plan_runpath"),
    "cudasplit._run": ("DEFAULT_DRIVER_LINK",),
    "cudasplit.errors": ("RunpathPolicyError",),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._elf.plan.edit import EditResult, ElfEdit
    from cudasplit._elf.plan.hostloader import (
        HostLoader,
        default_dirs,
        host_interpreter,
        read_ld_so_cache,
    )
    from cudasplit._elf.plan.planner import ElfPlan, PlacedElf, PlanContext, plan_elf
    from cudasplit._elf.plan.policy import RunpathPolicy
    from cudasplit._elf.plan.resolve import (
        LibraryIndex,
        loader_arch,
        parse_interpreters,
        unresolved_error,
    )
    from cudasplit._elf.plan.runpath import (
        RunpathPlan,
        index_library_paths,
        is_driver_name,
        is_glibc_name,
        plan_runpath,
    )
    from cudasplit._run import DEFAULT_DRIVER_LINK
    from cudasplit.errors import RunpathPolicyError

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "EditResult",
    "ElfEdit",
    "ElfPlan",
    "HostLoader",
    "LibraryIndex",
    "PlacedElf",
    "PlanContext",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "default_dirs",
    "host_interpreter",
    "index_library_paths",
    "is_driver_name",
    "is_glibc_name",
    "loader_arch",
    "parse_interpreters",
    "plan_elf",
    "plan_runpath",
    "read_ld_so_cache",
    "unresolved_error",
]
