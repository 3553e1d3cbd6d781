"""A split's outputs looked at: what they keep alive (:func:`closure_of`, and the bytes of
each with :func:`measure_outputs`), where their ELF files' libraries load from (:func:`ldd`),
and one CUDA toolkit prefix laid over them (:func:`toolkit_view`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.checks": ("LoadView", "closure_of", "ldd"),
    "cudasplit._release.closure": (
        "ClosureReport", "ClosureWarning", "OutputSize", "Reference", "measure_outputs"),
    "cudasplit._release.ldd": ("Resolution",),
    "cudasplit._release.toolkit": ("ToolkitView", "toolkit_view"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.checks import LoadView, closure_of, ldd
    from cudasplit._release.closure import (
        ClosureReport,
        ClosureWarning,
        OutputSize,
        Reference,
        measure_outputs,
    )
    from cudasplit._release.ldd import Resolution
    from cudasplit._release.toolkit import ToolkitView, toolkit_view

__all__ = [
    "ClosureReport",
    "ClosureWarning",
    "LoadView",
    "OutputSize",
    "Reference",
    "Resolution",
    "ToolkitView",
    "closure_of",
    "ldd",
    "measure_outputs",
    "toolkit_view",
]
