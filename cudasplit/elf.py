"""What ELF files and static archives carry: GPU code per kind and architecture and the glibc
floor (:func:`inside_of`, the ``inside`` of a split report's members), the symbols a library
exports (:func:`exported_symbols`), and the GPU code a set of GPUs would keep of a tarball,
tree or file (:func:`gpu_prune_plan`, a plan only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.elf": (
        "ExportedSymbol", "FilePlan", "GpuCode", "Inside", "PrunePlan", "VersionNeed",
        "exported_symbols", "gpu_prune_plan", "inside_of"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.elf import (
        ExportedSymbol,
        FilePlan,
        GpuCode,
        Inside,
        PrunePlan,
        VersionNeed,
        exported_symbols,
        gpu_prune_plan,
        inside_of,
    )

__all__ = [
    "ExportedSymbol",
    "FilePlan",
    "GpuCode",
    "Inside",
    "PrunePlan",
    "VersionNeed",
    "exported_symbols",
    "gpu_prune_plan",
    "inside_of",
]
