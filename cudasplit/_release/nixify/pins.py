"""Per-set versions of cuDNN, cuSPARSELt and TensorRT, by platform and Jetson: Nixpkgs' pins.

Nixpkgs builds every ``cudaPackages_X_Y`` with ``_cuda.lib.selectManifests`` over one version
per redist (``pkgs/top-level/cuda-packages.nix``); for three redists the version depends on the
build: a Jetson (any requested Jetson capability, ``backendStdenv.hasJetsonCudaCapability``),
another ``aarch64-linux`` (``hostPlatform.isAarch64``), or ``x86_64-linux``. :data:`PINS` is
that table as of the sets that package CUDA 13.4.2 (2026-09); the file's comments give the
reasons: NVIDIA dropped ``linux-aarch64`` cuDNN for CUDA 12 after
9.20.0, TensorRT 10.13.2 dropped CUDA 12 on sbsa, TensorRT 11.x has no CUDA 12 sbsa build and
drops JetPack from 11.2.1, cuSPARSELt 0.7.0 needs CUDA 12.8 and 0.9.0 drops CUDA 12).

Redists the table does not name (cuTENSOR, cuDSS, ...) are the same in every Nixpkgs set; here
they take the newest manifest given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PINS", "PINS_SOURCE", "PIN_CLASSES", "Pin", "pin_for"]

PINS_SOURCE = "pkgs/top-level/cuda-packages.nix of the CUDA 13.4.2 sets"
# The build classes a pin distinguishes, in the order the generated Nix tests them.
PIN_CLASSES = ("jetson", "aarch64", "x86_64")


@dataclass(frozen=True, slots=True)
class Pin:
    """The manifest version (``release_label``) one set takes for a Jetson build, another
    ``aarch64-linux`` build and an ``x86_64-linux`` build."""

    jetson: str
    aarch64: str
    x86_64: str

    def version(self, build: str) -> str:
        return {"jetson": self.jetson, "aarch64": self.aarch64, "x86_64": self.x86_64}[build]

    def builds(self, version: str) -> tuple[str, ...]:
        """The build classes that take ``version``."""
        return tuple(b for b in PIN_CLASSES if self.version(b) == version)


def _every(version: str) -> Pin:
    return Pin(version, version, version)


_CUDNN_12 = Pin("9.20.0", "9.27.0", "9.27.0")
_TENSORRT_12 = Pin("10.7.0", "10.13.0", "11.3.0")
_TENSORRT_130 = Pin("10.16.1", "11.3.0", "11.3.0")
_TENSORRT_132 = Pin("11.1.0", "11.3.0", "11.3.0")

# product (the manifest's release_product) -> CUDA release of the set -> Pin.
PINS: Mapping[str, Mapping[str, Pin]] = {
    "cudnn": {
        "12.6": _CUDNN_12, "12.8": _CUDNN_12, "12.9": _CUDNN_12,
        **{f"13.{m}": _every("9.27.0") for m in range(5)},
    },
    "cusparselt": {
        "12.6": _every("0.6.3"), "12.8": _every("0.7.1"), "12.9": _every("0.8.1"),
        **{f"13.{m}": _every("0.10.0") for m in range(5)},
    },
    "tensorrt": {
        "12.6": _TENSORRT_12, "12.8": _TENSORRT_12, "12.9": _TENSORRT_12,
        "13.0": _TENSORRT_130, "13.1": _TENSORRT_130,
        "13.2": _TENSORRT_132, "13.3": _TENSORRT_132, "13.4": _TENSORRT_132,
    },
}


def pin_for(product: str, release: str) -> Pin | None:
    """The pin of ``product`` in the set of CUDA ``release`` (``major.minor``); None when the
    table has no row for either."""
    return PINS.get(product, {}).get(release)
