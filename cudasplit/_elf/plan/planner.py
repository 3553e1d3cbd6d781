"""The one planner of ELF edits: member facts + output layout + policy -> :class:`ElfPlan`.

Pure: it sees names and strings only, never the filesystem, so the real run, ``--dry-run``,
``inspect`` and ``explain`` get the same :class:`~cudasplit._elf.patch.backends.ElfEdit` for a file
by construction. Early patching (while the archive still streams) asks :func:`plan_elf` with an
incomplete context; the plan says itself whether it is ``final``: only when every ``DT_NEEDED``
name is glibc's or already lies in the file's own directory. Any other name (even a
driver-like one such as ``libnvidia-demo.so.1``) may still arrive with a later member, and the
package's own copy wins over the driver link, so such a file waits for the complete context.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from cudasplit._elf.plan.edit import ElfEdit
from cudasplit._elf.plan.hostloader import HostLoader
from cudasplit._elf.plan.resolve import LibraryIndex, arch_of, ignored
from cudasplit._elf.plan.runpath import (
    RunpathPlan,
    RunpathPolicy,
    is_glibc_name,
    plan_runpath,
)
from cudasplit._elf.read import ElfInfo
from cudasplit._globs import Glob
from cudasplit._searchpath import split_search_path

__all__ = ["ElfPlan", "PlacedElf", "PlanContext", "plan_elf"]


@dataclass(frozen=True, slots=True)
class PlacedElf:
    """What the planner needs of one placed ELF member."""

    output: str
    dest: str
    info: ElfInfo | None          # None: unreadable (reported elsewhere)
    rule_append: tuple[str, ...] = ()
    keep_runpath: bool = False
    patch_off_by: str | None = None  # rule ref that turned patching off
    # A rule's exact search path (conda-forge: "$ORIGIN"): written as it is, nothing resolved;
    # ``tag``: the rule's RPATH/RUNPATH instead of the policy's.
    exact: tuple[str, ...] | None = None
    tag: str | None = None

    @property
    def directory(self) -> tuple[str, str]:
        return self.output, posixpath.dirname(self.dest)


@dataclass(frozen=True, slots=True)
class PlanContext:
    """Everything a plan depends on besides the file. ``complete``: the archive has ended, so
    ``package_dirs`` and ``names`` are whole."""

    policy: RunpathPolicy
    names: Mapping[tuple[str, str], Collection[str]]  # (output, dir) -> names placed there
    package_dirs: Mapping[str, str]                   # library name -> final directory
    library_index: LibraryIndex = field(default_factory=LibraryIndex)
    is_compat_package: bool = False
    renames: Mapping[str, str] = field(default_factory=dict)
    complete: bool = True
    # Package-table add_needed, resolved: (globs on the file's path in its output, names).
    add_needed: tuple[tuple[tuple[Glob, ...], tuple[str, ...]], ...] = ()
    # Outside Nix: what this machine's loader finds is resolved (policy.host_loader).
    host: HostLoader | None = None


@dataclass(frozen=True, slots=True)
class ElfPlan:
    """The planned edit of one file; ``skip`` says why nothing is planned."""

    edit: ElfEdit
    final: bool
    skip: str | None = None
    runpath: RunpathPlan | None = None
    interpreter_before: str | None = None
    unresolved: tuple[str, ...] = ()   # fail the run where the policy says so
    ignored: tuple[str, ...] = ()      # unresolved, accepted by --ignore-missing


def plan_elf(facts: PlacedElf, ctx: PlanContext) -> ElfPlan:
    """Plan one file (see the module docstring)."""
    info = facts.info
    if facts.patch_off_by is not None:
        return ElfPlan(ElfEdit(), True, f"patching turned off by rule {facts.patch_off_by}")
    if info is None or not info.has_dynamic:
        return ElfPlan(ElfEdit(), True, "no dynamic section")
    if facts.exact is not None:
        return _exact_plan(facts, info, ctx.policy)
    renames = tuple((old, ctx.renames[old]) for old in info.needed if old in ctx.renames)
    needed = tuple(ctx.renames.get(name, name) for name in info.needed)
    # Added names resolve like the file's own: RUNPATH must find them too.
    adds = _additions(facts.dest, needed, ctx)
    needed += adds
    own = ctx.names.get(facts.directory, ())
    policy = _file_policy(ctx.policy, facts)
    runpath = plan_runpath(
        existing=info.runpath if info.runpath is not None else info.rpath,
        needed=needed, own_dir_names=own, package_dirs=ctx.package_dirs,
        library_index=ctx.library_index.for_arch(info.elf_class, info.machine),
        policy=policy, is_compat_package=ctx.is_compat_package)
    foreign = _foreign(info, policy)
    left = tuple(n for n in runpath.needed_unresolved
                 if ctx.host is None or ctx.host.find(n, info.elf_class, info.machine) is None)
    accepted = tuple(n for n in left if foreign or ignored(n, policy.ignore_missing))
    edit = ElfEdit(runpath=runpath.value, tag=facts.tag or policy.tag,
                   interpreter=_interpreter(info, policy), replace_needed=renames,
                   add_needed=adds)
    return ElfPlan(
        edit=edit, final=ctx.complete or _settled(needed, own), runpath=runpath,
        interpreter_before=info.interp,
        unresolved=tuple(n for n in left if n not in accepted),
        ignored=accepted)


def _exact_plan(facts: PlacedElf, info: ElfInfo, policy: RunpathPolicy) -> ElfPlan:
    """A rule's exact search path: final at once (it depends on no other member), the other
    tag removed, nothing resolved (the profile owns the layout it names)."""
    assert facts.exact is not None
    existing = info.runpath if info.runpath is not None else info.rpath
    dropped = tuple(e for e in split_search_path(existing) if e not in facts.exact)
    edit = ElfEdit(runpath=":".join(facts.exact), tag=facts.tag or policy.tag,
                   interpreter=_interpreter(info, policy))
    return ElfPlan(edit=edit, final=True, runpath=RunpathPlan(facts.exact, (), (), dropped),
                   interpreter_before=info.interp)


def _additions(dest: str, needed: tuple[str, ...], ctx: PlanContext) -> tuple[str, ...]:
    names = [name for globs, add in ctx.add_needed if any(g.matches(dest) for g in globs)
             for name in add if name not in needed]
    return tuple(dict.fromkeys(names))


def _file_policy(policy: RunpathPolicy, facts: PlacedElf) -> RunpathPolicy:
    if not facts.rule_append and not facts.keep_runpath:
        return policy
    return replace(policy, append=policy.append + facts.rule_append,
                   keep_absolute=facts.keep_runpath or policy.keep_absolute)


def _settled(needed: tuple[str, ...], own: Collection[str]) -> bool:
    """No later member can change how these names resolve: glibc is never on RUNPATH, and a
    name beside the file is found through ``$ORIGIN`` whatever else the package ships."""
    return all(not name or "/" in name or is_glibc_name(name) or name in own
               for name in needed)


def _foreign(info: ElfInfo, policy: RunpathPolicy) -> bool:
    """A file for another machine than the build's (cross packages, profiler target trees)."""
    arch = arch_of(info.machine, info.little_endian)
    return (policy.target_arch is not None and arch != policy.target_arch
            and policy.interpreter_for(arch) is None)


def _interpreter(info: ElfInfo, policy: RunpathPolicy) -> str | None:
    """Only dynamic executables that have a PT_INTERP, and only of an arch we have a loader
    for: a cross-built aarch64 file never gets the build machine's x86_64 loader."""
    if info.interp is None:
        return None
    wanted = policy.interpreter_for(arch_of(info.machine, info.little_endian))
    return None if wanted is None or wanted == info.interp else wanted
