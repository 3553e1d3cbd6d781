"""Nix: the builder's environment (outputs, loader, library dirs) and the ``nix-support/``
files a split writes for stdenv."""

from __future__ import annotations

from cudasplit._nix.env import nix_dynamic_linker, nix_library_dirs, nix_outputs, with_nix_defaults
from cudasplit._nix.support import NixSupport, find_fhs_refs, nix_support_files

__all__ = [
    "NixSupport",
    "find_fhs_refs",
    "nix_dynamic_linker",
    "nix_library_dirs",
    "nix_outputs",
    "nix_support_files",
    "with_nix_defaults",
]
