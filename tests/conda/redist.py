"""Real NVIDIA bytes for the conda-forge tests: the wheels laid out as redist tarballs.

:func:`conda_tarball` is :func:`tests.support.wheeltrees.redist_tarball` for the packages the
conda-forge profile covers, with the one layout difference from NVIDIA's archives that matters
here: libnvvm's library lives in ``nvvm/lib64/`` in the real archives (conda-forge's 13.0 recipe
packages ``nvvm/lib64`` and tests for it), where the wheel-derived tarball says ``nvvm/lib/``.
The variant is written once next to the cached tarball, uncompressed.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit import Report
from tests.support.wheeltrees import WHEELS_13, Wheel, redist_tarball

# CUDA 13.0 (redistrib_13.0.2.json) and cuBLAS as 13.0.3 ships it; the nvcc-impl set with
# libnvptxcompiler, which cuda-nvcc-dev_<target_platform> needs.
CONDA_WHEELS: dict[str, Wheel] = {
    **{p: WHEELS_13[p] for p in ("cuda_cudart", "cuda_nvcc", "cuda_crt", "libnvvm",
                                 "libnvptxcompiler", "cuda_cccl")},
    "cuda_nvrtc": Wheel("nvidia-cuda-nvrtc", "13.0.88", "13.0"),
    "cuda_cupti": Wheel("nvidia-cuda-cupti", "13.0.85", "13.0"),
    "libcublas": Wheel("nvidia-cublas", "13.1.1.3", "13.0"),
}


def conda_tarball(pname: str, *, platform: str = "linux-x86_64",
                  keep_elf: int | None = None) -> Path:
    """The tarball of ``pname`` (see the module docstring)."""
    tarball = redist_tarball(pname, CONDA_WHEELS[pname], keep_elf=keep_elf, platform=platform)
    if pname != "libnvvm":
        return tarball
    lib64 = tarball.with_name(tarball.name.replace(".tar.gz", ".lib64.tar"))
    if not lib64.exists():
        _move_nvvm_lib(tarball, lib64)
    return lib64


def _move_nvvm_lib(source: Path, dest: Path) -> None:
    """``<top>/nvvm/lib/`` -> ``<top>/nvvm/lib64/``; the archive named like NVIDIA's."""
    tmp = dest.with_suffix(".partial")
    with tarfile.open(source) as src, tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as out:
        for info in src:
            top, _, rest = info.name.partition("/")
            if rest == "nvvm/lib" or rest.startswith("nvvm/lib/"):
                info.name = f"{top}/nvvm/lib64{rest[len('nvvm/lib'):]}"
            out.addfile(info, src.extractfile(info) if info.isfile() else None)
    os.replace(tmp, dest)


@dataclass
class RealChannel:
    """A channel built from these tarballs (tests/conda/conftest.py's session fixture)."""

    path: Path
    cache: Path                                       # rattler's package cache
    reports: dict[tuple[str, str], Report] = field(default_factory=dict)
    packages: dict[tuple[str, str], list[Path]] = field(default_factory=dict)
    reduced: set[tuple[str, str]] = field(default_factory=set)   # built without some ELF
