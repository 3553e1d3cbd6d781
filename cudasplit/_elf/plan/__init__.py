"""Planning ELF edits: the RUNPATH policy and plan, where needed libraries resolve, and the one
planner that turns a member's facts and the output layout into an edit value."""

from __future__ import annotations

from cudasplit._argcheck import checked
from cudasplit._elf.plan.edit import EditResult, ElfEdit, UnknownPatcherError
from cudasplit._elf.plan.entries import dedupe, entry_key
from cudasplit._elf.plan.hostloader import (
    HostLoader,
    default_dirs,
    host_interpreter,
    read_ld_so_cache,
)
from cudasplit._elf.plan.planner import ElfPlan, PlacedElf, PlanContext, plan_elf
from cudasplit._elf.plan.resolve import (
    LibraryIndex,
    UnresolvedLibrariesError,
    arch_of,
    ignored,
    loader_arch,
    parse_interpreters,
    unresolved_error,
)
from cudasplit._elf.plan.runpath import (
    DEFAULT_DRIVER_LINK,
    ORIGIN,
    RunpathPlan,
    RunpathPolicy,
    RunpathPolicyError,
    index_library_paths,
    is_driver_name,
    is_glibc_name,
    is_origin_relative,
    is_stub_entry,
    split_search_path,
)
from cudasplit._elf.plan.runpath import plan_runpath as _plan_runpath

# The public function checks its arguments (cudasplit._argcheck); the planner calls the
# leaf module's own, once per ELF file, without the check.
plan_runpath = checked(_plan_runpath)

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
    "arch_of",
    "dedupe",
    "default_dirs",
    "entry_key",
    "host_interpreter",
    "ignored",
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
