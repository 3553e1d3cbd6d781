"""Planning ELF edits: the RUNPATH policy and plan, where needed libraries resolve, and the one
planner that turns a member's facts and the output layout into an edit value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudasplit._run import lazy_face

# Each name loads with its module on first use: the RUNPATH policy an option needs is light,
# the planner and the library index (and the ELF reader below them) are not.
_HOMES = {
    "cudasplit._elf.plan.edit": ("EditResult", "ElfEdit", "UnknownPatcherError"),
    "cudasplit._elf.plan.entries": ("ORIGIN", "dedupe", "entry_key", "is_origin_relative",
                                    "is_stub_entry", "split_search_path"),
    "cudasplit._elf.plan.hostloader": ("HostLoader", "default_dirs", "host_interpreter",
                                       "read_ld_so_cache"),
    "cudasplit._elf.plan.planner": ("ElfPlan", "PlacedElf", "PlanContext", "plan_elf"),
    "cudasplit._elf.plan.policy": ("RunpathPolicy",),
    "cudasplit._elf.plan.resolve": ("LibraryIndex", "UnresolvedLibrariesError", "loader_arch",
                                    "parse_interpreters", "unresolved_error"),
    "cudasplit._elf.plan.runpath": ("RunpathPlan", "index_library_paths", "is_driver_name",
                                    "is_glibc_name", "plan_runpath"),
    "cudasplit._run": ("DEFAULT_DRIVER_LINK",),
    "cudasplit.errors": ("RunpathPolicyError",),
}
_lazy_getattr, __dir__ = lazy_face(__name__, _HOMES)


def __getattr__(attr: str) -> Any:
    if attr == "plan_runpath":
        # The public function checks its arguments (cudasplit._argcheck); the planner calls
        # the leaf module's own, once per ELF file, without the check.
        from cudasplit._argcheck import checked
        from cudasplit._elf.plan.runpath import plan_runpath as unchecked

        globals()[attr] = checked(unchecked)
        return globals()[attr]
    return _lazy_getattr(attr)

if TYPE_CHECKING:
    from cudasplit._elf.plan.edit import EditResult, ElfEdit, UnknownPatcherError
    from cudasplit._elf.plan.entries import (
        ORIGIN,
        dedupe,
        entry_key,
        is_origin_relative,
        is_stub_entry,
        split_search_path,
    )
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
        UnresolvedLibrariesError,
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
    "ORIGIN",
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
    "UnknownPatcherError",
    "UnresolvedLibrariesError",
    "dedupe",
    "default_dirs",
    "entry_key",
    "host_interpreter",
    "index_library_paths",
    "is_driver_name",
    "is_glibc_name",
    "is_origin_relative",
    "is_stub_entry",
    "loader_arch",
    "parse_interpreters",
    "plan_elf",
    "plan_runpath",
    "read_ld_so_cache",
    "split_search_path",
    "unresolved_error",
]
