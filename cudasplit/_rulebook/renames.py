"""Packages NVIDIA renamed between CUDA releases (cuda_cccl -> cccl at 13.3), one table.

The package table keeps naming the old pname (``nvcc_includes = ["cuda_cccl"]``); a lookup
by name goes through :func:`aliases` and a pname written for a release through
:func:`name_at`, so one rules entry serves both sides of the rename (Nixpkgs' cccl.nix:
``pname = if cudaAtLeast "13.3" then "cccl" else "cuda_cccl"``). ``diff`` reports these as
renames (:func:`renamed_pairs`).
"""

from __future__ import annotations

from cudasplit._rulebook.gates import version_at_least

__all__ = ["RENAMED", "aliases", "name_at", "renamed_pairs"]

# old pname -> (new pname, first CUDA release with the new name)
RENAMED: dict[str, tuple[str, str]] = {"cuda_cccl": ("cccl", "13.3")}


def name_at(pname: str, cuda_version: str | None) -> str:
    """``pname`` as the manifest of CUDA ``cuda_version`` spells it (unknown: unchanged)."""
    if pname in RENAMED and cuda_version is not None:
        new, since = RENAMED[pname]
        if version_at_least(cuda_version, since):
            return new
    return pname


def aliases(pname: str) -> tuple[str, ...]:
    """``pname`` first, then the other names of the same package."""
    names = [pname]
    for old, (new, _since) in RENAMED.items():
        if pname == old:
            names.append(new)
        elif pname == new:
            names.append(old)
    return tuple(names)


def renamed_pairs(old_names: set[str], new_names: set[str]) -> list[tuple[str, str, str]]:
    """(old, new, since) for each known rename with the old name only in ``old_names`` and
    the new one only in ``new_names``."""
    return [(old, new, since) for old, (new, since) in RENAMED.items()
            if old in old_names - new_names and new in new_names - old_names]
