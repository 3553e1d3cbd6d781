"""Writing a toolkit view: staged next to the prefix, swapped into place when complete.

The stage is ``.DEST.cudasplit-PID`` beside ``DEST``. With ``overwrite`` the finished stage
and the old prefix trade places in one ``renameat2(RENAME_EXCHANGE)`` (where the kernel and
file system have it; else two renames, the old prefix first set aside as
``.DEST.cudasplit-previous-PID``), and only then is the old prefix deleted: a SIGTERM or
SIGKILL at any point leaves either the old prefix or the new one at ``DEST``, never half of
one. What a killed run left beside ``DEST`` is cleaned up by the next run: its stage is
deleted, and an old prefix set aside is deleted when ``DEST`` is there or put back when not.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from cudasplit._sinks import remove_dir, remove_trash
from cudasplit._split.rewrites import PREFIX_PROFILE
from cudasplit.errors import ToolkitError

log = logging.getLogger("cudasplit")

__all__ = ["NVCC_PROFILE", "clean_leftovers", "write_view"]

# NVIDIA's own bin/nvcc.profile; the conda-forge profile writes the same (one definition).
NVCC_PROFILE = PREFIX_PROFILE


def write_view(dest: Path, entries: Mapping[str, Path | None], written: Sequence[str],
               host: str, *, overwrite: bool) -> None:
    """``entries``: prefix path -> absolute source (None: a real directory); ``written``:
    paths that get :data:`NVCC_PROFILE`; ``host``: ``targets/<dir>`` of include and lib64."""
    clean_leftovers(dest)
    if (dest.exists() or dest.is_symlink()) and not overwrite:
        raise ToolkitError(f"{dest}: exists (overwrite replaces it)")
    staging = dest.with_name(f".{dest.name}.cudasplit-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        _lay_out(staging, entries, written, host)
        _swap_in(staging, dest)
    except OSError as exc:
        remove_dir(staging)
        raise ToolkitError(f"{dest}: cannot write the toolkit view: {exc}") from exc
    except BaseException:
        remove_dir(staging)
        raise


def _lay_out(staging: Path, entries: Mapping[str, Path | None], written: Sequence[str],
             host: str) -> None:
    for path, src in sorted(entries.items()):
        where = staging / path
        where.parent.mkdir(parents=True, exist_ok=True)
        if src is None:
            where.mkdir(exist_ok=True)
        elif path not in written:
            os.symlink(src, where)
    for path in written:
        (staging / path).write_text(NVCC_PROFILE)
    # NVIDIA's prefix: include -> targets/<host>/include, lib64 -> targets/<host>/lib.
    for name, sub in (("include", "include"), ("lib64", "lib")):
        rel = f"{host}/{sub}"
        if (staging / rel).exists() and not (staging / name).is_symlink():
            os.symlink(rel, staging / name)


def _swap_in(staging: Path, dest: Path) -> None:
    """``staging`` becomes ``dest``; an old ``dest`` is deleted only once it is replaced."""
    if not (dest.exists() or dest.is_symlink()):
        os.rename(staging, dest)
        return
    if _exchange(staging, dest):
        remove_dir(staging)  # staging now holds the old prefix
        return
    aside = dest.with_name(f".{dest.name}.cudasplit-previous-{os.getpid()}")
    os.rename(dest, aside)
    try:
        os.rename(staging, dest)
    except OSError:
        os.rename(aside, dest)
        raise
    if aside.is_dir() and not aside.is_symlink():
        remove_dir(aside)
    else:
        aside.unlink()


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(one: Path, other: Path) -> bool:
    """Swap two directory entries atomically (Linux ``renameat2``); False where the kernel,
    the C library or the file system cannot, and the caller renames twice instead."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(one), _AT_FDCWD, os.fsencode(other),
                 _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(other))


@functools.lru_cache(maxsize=1)
def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def clean_leftovers(dest: Path) -> None:
    """Remove what killed runs left beside ``dest``: their stages (``.DEST.cudasplit-PID``),
    and an old prefix set aside (``.DEST.cudasplit-previous-PID``), which goes back to
    ``dest`` when the kill came before the new prefix was renamed in."""
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.cudasplit-(previous-)?(\d+)")
    remove_trash(dest.parent)
    try:
        names = sorted(p.name for p in dest.parent.iterdir())
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or _alive(int(match[2])):
            continue
        path = dest.parent / name
        if match[1] and not (dest.exists() or dest.is_symlink()):
            with contextlib.suppress(OSError):
                os.rename(path, dest)
                log.warning("%s: put back the toolkit prefix that a killed run had set "
                            "aside to replace it (overwrite)", dest)
                continue
        if path.is_dir() and not path.is_symlink():
            remove_dir(path)
        else:
            path.unlink(missing_ok=True)
        log.warning("%s: removed what a killed toolkit run left", path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
