"""A loader view of split output: which file each DT_NEEDED and dlopen target would load.

Simulates glibc's search for one object (``ld.so(8)``), without running anything:

1. a name with a ``/`` is opened as a path;
2. ``DT_RPATH``, only when the object has no ``DT_RUNPATH``;
3. ``LD_LIBRARY_PATH`` (only when given);
4. ``DT_RUNPATH``;
5. the system: the interpreter's directory, then (for the host's own loader) ``ld.so.cache``,
   then the default directories of the file's architecture (unless turned off).

Without ``--interpreter``, a file without PT_INTERP (a library) is viewed as this machine's
loader would load it: its standard glibc loader for the file's architecture, where installed,
so ``libc.so.6`` resolves as it does for any program here. A loader in ``/nix/store`` reads no
host ``ld.so.cache``.

``$ORIGIN`` is the object's directory. A ``dlopen`` pattern such as ``libnvrtc.so.%s`` stands
for the first file of the search path that fits it. ``maps`` stand in for the machine the output
will run on: ``/run/opengl-driver=/tmp/driver`` reads the driver link from another place. A
candidate of another ELF class or machine is skipped, as the loader does. Glibc's own libraries
always come from the interpreter's directory. Flags: ``stub-shadows-driver`` (a stub of a driver
library would be loaded), ``stub-reachable`` (a directory searched, other than the system's,
holds a driver library's stub: ``dlopen("libcuda.so")`` would load it), ``not-found`` (a
``DT_NEEDED`` name loads nothing: the file cannot load), ``driver-not-found`` (a library of the
NVIDIA driver, ``libcuda``, ``libnvidia-*``, ``libEGL_nvidia``, ``libnvoptix``, ...: this
machine has no driver, or not that part of it; expected where no GPU driver is installed) and
``optional`` (a ``dlopen`` target that loads nothing: the library asks for it at run time and
copes without it, as CUPTI does for OpenCL and Vulkan, or its consumer provides it). The RPATH
inheritance from the loading executable is not simulated: each object is viewed on its own.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cudasplit._elf.plan import (
    HostLoader,
    default_dirs,
    host_interpreter,
    is_driver_name,
    is_glibc_name,
)
from cudasplit._elf.read import ElfInfo, read_elf_info, scan_dlopen
from cudasplit._searchpath import split_search_path
from cudasplit.errors import ElfError, SourceNotFoundError

__all__ = ["LddOptions", "LoadView", "Resolution", "files_under", "loadable", "view", "view_tree"]

_DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu",
                 "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                 "/usr/lib/aarch64-linux-gnu")

_CACHE = HostLoader()


@dataclass(frozen=True, slots=True)
class LddOptions:
    maps: tuple[tuple[str, str], ...] = ()      # (prefix in the file, where it is here)
    interpreter: str | None = None              # default: the file's own PT_INTERP
    ld_library_path: tuple[str, ...] = ()
    system: bool = True                         # search the default directories


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one ``DT_NEEDED`` name or ``dlopen`` target of a file would load.

    Attributes:
        name: the name asked for.
        path: the file that would be loaded (None: none).
        via: how it was found: ``path``, ``RPATH``, ``LD_LIBRARY_PATH``, ``RUNPATH``,
            ``system``, ``ld.so.cache``, ``glibc``, or ``-``.
        flag: ``stub-shadows-driver``, ``not-found``, ``driver-not-found`` or ``optional``.

    Raises:
        Nothing: a value.
    """

    name: str
    path: str | None          # the file that would be loaded
    via: str                  # path | RPATH | LD_LIBRARY_PATH | RUNPATH | system | glibc | -
    # stub-shadows-driver | not-found | driver-not-found | optional (a dlopen target)
    flag: str | None = None


@dataclass(frozen=True, slots=True)
class LoadView:
    """The loader view of one ELF file: what each DT_NEEDED and dlopen name would load.

    Attributes:
        path: the ELF file.
        interpreter: the loader simulated (the file's PT_INTERP, ``--interpreter``, or for a
            library this machine's loader).
        needed: one resolution per DT_NEEDED name: the file loaded and how it was found.
        dlopen: one resolution per dlopen target found in the file.
        error: why the file could not be read, if it could not.
        flags: ``not-found`` (a DT_NEEDED name loads nothing), ``stub-shadows-driver``,
            ``stub-reachable``, ``driver-not-found`` (a driver library this machine lacks) and
            ``optional`` (a dlopen target that loads nothing) where they apply.

    Raises:
        Nothing: a value.
    """

    path: str
    interpreter: str | None
    needed: tuple[Resolution, ...] = ()
    dlopen: tuple[Resolution, ...] = ()
    error: str | None = None
    flags: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def view(path: str | os.PathLike[str], options: LddOptions | None = None) -> LoadView | None:
    """The loader view of one file; ``None`` when it is not ELF."""
    opts = options or LddOptions()
    name = os.fspath(path)
    try:
        info = read_elf_info(name)
        if info is None:
            return None
        targets = scan_dlopen(name, info) if info.has_dynamic else ()
    except ElfError as exc:
        return LoadView(name, None, error=str(exc))
    interpreter = opts.interpreter or info.interp or host_interpreter(info.machine)
    search = _search(name, info, opts, interpreter)
    needed = tuple(_resolve(n, info, search, interpreter) for n in info.needed)
    opened = tuple(_resolve(_pattern_hit(t.name, search) or t.name, info, search, interpreter,
                            dlopen=True) for t in targets)
    flags = {r.flag for r in (*needed, *opened) if r.flag}
    if any(_stub_in(directory) for via, directory in search if via != "system"):
        flags.add("stub-reachable")
    return LoadView(name, interpreter, needed, opened, None, tuple(sorted(flags)))


def view_tree(root: str | os.PathLike[str], options: LddOptions | None = None
              ) -> list[LoadView]:
    """Every ELF file below ``root`` (or ``root`` itself), in path order."""
    views = (view(p, options) for p in files_under(root))
    return [v for v in views if v is not None]


def files_under(root: str | os.PathLike[str]) -> list[Path]:
    """``root`` itself when a file, else every file below it (links left out), in path
    order; SourceNotFoundError when there is nothing at ``root``."""
    base = Path(root)
    if not base.exists():
        raise SourceNotFoundError("no such file or directory", source=str(base))
    return [base] if base.is_file() else sorted(_files(base))


def _files(root: Path) -> Iterator[Path]:
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            # lstat first: a link into a directory this cannot read (/proc/1/cwd) is no
            # file here, and stat() on it would raise
            if not path.is_symlink() and path.is_file():
                yield path


def _search(path: str, info: ElfInfo, opts: LddOptions, interpreter: str | None
            ) -> list[tuple[str, str]]:
    """(via, directory) in the loader's order."""
    origin = os.path.dirname(os.path.abspath(path))
    dirs: list[tuple[str, str]] = []
    if info.runpath is None:
        dirs += [("RPATH", d) for d in split_search_path(info.rpath)]
    dirs += [("LD_LIBRARY_PATH", d) for d in opts.ld_library_path]
    dirs += [("RUNPATH", d) for d in split_search_path(info.runpath)]
    if opts.system:
        own = [posixpath.dirname(os.path.realpath(interpreter))] if interpreter else []
        dirs += [("system", d) for d in own]
        if not (interpreter or "").startswith("/nix/store/"):
            dirs += [("ld.so.cache", posixpath.dirname(p)) for n in info.needed
                     for p in _CACHE.cache_paths(n)]
        dirs += [("system", d) for d in (*default_dirs(info.elf_class, info.machine),
                                         *_DEFAULT_DIRS)]
    mapped = [(via, _mapped(_expand(d, origin), opts.maps)) for via, d in dirs if d]
    first: dict[str, str] = {}  # a directory is searched once, at its first place
    for via, directory in mapped:
        first.setdefault(directory, via)
    return [(via, directory) for directory, via in first.items()]


def _pattern_hit(name: str, search: list[tuple[str, str]]) -> str | None:
    """``libnvrtc.so.%s`` (a printf pattern the library fills in): the first file in the
    search path that fits, else None (then the pattern itself is reported as not found)."""
    if "%" not in name:
        return None
    pattern = re.sub(r"%[0-9.]*[sdu]", "*", name)
    for _via, directory in search:
        try:
            hits = sorted(fnmatch.filter(os.listdir(directory), pattern))
        except OSError:
            continue
        if hits:
            return hits[0]
    return None


def _expand(entry: str, origin: str) -> str:
    return entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


def _mapped(directory: str, maps: Sequence[tuple[str, str]]) -> str:
    for old, new in maps:
        if directory == old or directory.startswith(old.rstrip("/") + "/"):
            return new.rstrip("/") + directory[len(old.rstrip("/")):]
    return directory


def _resolve(name: str, info: ElfInfo, search: list[tuple[str, str]],
             interpreter: str | None, *, dlopen: bool = False) -> Resolution:
    if "/" in name:
        return Resolution(name, name if os.path.exists(name) else None, "path",
                          None if os.path.exists(name) else "not-found")
    if is_glibc_name(name) and interpreter:
        # The loader's own directory, symlinks resolved (Debian: /lib64/ld-linux-x86-64.so.2
        # -> /usr/lib/x86_64-linux-gnu/, where libc.so.6 lives).
        candidate = os.path.join(os.path.dirname(os.path.realpath(interpreter)), name)
        if loadable(candidate, info):
            return Resolution(name, candidate, "glibc")
    if is_glibc_name(name) and not interpreter:
        # A library without --interpreter: glibc comes from whichever program loads it.
        return Resolution(name, None, "glibc")
    for via, directory in search:
        candidate = os.path.join(directory, name)
        if loadable(candidate, info):
            stub = "stubs" in Path(os.path.realpath(candidate)).parts or "stubs" in \
                directory.split("/")
            flag = "stub-shadows-driver" if stub and is_driver_name(name) else None
            return Resolution(name, candidate, via, flag)
    if is_driver_name(name):
        return Resolution(name, None, "-", "driver-not-found")
    return Resolution(name, None, "-", "optional" if dlopen else "not-found")


def _stub_in(directory: str) -> bool:
    """A driver library's stub found by name in ``directory`` (``lib/libcuda.so ->
    stubs/libcuda.so``, NixOS/nixpkgs#293320): a ``dlopen("libcuda.so")`` or a later
    DT_NEEDED would load it. A stubs directory itself on the path counts too."""
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    for name in names:
        if is_driver_name(name) and _SO.search(name):
            real = os.path.realpath(os.path.join(directory, name))
            if "stubs" in Path(real).parts:
                return True
    return False


_SO = re.compile(r"\.so(\.|$)")


def loadable(candidate: str, info: ElfInfo) -> bool:
    """Exists and has the class and machine of the loading object (else the loader skips)."""
    try:
        found = read_elf_info(candidate)
    except (ElfError, OSError):
        return False
    return (found is not None and found.elf_class == info.elf_class
            and found.machine == info.machine)
