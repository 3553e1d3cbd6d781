"""Checks of split output: what each output drags into the closure, and what the loader
would load for every ELF file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from cudasplit._argcheck import checked
from cudasplit._elf.plan import DEFAULT_DRIVER_LINK
from cudasplit._nix import nix_outputs
from cudasplit._release.closure import ClosureReport, closure_of_dir, closure_of_roots
from cudasplit._release.ldd import LddOptions, LoadView, view_tree
from cudasplit._run import ProgressCallback

PathLike = str | os.PathLike[str]

__all__ = ["LoadView", "closure_of", "ldd"]


@checked
def closure_of(split_dir: PathLike | None = None, *, roots: Mapping[str, str] | None = None,
               env: Mapping[str, str] | None = None,
               progress: ProgressCallback | None = None) -> ClosureReport:
    """Bytes per output, which outputs each references, and what ``lib``/``out`` drag
    along (their runtime closure in Nix).

    Args:
        split_dir: what ``split -o DIR`` wrote (``DIR/<output>/``); used when ``roots``
            is not given.
        roots: output -> directory (e.g. a build's store paths); wins over ``split_dir``.
        env: the Nix builder environment whose outputs are scanned when neither is given
            (default: ``os.environ``).
        progress: called with a :class:`Progress` after every file scanned.

    Returns:
        A closure report (``text_lines()``, ``as_dict()``, ``draw("dot")``).

    Raises:
        OutputError: ``split_dir`` is not a split directory.
        NixEnvironmentError: neither is given and the environment names no outputs.
    """
    if roots is not None:
        return closure_of_roots(roots, progress)
    if split_dir is not None:
        return closure_of_dir(split_dir, progress)
    return closure_of_roots({name: str(path) for name, path in nix_outputs(env).items()},
                            progress)


@checked
def ldd(path: PathLike, *, maps: Sequence[tuple[str, str]] = (),
        driver_link: str | None = None, interpreter: str | None = None,
        ld_library_path: Sequence[str] = (), system: bool = True) -> list[LoadView]:
    """For every ELF file in ``path``: the file each DT_NEEDED name and each detected
    dlopen target would load, as glibc's loader searches (no program is run).

    Args:
        path: an ELF file or a directory (a split's output).
        maps: (prefix in the files, where it is here) pairs that redirect RUNPATH entries.
        driver_link: where the driver link (``DEFAULT_DRIVER_LINK``) is on the machine
            simulated.
        interpreter: the loader simulated instead of each file's PT_INTERP (default: the
            file's own; for a library without one, this machine's loader).
        ld_library_path: directories searched as ``LD_LIBRARY_PATH``.
        system: search ``ld.so.cache`` and the default directories.

    Returns:
        One :class:`LoadView` per ELF file, in path order.

    Raises:
        SourceError: ``path`` does not exist.
    """
    pairs = list(maps)
    if driver_link:
        pairs.append((DEFAULT_DRIVER_LINK, driver_link))
    return view_tree(path, LddOptions(tuple(pairs), interpreter, tuple(ld_library_path), system))
