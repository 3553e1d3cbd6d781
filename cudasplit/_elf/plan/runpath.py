"""Plan the new RUNPATH (or RPATH) of one ELF file.

:func:`plan_runpath` is pure: it sees names and strings only, never the filesystem, so every
rule below is unit-tested without fixtures. The one impure helper, :func:`index_library_paths`,
builds the library index once per run.

The planned search path is, de-duplicated (first occurrence wins)::

    [cuda_compat dir] : <driver link>/lib : <dirs resolving DT_NEEDED> : $ORIGIN
        : <existing $ORIGIN-relative entries> : [kept absolute entries] : [append ...]

This is the order Nixpkgs reaches with four hooks (autoPatchelf, addDriverRunpath,
addCudaCompatRunpath, the stubs fix-up), done in one step so that nothing is duplicated and
no stubs directory survives.

The policy lives in :mod:`cudasplit._elf.plan.policy`, the entry spelling in
:mod:`cudasplit._searchpath`, the glibc/driver names and the library index in
:mod:`cudasplit._elf.read.libnames`; this module plans, and keeps every name importable from here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from cudasplit._elf.plan.policy import RunpathPolicy, require_absolute
from cudasplit._elf.read import index_library_paths, is_driver_name, is_glibc_name
from cudasplit._run import DEFAULT_DRIVER_LINK
from cudasplit._searchpath import (
    ORIGIN,
    dedupe,
    entry_key,
    is_origin_relative,
    is_stub_entry,
    split_search_path,
)
from cudasplit.errors import RunpathPolicyError

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "index_library_paths",
    "is_driver_name",
    "is_glibc_name",
    "plan_runpath",
]


@dataclass(frozen=True, slots=True)
class RunpathPlan:
    """The planned search path of one ELF file and what the planner learnt on the way.

    ``dropped`` lists the existing entries the policy removed (stubs, empty, relative, or
    absolute without ``keep_absolute``), in their original order, for the report.

    Attributes:
        entries: the planned search path, in order.
        needed_unresolved: DT_NEEDED names nothing here provides.
        needed_from_driver: names left to the driver directory.
        dropped: existing entries the policy removed.

    Raises:
        Nothing: a value.
    """

    entries: tuple[str, ...]
    needed_unresolved: tuple[str, ...]
    needed_from_driver: tuple[str, ...]
    dropped: tuple[str, ...] = ()

    @property
    def value(self) -> str:
        """The search path as written into ``DT_RUNPATH``/``DT_RPATH``."""
        return ":".join(self.entries)


def plan_runpath(
    *,
    existing: str | None,
    needed: Sequence[str],
    own_dir_names: Collection[str],
    package_dirs: Mapping[str, str],
    library_index: Mapping[str, str],
    policy: RunpathPolicy,
    is_compat_package: bool = False,
) -> RunpathPlan:
    """Plan the search path of one ELF file: the driver (and ``cuda_compat``) first, then
    the directories of the package's own libraries it needs, ``$ORIGIN``, the kept
    ``$ORIGIN``-relative entries, and the policy's appended ones.

    Args:
        existing: the file's current ``DT_RUNPATH`` or ``DT_RPATH`` (``None``: neither).
        needed: its DT_NEEDED names.
        own_dir_names: the names present in the file's own directory within the package.
        package_dirs: names the package provides elsewhere -> their absolute final
            directory.
        library_index: names found on the library path (``--library-path``) -> their
            absolute directory.
        policy: the :class:`RunpathPolicy` of the run.
        is_compat_package: the file belongs to ``cuda_compat`` (its libcuda comes through
            ``$ORIGIN``).

    Returns:
        The :class:`RunpathPlan`: entries, and the names left unresolved or left to the
        driver.

    Raises:
        RunpathPolicyError: a directory from those mappings is not absolute or contains
            ``:``.
    """
    needed_dirs, unresolved, from_driver = _resolve_needed(
        needed, own_dir_names, package_dirs, library_index, policy.stub_dirs
    )
    append_keys = {entry_key(entry) for entry in policy.append}
    origin_group, kept_group, dropped = _sort_existing(existing, policy, append_keys)
    head = [*_leading_dirs(policy, is_compat_package), *needed_dirs, ORIGIN]
    entries = dedupe([*head, *origin_group, *kept_group, *policy.append])
    return RunpathPlan(
        entries=entries,
        needed_unresolved=unresolved,
        needed_from_driver=from_driver,
        dropped=dropped,
    )


# --- planning steps -----------------------------------------------------------------------


def _leading_dirs(policy: RunpathPolicy, is_compat_package: bool) -> list[str]:
    # cuda_compat's libcuda is newer than the driver's and must be found first; it still
    # needs libnvrm_* from the driver dir, hence the driver dir right after. cuda_compat's own
    # files find their libcuda through $ORIGIN instead.
    leading: list[str] = []
    if policy.cuda_compat is not None and not is_compat_package:
        leading.append(policy.cuda_compat)
    driver_dir = policy.driver_lib_dir()
    if driver_dir is not None:
        leading.append(driver_dir)
    return leading


def _resolve_needed(
    needed: Sequence[str],
    own_dir_names: Collection[str],
    package_dirs: Mapping[str, str],
    library_index: Mapping[str, str],
    stub_dirs: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Directories for ``needed`` in order, plus the unresolved and driver-provided names."""
    dirs: list[str] = []
    unresolved: list[str] = []
    from_driver: list[str] = []
    for name in dict.fromkeys(needed):
        if _needs_no_entry(name, own_dir_names):
            continue
        found = _lookup(name, package_dirs, stub_dirs) or _lookup(name, library_index, stub_dirs)
        if found is not None:
            dirs.append(found)
        elif is_driver_name(name):
            from_driver.append(name)
        else:
            unresolved.append(name)
    return tuple(dirs), tuple(unresolved), tuple(from_driver)


def _needs_no_entry(name: str, own_dir_names: Collection[str]) -> bool:
    # A name with a slash is opened as a path and never searched, so RUNPATH cannot help it.
    # Names in the file's own directory are covered by $ORIGIN.
    return not name or "/" in name or is_glibc_name(name) or name in own_dir_names


def _lookup(name: str, mapping: Mapping[str, str], stub_dirs: tuple[str, ...]) -> str | None:
    directory = mapping.get(name)
    if directory is None:
        return None
    require_absolute(directory, f"directory of {name}")
    # A hit in a stubs dir is no hit: it is exactly the entry that breaks programs at run
    # time (#320145), so the name falls through to the later rules (usually: the driver).
    if is_stub_entry(directory, stub_dirs):
        return None
    return directory


def _sort_existing(
    existing: str | None, policy: RunpathPolicy, append_keys: set[str]
) -> tuple[list[str], list[str], tuple[str, ...]]:
    """Split existing entries into the $ORIGIN group, the kept absolute group and the dropped.

    Entries the policy appends are left to ``append`` so that they keep their place at the
    end; this is what makes planning from a planned value give the same value again.
    """
    origin_group: list[str] = []
    kept_group: list[str] = []
    dropped: list[str] = []
    for entry in split_search_path(existing):
        # Empty entries mean the current directory to the loader: a library-injection hazard
        # (libnvrtc ships "$ORIGIN:"), so they always go.
        if not entry or is_stub_entry(entry, policy.stub_dirs):
            dropped.append(entry)
        elif entry_key(entry) in append_keys:
            continue
        elif is_origin_relative(entry):
            origin_group.append(entry)
        elif policy.keep_absolute and entry.startswith("/"):
            kept_group.append(entry)
        else:
            dropped.append(entry)
    return origin_group, kept_group, tuple(dropped)
