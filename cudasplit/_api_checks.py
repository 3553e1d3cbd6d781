"""Checks of split output: what each output drags into the closure, and what the loader
would load for every ELF file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ._closure import ClosureReport, closure_of_dir, closure_of_roots
from ._ldd import LddOptions, LoadView, view_tree
from ._nixenv import nix_outputs
from ._progress import ProgressCallback
from ._runpath import DEFAULT_DRIVER_LINK

PathLike = str | os.PathLike[str]

__all__ = ["LoadView", "closure_of", "ldd"]


def closure_of(split_dir: PathLike | None = None, *, roots: Mapping[str, str] | None = None,
               env: Mapping[str, str] | None = None,
               progress: ProgressCallback | None = None) -> ClosureReport:
    """Bytes per output, which outputs each references, and what ``lib``/``out`` drag along.

    The outputs are ``roots`` (output -> directory, e.g. a build's store paths) when given,
    else ``split_dir``'s ``<output>/`` directories, else the Nix builder's outputs (``env``,
    default ``os.environ``)."""
    if roots is not None:
        return closure_of_roots(roots, progress)
    if split_dir is not None:
        return closure_of_dir(split_dir, progress)
    return closure_of_roots({name: str(path) for name, path in nix_outputs(env).items()},
                            progress)


def ldd(path: PathLike, *, maps: Sequence[tuple[str, str]] = (),
        driver_link: str | None = None, interpreter: str | None = None,
        ld_library_path: Sequence[str] = (), system: bool = True) -> list[LoadView]:
    """For every ELF file in ``path`` (a file or a split directory): the file each DT_NEEDED
    name and each detected dlopen target would load.

    ``maps`` (prefix in the files, where it is here) redirect RUNPATH entries; ``driver_link``
    says where the driver link (``DEFAULT_DRIVER_LINK``) is on the machine simulated;
    ``interpreter`` replaces each file's PT_INTERP; ``system`` searches the default dirs."""
    pairs = list(maps)
    if driver_link:
        pairs.append((DEFAULT_DRIVER_LINK, driver_link))
    return view_tree(path, LddOptions(tuple(pairs), interpreter, tuple(ld_library_path), system))
