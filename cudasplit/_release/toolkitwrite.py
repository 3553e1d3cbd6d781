"""Writing a toolkit view: staged next to the prefix, renamed into place when complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from cudasplit._split.rewrites import PREFIX_PROFILE
from cudasplit.errors import ToolkitError

__all__ = ["NVCC_PROFILE", "write_view"]

# NVIDIA's own bin/nvcc.profile; the conda-forge profile writes the same (one definition).
NVCC_PROFILE = PREFIX_PROFILE


def write_view(dest: Path, entries: Mapping[str, Path | None], written: Sequence[str],
               host: str, *, overwrite: bool) -> None:
    """``entries``: prefix path -> absolute source (None: a real directory); ``written``:
    paths that get :data:`NVCC_PROFILE`; ``host``: ``targets/<dir>`` of include and lib64."""
    if (dest.exists() or dest.is_symlink()) and not overwrite:
        raise ToolkitError(f"{dest}: exists (pass overwrite=True / --overwrite)")
    staging = dest.with_name(f".{dest.name}.cudasplit-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
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
        if dest.exists() or dest.is_symlink():
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            else:
                dest.unlink()
        os.replace(staging, dest)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ToolkitError(f"{dest}: cannot write the toolkit view: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
