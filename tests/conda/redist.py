"""Real NVIDIA bytes for the conda-forge tests: the wheels laid out as redist tarballs.

:func:`conda_tarball` is :func:`tests.support.wheeltrees.redist_tarball` for the packages the
conda-forge profile covers, with the two layout differences from NVIDIA's archives that matter
here:

* libnvvm's library lives in ``nvvm/lib64/`` in the real archives (conda-forge's 13.0 recipe
  packages ``nvvm/lib64`` and tests for it), where the wheel-derived tarball says ``nvvm/lib/``;
* cuda_cudart's archive holds the driver stub ``lib/stubs/libcuda.so`` (cuda-driver-dev), which
  the runtime wheel lacks and the feedstock's host-compiler test links (``-lcuda``): an x86_64
  archive gets a gcc-built stand-in with the stub's SONAME (``libcuda.so.1``), never NVIDIA's
  bytes.

Each variant is written once next to the cached tarball, uncompressed.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit import Report
from tests.support.builders import compile_shared
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
    if pname == "cuda_cudart" and platform == "linux-x86_64":
        stubbed = tarball.with_name(tarball.name.replace(".tar.gz", ".stub.tar"))
        if not stubbed.exists():
            _add_driver_stub(tarball, stubbed)
        return stubbed
    if pname != "libnvvm":
        return tarball
    lib64 = tarball.with_name(tarball.name.replace(".tar.gz", ".lib64.tar"))
    if not lib64.exists():
        _move_nvvm_lib(tarball, lib64)
    return lib64


STUB = "int cuInit(unsigned int flags) { (void)flags; return 34; }\n"  # CUDA_ERROR_STUB_LIBRARY


def _add_driver_stub(source: Path, dest: Path) -> None:
    """``<top>/lib/stubs/libcuda.so`` (a gcc-built stand-in) added to ``source``."""
    with tempfile.TemporaryDirectory() as work:
        stub = compile_shared(Path(work), "libcuda.so", STUB, soname="libcuda.so.1")
        tmp = dest.with_suffix(".partial")
        with tarfile.open(source) as src, tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) \
                as out:
            top = ""
            for info in src:
                top = top or info.name.partition("/")[0]
                out.addfile(info, src.extractfile(info) if info.isfile() else None)
            out.add(stub, arcname=f"{top}/lib/stubs/libcuda.so")
    os.replace(tmp, dest)


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
