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
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cudasplit.errors import RunpathPolicyError, SourceError

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "ORIGIN",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "index_library_paths",
    "is_driver_name",
    "is_glibc_name",
    "is_origin_relative",
    "is_stub_entry",
    "plan_runpath",
    "split_search_path",
]

DEFAULT_DRIVER_LINK = "/run/opengl-driver"
ORIGIN = "$ORIGIN"
_ORIGIN_BRACED = "${ORIGIN}"
_TAGS = frozenset({"RUNPATH", "RPATH"})

# glibc and the dynamic loader come from the libc the program runs with, never from RUNPATH:
# pinning them would mix two glibcs in one process (autoPatchelf drops libc for the same reason).
_GLIBC_NAMES = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libpthread.so.0",
        "libdl.so.2",
        "librt.so.1",
        "libutil.so.1",
        "libresolv.so.2",
        "libanl.so.1",
        "libnsl.so.1",
        "libBrokenLocale.so.1",
        "libmvec.so.1",
        "libc_malloc_debug.so.0",
        "libthread_db.so.1",
    }
)
_GLIBC_PATTERNS = ("ld-linux*.so.*", "ld64.so.*", "ld.so.*")

# Libraries of the NVIDIA driver: they must match the running kernel module, so they are found
# through the driver link at run time, never resolved at build time.
_DRIVER_PATTERNS = (
    "libcuda.so*",
    "libnvidia-ml.so*",
    "libnvidia-*.so*",
    "libnvcuvid.so*",
    "libnvrm*",
)

_SHARED_OBJECT_NAME = re.compile(r"\.so(\.|$)")
_SLASHES = re.compile(r"/+")


@dataclass(frozen=True, slots=True)
class RunpathPolicy:
    """How search paths are built; one policy serves a whole run.

    ``cuda_compat`` is the directory holding cuda_compat's ``libcuda.so*`` (``<pkg>/compat``).
    ``stub_dirs`` are absolute directories known to hold stubs, beyond any path with a
    ``stubs`` component. ``append`` entries must be absolute or ``$ORIGIN``-relative.
    """

    driver_link: str | None = DEFAULT_DRIVER_LINK
    cuda_compat: str | None = None
    library_paths: tuple[str, ...] = ()
    append: tuple[str, ...] = ()
    keep_absolute: bool = False
    tag: str = "RUNPATH"
    stub_dirs: tuple[str, ...] = ()
    # (arch, loader path): the PT_INTERP of dynamic executables of that arch ("x86_64", ...).
    interpreters: tuple[tuple[str, str], ...] = ()
    # DT_NEEDED globs that may stay unresolved (autoPatchelfIgnoreMissingDeps).
    ignore_missing: tuple[str, ...] = ()
    # An unresolved name fails the run (default in --nix mode; --strict implies it).
    fail_unresolved: bool = False
    # The build's arch (--nix: the loader's). Unresolved names of files of another arch, with
    # no --interpreter for it, never fail: autoPatchelf skips such files altogether.
    target_arch: str | None = None

    def __post_init__(self) -> None:
        if self.tag not in _TAGS:
            raise RunpathPolicyError(f"tag must be RUNPATH or RPATH, not {self.tag!r}")
        if self.driver_link is not None:
            _require_absolute(self.driver_link, "driver_link")
            _require_not_stub(self.driver_link, self.stub_dirs, "driver_link")
        if self.cuda_compat is not None:
            _require_absolute(self.cuda_compat, "cuda_compat")
            _require_not_stub(self.cuda_compat, self.stub_dirs, "cuda_compat")
        for stub_dir in self.stub_dirs:
            _require_absolute(stub_dir, "stub_dirs entry")
        for entry in self.append:
            _require_append_entry(entry, self.stub_dirs)
        for arch, loader in self.interpreters:
            if not arch or not loader.startswith("/") or "\0" in loader:
                raise RunpathPolicyError(
                    f"interpreter must be ARCH=/absolute/path, not {arch!r}={loader!r}")
        if len(dict(self.interpreters)) != len(self.interpreters):
            raise RunpathPolicyError("two interpreters for one architecture")

    def interpreter_for(self, arch: str) -> str | None:
        """The loader wanted for executables of ``arch`` (``None``: leave PT_INTERP alone)."""
        return dict(self.interpreters).get(arch)

    def driver_lib_dir(self) -> str | None:
        """``<driver_link>/lib``, or ``None`` when the driver link is off."""
        if self.driver_link is None:
            return None
        return posixpath.join(self.driver_link, "lib")


@dataclass(frozen=True, slots=True)
class RunpathPlan:
    """The planned search path of one ELF file and what the planner learnt on the way.

    ``dropped`` lists the existing entries the policy removed (stubs, empty, relative, or
    absolute without ``keep_absolute``), in their original order, for the report.
    """

    entries: tuple[str, ...]
    needed_unresolved: tuple[str, ...]
    needed_from_driver: tuple[str, ...]
    dropped: tuple[str, ...] = ()

    @property
    def value(self) -> str:
        """The search path as written into ``DT_RUNPATH``/``DT_RPATH``."""
        return ":".join(self.entries)


def split_search_path(value: str | None) -> tuple[str, ...]:
    """Split a ``DT_RUNPATH``/``DT_RPATH`` value on ``:``, keeping empty entries.

    Empty entries stay visible because the loader reads them as the current directory
    (libnvrtc ships ``$ORIGIN:``); ``None`` (no such tag) gives no entries.
    """
    if value is None:
        return ()
    return tuple(value.split(":"))


def is_glibc_name(name: str) -> bool:
    """Whether ``name`` is a glibc library or the dynamic loader (never put on RUNPATH)."""
    return name in _GLIBC_NAMES or _matches_any(name, _GLIBC_PATTERNS)


def is_driver_name(name: str) -> bool:
    """Whether ``name`` is a library the NVIDIA driver provides at run time."""
    return _matches_any(name, _DRIVER_PATTERNS)


def is_origin_relative(entry: str) -> bool:
    """Whether ``entry`` is ``$ORIGIN``/``${ORIGIN}`` or a path below it."""
    key = _entry_key(entry)
    return key == ORIGIN or key.startswith(ORIGIN + "/")


def is_stub_entry(entry: str, stub_dirs: Iterable[str] = ()) -> bool:
    """Whether ``entry`` points into a stubs directory.

    A stub ``libcuda.so`` found first makes programs fail with "CUDA driver is a stub
    library" (NixOS/nixpkgs#320145); Nixpkgs strips such entries after the fact (#459416).
    """
    if "stubs" in entry.split("/"):
        return True
    if not entry.startswith("/"):
        return False
    path = posixpath.normpath(_SLASHES.sub("/", entry))
    return any(_is_under(path, posixpath.normpath(stub_dir)) for stub_dir in stub_dirs)


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
    """Plan the search path of one ELF file (see the module docstring for the order).

    ``existing`` is the file's current ``DT_RUNPATH`` or ``DT_RPATH`` (``None``: neither).
    ``own_dir_names`` are the names present in the file's own directory within the package;
    ``package_dirs`` maps names the package provides elsewhere to their absolute final
    directory; ``library_index`` comes from :func:`index_library_paths`. Raises
    :class:`RunpathPolicyError` when a directory from those mappings is not absolute or
    contains ``:``.
    """
    needed_dirs, unresolved, from_driver = _resolve_needed(
        needed, own_dir_names, package_dirs, library_index, policy.stub_dirs
    )
    append_keys = {_entry_key(entry) for entry in policy.append}
    origin_group, kept_group, dropped = _sort_existing(existing, policy, append_keys)
    head = [*_leading_dirs(policy, is_compat_package), *needed_dirs, ORIGIN]
    entries = _dedupe([*head, *origin_group, *kept_group, *policy.append])
    return RunpathPlan(
        entries=entries,
        needed_unresolved=unresolved,
        needed_from_driver=from_driver,
        dropped=dropped,
    )


def index_library_paths(paths: Sequence[str]) -> dict[str, str]:
    """Map each shared-object name found in ``paths`` to the first directory holding it.

    Missing directories (and empty path strings, which would otherwise mean the current
    directory) are ignored; relative paths are made absolute so that no relative entry can
    reach a RUNPATH. Other read errors raise :class:`~cudasplit.errors.SourceError`.
    """
    index: dict[str, str] = {}
    for directory in paths:
        if not directory:
            continue
        final = directory if os.path.isabs(directory) else os.path.abspath(directory)
        for name in _library_names(directory):
            index.setdefault(name, final)
    return index


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
    _require_absolute(directory, f"directory of {name}")
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
        elif _entry_key(entry) in append_keys:
            continue
        elif is_origin_relative(entry):
            origin_group.append(entry)
        elif policy.keep_absolute and entry.startswith("/"):
            kept_group.append(entry)
        else:
            dropped.append(entry)
    return origin_group, kept_group, tuple(dropped)


def _dedupe(entries: Iterable[str]) -> tuple[str, ...]:
    """First occurrence wins; ``${ORIGIN}`` equals ``$ORIGIN`` and ``/a//b/`` equals ``/a/b``."""
    seen: set[str] = set()
    result: list[str] = []
    for entry in entries:
        key = _entry_key(entry)
        if key not in seen:
            seen.add(key)
            result.append(entry)
    return tuple(result)


def _entry_key(entry: str) -> str:
    # Only spelling is normalised: ".." is left alone, since "$ORIGIN/x/.." need not be
    # "$ORIGIN" when x is a symlink.
    if entry.startswith(_ORIGIN_BRACED):
        entry = ORIGIN + entry[len(_ORIGIN_BRACED) :]
    collapsed = _SLASHES.sub("/", entry)
    return collapsed.rstrip("/") or collapsed


# --- small helpers ------------------------------------------------------------------------


def _matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _require_absolute(path: str, what: str) -> None:
    if not path.startswith("/"):
        raise RunpathPolicyError(f"{what} must be an absolute path, not {path!r}")
    if ":" in path:
        raise RunpathPolicyError(f"{what} cannot contain ':' (search path separator): {path!r}")


def _require_not_stub(path: str, stub_dirs: Iterable[str], what: str) -> None:
    if is_stub_entry(path, stub_dirs):
        raise RunpathPolicyError(f"{what} points into a stubs directory: {path!r}")


def _require_append_entry(entry: str, stub_dirs: Iterable[str]) -> None:
    if is_origin_relative(entry):
        if ":" in entry:
            raise RunpathPolicyError(f"append entry cannot contain ':': {entry!r}")
    else:
        _require_absolute(entry, "append entry")
    _require_not_stub(entry, stub_dirs, "append entry")


def _library_names(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as listing:
            return sorted(
                entry.name
                for entry in listing
                if _SHARED_OBJECT_NAME.search(entry.name) and not entry.is_dir()
            )
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise SourceError(
            f"cannot list library path: {error.strerror}", source=directory
        ) from error
