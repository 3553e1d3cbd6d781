"""Guards for what consumers build: ambiguous RUNPATHs, CUDA dlopen targets, closure budgets."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib import resources

from cudasplit._argcheck import checked
from cudasplit._elf.plan import DEFAULT_DRIVER_LINK
from cudasplit._release.ambiguity import Ambiguity, ambiguities_in
from cudasplit._release.budget import DEFAULT_FORBIDDEN, STORE_DIR, BudgetReport, check_budget
from cudasplit._release.dlopenaudit import DlopenAudit, audit_dlopen
from cudasplit._release.ldd import LddOptions, LoadView, view_tree

PathLike = str | os.PathLike[str]

__all__ = ["DEFAULT_FORBIDDEN_OUTPUTS", "Ambiguity", "BudgetReport", "DlopenAudit",
           "ambiguous_runpaths", "closure_budget", "consumer_guards_hook", "dlopen_audit"]

# Outputs a consumer may never reference at run time unless it says otherwise.
DEFAULT_FORBIDDEN_OUTPUTS = DEFAULT_FORBIDDEN


def _options(maps: Sequence[tuple[str, str]], driver_link: str | None,
             interpreter: str | None = None, ld_library_path: Sequence[str] = (),
             system: bool = True) -> LddOptions:
    pairs = list(maps)
    if driver_link:
        pairs.append((DEFAULT_DRIVER_LINK, driver_link))
    return LddOptions(tuple(pairs), interpreter, tuple(ld_library_path), system)


@checked
def ambiguous_runpaths(path: PathLike, *, maps: Sequence[tuple[str, str]] = (),
                       driver_link: str | None = None) -> list[Ambiguity]:
    """Every ELF file in ``path`` whose RUNPATH (RPATH when it has none) holds a library of one
    name in two directories, as different files: which one loads depends on the order.

    Args:
        path: an ELF file or a tree of them.
        maps: ``(prefix, directory)`` pairs read in place of RUNPATH entries, as for
            :func:`ldd` (e.g. a store path and where it is unpacked).
        driver_link: where the driver link points here (the NVIDIA driver's directory).

    Returns:
        One :class:`Ambiguity` per file and library name, in path order.

    Raises:
        SourceError: ``path`` cannot be read; SourceNotFoundError (also a
            ``FileNotFoundError``) when it does not exist.
    """
    return ambiguities_in(path, _options(maps, driver_link))


@checked
def dlopen_audit(path: PathLike, *, inputs: Sequence[str] = (),
                 maps: Sequence[tuple[str, str]] = (), driver_link: str | None = None,
                 interpreter: str | None = None, ld_library_path: Sequence[str] = (),
                 system: bool = True, views: Sequence[LoadView] | None = None
                 ) -> list[DlopenAudit]:
    """The CUDA libraries every ELF file in ``path`` (any consumer's, not only NVIDIA's) loads
    or dlopens by name, what each would load, and for those that load nothing the first of
    ``inputs`` holding it: what the consumer-guards hook (``cudasplitDlopenRunpaths``) appends
    to the file's RUNPATH.

    Args:
        path: an ELF file or a tree of them.
        inputs: library directories the consumer's build has (the hook's search order).
        maps: ``(prefix, directory)`` pairs read in place of RUNPATH entries, as for
            :func:`ldd`.
        driver_link: where the driver link points here.
        interpreter: the loader whose default directories count (default: this machine's).
        ld_library_path: directories searched as ``LD_LIBRARY_PATH`` would be.
        system: whether the loader's cache and default directories count.
        views: what :func:`ldd` already returned for ``path`` (then nothing is read again).

    Returns:
        One :class:`DlopenAudit` per file and CUDA library name.

    Raises:
        SourceError: ``path`` cannot be read; SourceNotFoundError (also a
            ``FileNotFoundError``) when it does not exist.
    """
    if views is None:
        options = _options(maps, driver_link, interpreter, ld_library_path, system)
        views = view_tree(path, options)
    return audit_dlopen(views, inputs)


@checked(max_bytes=0)
def closure_budget(path: PathLike, *, forbid: Sequence[str] = DEFAULT_FORBIDDEN_OUTPUTS,
                   max_bytes: int | None = None, store_dir: str = STORE_DIR) -> BudgetReport:
    """Walk the run-time closure of ``path`` and report every forbidden output it reaches,
    with the chain of files naming store paths that leads there.

    Args:
        path: a built store path, or any directory whose files name store paths.
        forbid: output kinds the closure may never hold: ``static``, ``stubs``, ``compiler``,
            ``headers`` or any output name (default :data:`DEFAULT_FORBIDDEN_OUTPUTS`).
        max_bytes: the closure's byte budget (``None``: no budget).
        store_dir: the Nix store.

    Returns:
        A :class:`BudgetReport`: the violations (empty when the budget holds) and the bytes.

    Raises:
        SourceError: ``path`` cannot be read; SourceNotFoundError (also a
            ``FileNotFoundError``) when it does not exist.
    """
    return check_budget(path, forbid=forbid, max_bytes=max_bytes, store_dir=store_dir)


@checked
def consumer_guards_hook() -> str:
    """Where the consumer-guards setup hook is, the one ``split --consumer-guards`` writes into
    the output consumers link against.

    Args:
        None.

    Returns:
        The path of ``cudasplit/nix/consumer-guards-hook.sh`` inside the installed package.

    Raises:
        Nothing.
    """
    return str(resources.files("cudasplit").joinpath("nix/consumer-guards-hook.sh"))
