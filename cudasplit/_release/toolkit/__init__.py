"""One CUDA toolkit prefix in NVIDIA's layout, made of symlinks into split outputs: what goes
where (``view``) and the staged write that swaps it into place (``write``)."""

from __future__ import annotations

from cudasplit._release.toolkit.view import ToolkitView, toolkit_view
from cudasplit._release.toolkit.write import NVCC_PROFILE, clean_leftovers

__all__ = ["NVCC_PROFILE", "ToolkitView", "clean_leftovers", "toolkit_view"]
