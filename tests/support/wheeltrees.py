"""Redist-layout member lists and small real-byte tarballs built from NVIDIA's PyPI wheels.

NVIDIA publishes the same files twice: as redist tarballs (``<pname>-<platform>-<ver>-archive/``
with ``bin/``, ``include/``, ``lib/`` holding ``libX.so -> libX.so.12 -> libX.so.12.9.79``
chains, ``lib/*_static.a``, ``lib/stubs/``, top-level ``pkg-config/``) and as wheels
(``nvidia/<pkg>/{bin,include,lib}`` for CUDA 12, ``nvidia/cu13/...`` for 13, each shared
library once, under its SONAME). The manifests beyond 12.2.2 are not on disk here, so the
member lists in ``tests/data/trees/packages/`` are laid out from the wheels: the wheel's own
files where it has them, plus what the redist archive adds and the wheel lacks -- the SONAME
chain, ``LICENSE``, the ``pkg-config/`` module, ``*_static.a`` where Nixpkgs declares a
``static`` output and ``lib/stubs/`` where it declares ``stubs`` (each line says which).
Packages without a wheel get the layout their Nixpkgs package file implies.

``python -m tests.support.wheeltrees`` rewrites the lists (downloads the wheels once into
``~/.cache/cudasplit``, see tests/realwheels.py). :func:`redist_tarball` builds a real-byte
tarball of a wheel in the redist layout, optionally keeping only a few real ELF files.
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import DATA
from tests.support.realwheels import cache_dir, wheel_root

TREES = DATA / "trees" / "packages"
PLATFORM = "linux-x86_64"


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str           # the wheel's version (= the redist version for these packages)
    cuda: str              # CUDA major.minor the package belongs to


# CUDA 12.9 (redistrib_12.9.1.json) and the CUDA 13.0 packages the nvcc test needs.
WHEELS: dict[str, Wheel] = {
    "cuda_cudart": Wheel("nvidia-cuda-runtime-cu12", "12.9.79", "12.9"),
    "cuda_cupti": Wheel("nvidia-cuda-cupti-cu12", "12.8.90", "12.8"),  # the pinned CU12 wheel
    "cuda_nvrtc": Wheel("nvidia-cuda-nvrtc-cu12", "12.9.86", "12.9"),
    "libnvjitlink": Wheel("nvidia-nvjitlink-cu12", "12.9.86", "12.9"),
    "libcurand": Wheel("nvidia-curand-cu12", "10.3.10.19", "12.9"),
    "libcufft": Wheel("nvidia-cufft-cu12", "11.4.1.4", "12.9"),
    "libcusparse": Wheel("nvidia-cusparse-cu12", "12.5.10.65", "12.9"),
    "libcusolver": Wheel("nvidia-cusolver-cu12", "11.7.5.82", "12.9"),
    "cuda_nvcc": Wheel("nvidia-cuda-nvcc-cu12", "12.9.86", "12.9"),
    "libcublas": Wheel("nvidia-cublas-cu12", "12.9.1.4", "12.9"),
    "cuda_cccl": Wheel("nvidia-cuda-cccl-cu12", "12.9.27", "12.9"),
    "libnpp": Wheel("nvidia-npp-cu12", "12.4.1.87", "12.9"),
    "libnvjpeg": Wheel("nvidia-nvjpeg-cu12", "12.4.0.76", "12.9"),
    "libcufile": Wheel("nvidia-cufile-cu12", "1.14.1.1", "12.9"),
    "cuda_nvtx": Wheel("nvidia-nvtx-cu12", "12.9.79", "12.9"),
    "cuda_opencl": Wheel("nvidia-cuda-opencl-cu12", "12.9.19", "12.9"),
    "cuda_nvml_dev": Wheel("nvidia-nvml-dev-cu12", "12.9.79", "12.9"),
    "cuda_cuxxfilt": Wheel("nvidia-cuda-cuxxfilt-cu12", "12.9.82", "12.9"),
    "libnvfatbin": Wheel("nvidia-nvfatbin-cu12", "12.9.82", "12.9"),
    "cuda_profiler_api": Wheel("nvidia-cuda-profiler-api-cu12", "12.9.79", "12.9"),
}
WHEELS_13: dict[str, Wheel] = {
    "cuda_nvcc": Wheel("nvidia-cuda-nvcc", "13.0.88", "13.0"),
    "libnvvm": Wheel("nvidia-nvvm", "13.0.88", "13.0"),
    "cuda_crt": Wheel("nvidia-cuda-crt", "13.0.88", "13.0"),
    "cuda_cudart": Wheel("nvidia-cuda-runtime", "13.0.96", "13.0"),
    "cuda_cccl": Wheel("nvidia-cuda-cccl", "13.0.85", "13.0"),
    "cuda_culibos": Wheel("nvidia-cuda-culibos", "13.0.85", "13.0"),
    "libnvptxcompiler": Wheel("nvidia-nvptxcompiler", "13.0.88", "13.0"),
}

# pkg-config modules NVIDIA ships in each archive's pkg-config/ (name -> library it links).
PC_MODULES: dict[str, tuple[tuple[str, str], ...]] = {
    "cuda_cudart": (("cuda", "cuda"), ("cudart", "cudart")),
    "cuda_nvrtc": (("nvrtc", "nvrtc"),),
    "libnvjitlink": (("nvjitlink", "nvJitLink"),),
    "libcurand": (("curand", "curand"),),
    "libcufft": (("cufft", "cufft"), ("cufftw", "cufftw")),
    "libcusparse": (("cusparse", "cusparse"),),
    "libcusolver": (("cusolver", "cusolver"),),
    "libcublas": (("cublas", "cublas"),),
    "libnpp": tuple((m, m) for m in ("nppc", "nppial", "nppicc", "nppidei", "nppif", "nppig",
                                     "nppim", "nppist", "nppisu", "nppitc", "npps", "nppi",
                                     "nppicom")),
    "libnvjpeg": (("nvjpeg", "nvjpeg"),),
    "libcufile": (("cufile", "cufile"),),
    "libcuobjclient": (("cuobjclient", "cuobjclient"),),
    "cuda_nvml_dev": (("nvidia-ml", "nvidia-ml"),),
    "cuda_opencl": (("opencl", "opencl"),),
}

# Stubs the archive holds when they are not stand-ins for the package's own libraries.
STUBS: dict[str, list[str]] = {"cuda_cudart": ["libcuda"], "cuda_nvml_dev": ["libnvidia-ml"]}

# Directories of the wheel that are not part of the redist archive.
_SKIP_PARTS = {"__pycache__", ".metadata"}
MAX_PER_DIR = 12  # headers kept per directory: the layout, not every one of 1,700 CCCL files


def top_name(pname: str, version: str, platform: str = PLATFORM) -> str:
    return f"{pname}-{platform}-{version}-archive"


def _wheel_files(root: Path) -> Iterable[tuple[str, Path]]:
    """``(path below nvidia/<pkg>/, file)`` of the unpacked wheel, sorted."""
    base = root / "nvidia"
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).parts
        if len(rel) < 2 or _SKIP_PARTS & set(rel) or path.is_dir():
            continue
        if path.name in ("__init__.py",):
            continue
        yield "/".join(rel[1:]), path


def _kind(path: Path, rel: str) -> str:
    head = path.read_bytes()[:4] if path.stat().st_size else b""
    if head == b"\x7fELF":
        return "elf-so" if ".so" in rel.rsplit("/", 1)[-1] else "elf-exe"
    if rel.endswith(".a"):
        return "static"
    if rel.startswith("include/") and rel.endswith((".h", ".hpp", ".cuh")):
        return "header"
    return "text" if path.stat().st_size < 65536 and b"\0" not in path.read_bytes()[:4096] \
        else "data"


def _chain(rel: str, version: str) -> list[str]:
    """``lib/libX.so.12`` (the SONAME the wheel ships) -> the redist chain, real file last."""
    directory, name = rel.rsplit("/", 1)
    stem, _, major = name.partition(".so.")
    if not major.isdigit():
        return [f"elf-so {rel}"]
    full = f"{stem}.so.{version}" if version.split(".")[0] == major else f"{stem}.so.{major}.0"
    return [f"symlink {directory}/{stem}.so -> {stem}.so.{major}",
            f"symlink {rel} -> {full}", f"elf-so {directory}/{full}"]


def wheel_member_list(pname: str, wheel: Wheel, outputs: Iterable[str]) -> list[str]:
    """Member lines (``kind path [-> target]``, top dir included) for ``pname``."""
    top = top_name(pname, wheel.version)
    root = wheel_root(wheel.name, wheel.version)
    lines = [f"text {top}/LICENSE"]
    per_dir: dict[str, int] = {}
    shared: list[str] = []
    for rel, path in _wheel_files(root):
        rel = _redist_path(pname, rel)
        kind = _kind(path, rel)
        directory = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if kind in ("header", "text", "data") and rel.startswith("include/"):
            per_dir[directory] = per_dir.get(directory, 0) + 1
            if per_dir[directory] > MAX_PER_DIR:
                continue
        if kind == "elf-so" and rel.startswith("lib/"):
            lines += [f"{entry}  # wheel + redist chain" if i == 0 else entry
                      for i, entry in enumerate(_chain(rel, wheel.version))]
            shared.append(rel.rsplit("/", 1)[1].partition(".so")[0])
            continue
        lines.append(f"{kind} {top}/{rel}")
    lines = [_prefix(line, top) for line in lines]
    have = {_strip_comment(line).split(" ", 1)[1] for line in lines}
    extras = implied_extras(pname, wheel.version, wheel.cuda, shared, outputs)
    return lines + [e for e in extras if _strip_comment(e).split(" ", 1)[1] not in have]


def _prefix(line: str, top: str) -> str:
    kind, rest = line.split(" ", 1)
    if rest.startswith(top + "/"):
        return line
    return f"{kind} {top}/{rest}"


def _redist_path(pname: str, rel: str) -> str:
    """Wheel path -> redist path where the two layouts differ (libnvvm 13: lib/ and include/
    live in nvvm/ in the archive)."""
    if pname == "libnvvm" and not rel.startswith("nvvm/"):
        return "nvvm/" + rel
    return rel


def implied_extras(pname: str, version: str, cuda: str, shared: Iterable[str],
                   outputs: Iterable[str]) -> list[str]:
    """What the redist archive has and the wheel lacks, from the package's outputs."""
    top = top_name(pname, version)
    outs = set(outputs)
    lines: list[str] = []
    libs = sorted(set(shared))
    if "static" in outs:
        lines += [f"static {top}/lib/{lib}_static.a  # implied: static output" for lib in libs]
    if "stubs" in outs:
        stubs = STUBS.get(pname, libs)
        lines += [f"elf-so {top}/lib/stubs/{lib}.so  # implied: stubs output" for lib in stubs]
    if "samples" in outs:
        lines.append(f"text {top}/samples/{pname}/README  # implied: samples output")
    for module, _lib in PC_MODULES.get(pname, ()):
        lines.append(f"text {top}/pkg-config/{module}-{cuda}.pc  # implied: NVIDIA .pc module")
    return lines


def write_list(pname: str, lines: list[str], header: str) -> Path:
    TREES.mkdir(parents=True, exist_ok=True)
    path = TREES / f"{pname}.txt"
    body = "\n".join(_strip_comment(line) for line in lines)
    notes = sorted({line.split("#", 1)[1].strip() for line in lines if "#" in line})
    text = header + "".join(f"# line sources: {n}\n" for n in notes) + body + "\n"
    path.write_text(text)
    return path


def _strip_comment(line: str) -> str:
    return line.split("  #", 1)[0].rstrip()


# -- real-byte tarballs -----------------------------------------------------------------------


# NVIDIA platform -> the wheel's machine (an aarch64 wheel holds the linux-sbsa redist's files).
WHEEL_ARCH = {"linux-x86_64": "x86_64", "linux-sbsa": "aarch64"}


def redist_tarball(pname: str, wheel: Wheel, *, keep_elf: int | None = None,
                   platform: str = PLATFORM) -> Path:
    """``<top>.tar.gz`` of the wheel in the redist layout (symlink chains, real bytes), cached.

    ``keep_elf``: keep only that many ELF files (the smallest) so a test stays fast; None
    keeps all (an nvcc that must really compile). ``platform``: ``linux-sbsa`` builds it from
    the aarch64 wheel (``<pname>-linux-sbsa-<version>-archive``).
    """
    suffix = "all" if keep_elf is None else f"elf{keep_elf}"
    if platform != PLATFORM:
        suffix += f"-{platform}"
    out_dir = cache_dir() / "redist" / f"{pname}-{wheel.version}-{suffix}"
    tarball = out_dir / f"{top_name(pname, wheel.version, platform)}.tar.gz"
    if tarball.exists():
        return tarball
    staging = out_dir / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    top = staging / top_name(pname, wheel.version, platform)
    _lay_out(pname, wheel, top, keep_elf, WHEEL_ARCH[platform])
    tmp = tarball.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        tar.add(top, arcname=top.name)
    os.replace(tmp, tarball)
    shutil.rmtree(staging, ignore_errors=True)
    return tarball


def _lay_out(pname: str, wheel: Wheel, top: Path, keep_elf: int | None,
            arch: str = "x86_64") -> None:
    root = wheel_root(wheel.name, wheel.version, arch)
    files = [(_redist_path(pname, rel), path) for rel, path in _wheel_files(root)]
    elves = sorted((p.stat().st_size, rel) for rel, p in files if _kind(p, rel).startswith("elf"))
    kept = {rel for _size, rel in (elves if keep_elf is None else elves[:keep_elf])}
    (top).mkdir(parents=True)
    (top / "LICENSE").write_text(f"{pname}: see NVIDIA's license (test tarball from a wheel)\n")
    for rel, path in files:
        if _kind(path, rel).startswith("elf") and rel not in kept:
            continue
        dest = top / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        name = dest.name
        stem, _, major = name.partition(".so.")
        if rel.startswith("lib/") and major.isdigit():
            full = f"{stem}.so.{wheel.version}"
            shutil.copy2(path, dest.parent / full)
            os.symlink(full, dest)
            os.symlink(name, dest.parent / f"{stem}.so")
        else:
            shutil.copy2(path, dest)


# -- packages without a wheel: the layout their Nixpkgs package file implies -------------------

def _so(path: str, major: str = "1", full: str = "1.0.0") -> list[str]:
    directory, stem = path.rsplit("/", 1)
    return [f"symlink {directory}/{stem}.so -> {stem}.so.{major}",
            f"symlink {directory}/{stem}.so.{major} -> {stem}.so.{full}",
            f"elf-so {directory}/{stem}.so.{full}"]


# Members below the top directory; versions are the 12.9.1 / 13.x manifests' where known.
IMPLIED: dict[str, tuple[str, list[str]]] = {
    "cuda_cuobjdump": ("12.9.82", ["elf-exe bin/cuobjdump"]),
    "cuda_nvdisasm": ("12.9.88", ["elf-exe bin/nvdisasm"]),
    "cuda_nvprune": ("12.9.82", ["elf-exe bin/nvprune"]),
    "cuda_sanitizer_api": ("12.9.79", [
        "elf-exe compute-sanitizer/compute-sanitizer", "header compute-sanitizer/include/sanitizer.h",
        "elf-so compute-sanitizer/libsanitizer-public.so", "elf-exe bin/compute-sanitizer"]),
    "cuda_documentation": ("12.9.79", ["text CUDA_Toolkit_Release_Notes.txt", "text EULA.txt",
                                       "text tools/CUDA_Occupancy_Calculator.xls"]),
    "cuda_demo_suite": ("12.9.79", ["elf-exe extras/demo_suite/deviceQuery",
                                    "elf-exe extras/demo_suite/bandwidthTest"]),
    "cuda_nsight": ("12.9.79", ["text nsightee_plugins/com.nvidia.cuda.repo-1.0.0-SNAPSHOT.zip"]),
    "cuda_nvvp": ("12.9.79", ["elf-exe bin/nvvp", "text libnvvp/nvvp.ini"]),
    "cuda_sandbox_dev": ("12.9.19", ["header include/nvcudasandbox.h"]),
    "cuda_ctadvisor": ("13.0.48", ["elf-exe bin/ctadvisor"]),
    "cuda_tileiras": ("13.1.80", ["elf-exe bin/tileiras"]),
    "tileiras": ("13.1.80", ["elf-exe bin/tileiras"]),
    "cuda_gdb": ("12.9.79", ["elf-exe bin/cuda-gdb", "elf-exe bin/cuda-gdb-minimal",
                             "elf-exe bin/cuda-gdb-python3.10-tui",
                             "elf-exe bin/cuda-gdb-python3.11-tui",
                             "elf-exe bin/cuda-gdb-python3.12-tui", "elf-exe bin/cuda-gdbserver",
                             "text share/gdb/python/gdb/__init__.py", "text extras/Debugger/README"]),
    "cuda_nvprof": ("12.9.79", ["elf-exe bin/nvprof", "header include/cudaProfiler.h",
                                *_so("lib/libaccinj64", "12", "12.9.79")]),
    "cuda_compat": ("575.57.08", [*_so("compat/libcuda", "1", "575.57.08"),
                                  *_so("compat/libnvidia-ptxjitcompiler", "1", "575.57.08")]),
    "cuda_compat_orin": ("13.0.0", [*_so("compat/libcuda", "1", "580.65.06")]),
    "fabricmanager": ("575.57.08", ["elf-exe bin/nv-fabricmanager", "elf-exe bin/nvswitch-audit",
                                    *_so("lib/libnvfm", "1", "575.57.08"), "header include/nv_fm_agent.h",
                                    "text etc/fabricmanager.cfg",
                                    "text systemd/nvidia-fabricmanager.service",
                                    "data share/nvidia/nvswitch/dgxa100_hgxa100_topology"]),
    "imex": ("575.57.08", ["elf-exe bin/nvidia-imex", "elf-exe bin/nvidia-imex-ctl",
                           "text etc/nvidia-imex/config.cfg",
                           "text systemd/nvidia-imex.service"]),
    "libnvidia_nscq": ("575.57.08", [*_so("lib/libnvidia-nscq", "2", "575.57.08")]),
    "libnvsdm": ("575.57.08", [*_so("lib/libnvsdm", "575", "575.57.08"), "header include/nvsdm.h"]),
    "nvlsm": ("2025.03.2", ["elf-exe usr/bin/nvlsm", "text usr/share/nvlsm/nvlsm.conf"]),
    "nvidia_fs": ("2.25.7", ["text usr/src/nvidia-fs-2.25.7/nvfs-core.c",
                             "text usr/src/nvidia-fs-2.25.7/Makefile"]),
    "mft": ("4.32.0.120", ["elf-exe usr/bin/mst", "elf-exe usr/bin/flint",
                           *_so("usr/lib64/libmtcr_ul", "1", "1.0.0"), "text etc/mft/mft.conf"]),
    "mft_autocomplete": ("4.32.0.120", ["text etc/bash_completion.d/mft"]),
    "mft_oem": ("4.32.0.120", ["elf-exe usr/bin/mlxfwmanager_oem"]),
    "collectx_bringup": ("1.20.4", ["elf-exe opt/mellanox/collectx/bin/clx",
                                    "text opt/mellanox/collectx/etc/clx.conf"]),
    "libcuobjclient": ("1.0.0.9", ["header include/cuobjclient.h",
                                   *_so("lib/libcuobjclient", "1", "1.0.0")]),
    "libcudla": ("12.9.19", ["header include/cudla.h", *_so("lib/libcudla", "1", "1.0.0"),
                             "elf-so lib/stubs/libcudla.so"]),
    "cudnn": ("9.10.2.21_cuda12", ["header include/cudnn.h", "header include/cudnn_graph.h",
                                   *_so("lib/libcudnn", "9", "9.10.2"),
                                   *_so("lib/libcudnn_graph", "9", "9.10.2"),
                                   "static lib/libcudnn_engines_precompiled_static.a",
                                   "static lib/libcudnn_graph_static.a"]),
    "libcutensor": ("2.2.0.0", ["header include/cutensor.h", "header include/cutensorMg.h",
                                *_so("lib/12/libcutensor", "2", "2.2.0"),
                                "static lib/12/libcutensor_static.a",
                                *_so("lib/11/libcutensor", "2", "2.2.0"),
                                "static lib/11/libcutensor_static.a"]),
    "libcusparse_lt": ("0.8.0.4_cuda12", ["header include/cusparseLt.h",
                                          *_so("lib/libcusparseLt", "0", "0.8.0.4"),
                                          "static lib/libcusparseLt_static.a"]),
    "libcudss": ("0.6.0.5_cuda12", ["header include/cudss.h", *_so("lib/libcudss", "0", "0.6.0"),
                                    "static lib/libcudss_static.a",
                                    "text lib/cmake/cudss/cudss-config.cmake"]),
    "libcublasmp": ("0.5.0.864_cuda12", ["header include/cublasmp.h",
                                         *_so("lib/libcublasmp", "0", "0.5.0")]),
    "libcusolvermp": ("0.6.0.712_cuda12", ["header include/cusolverMp.h",
                                           *_so("lib/libcusolverMp", "0", "0.6.0")]),
    "libcal": ("0.4.4.50_cuda12", ["header include/cal.h", *_so("lib/libcal", "0", "0.4.4")]),
    "cuquantum": ("25.06.0.10_cuda12", ["header include/custatevec.h",
                                        *_so("lib/libcustatevec", "1", "1.9.0"),
                                        "static lib/libcustatevec_static.a"]),
    "nvcomp": ("4.2.0.11_cuda12", ["header include/nvcomp.h", *_so("lib/libnvcomp", "4", "4.2.0"),
                                   "static lib/libnvcomp_static.a",
                                   "text lib/cmake/nvcomp/nvcomp-config.cmake"]),
    "libnvjpeg_2k": ("0.8.1.40_cuda12", ["header include/nvjpeg2k.h",
                                         *_so("lib/libnvjpeg2k", "0", "0.8.1"),
                                         "static lib/libnvjpeg2k_static.a"]),
    "libnvtiff": ("0.5.0.67_cuda12", ["header include/nvtiff.h", *_so("lib/libnvtiff", "0", "0.5.0"),
                                      "static lib/libnvtiff_static.a"]),
    "libnpp_plus": ("0.10.0.0_cuda12", ["header include/nppPlus.h",
                                        *_so("lib/libnppc_plus", "0", "0.10.0"),
                                        "static lib/libnppc_plus_static.a"]),
    "nsight_compute": ("2025.2.1.3", [
        "elf-exe nsight-compute/2025.2.1/ncu", "elf-exe nsight-compute/2025.2.1/ncu-ui",
        "elf-so nsight-compute/2025.2.1/host/linux-desktop-glibc_2_11_3-x64/libQt6Core.so.6",
        "elf-so nsight-compute/2025.2.1/host/linux-desktop-glibc_2_11_3-x64/Mesa/libGL.so.1",
        "elf-so nsight-compute/2025.2.1/target/linux-desktop-glibc_2_11_3-x64/libcuda-injection.so",
        "elf-so nsight-compute/2025.2.1/target/linux-v4l_l4t-t210-a64/libcuda-injection.so",
        "elf-so nsight-compute/2025.2.1/target/qnx-t210-a64/libcuda-injection.so",
        "text nsight-compute/2025.2.1/docs/index.html"]),
    "tensorrt": ("10.11.0.33", [
        "header include/NvInfer.h", "header include/NvOnnxParser.h",
        "header include/NvOnnxConfig.h",
        *_so("targets/x86_64-linux-gnu/lib/libnvinfer", "10", "10.11.0"),
        "elf-so targets/x86_64-linux-gnu/lib/libnvinfer_builder_resource_win.so.10.11.0",
        *_so("targets/x86_64-linux-gnu/lib/libnvinfer_plugin", "10", "10.11.0"),
        "static targets/x86_64-linux-gnu/lib/libnvinfer_static.a",
        "elf-so targets/x86_64-linux-gnu/lib/stubs/libnvinfer.so",
        "elf-exe targets/x86_64-linux-gnu/bin/trtexec",
        "symlink lib -> targets/x86_64-linux-gnu/lib", "symlink bin -> targets/x86_64-linux-gnu/bin",
        "data python/tensorrt-10.11.0.33-cp312-none-linux_x86_64.whl",
        "text samples/sampleOnnxMNIST/sampleOnnxMNIST.cpp", "data data/mnist/0.pgm"]),
    "nvidia_driver": ("575.57.08", ["elf-exe bin/nvidia-smi", *_so("lib/libcuda", "1", "575.57.08"),
                                    *_so("lib/libnvidia-ml", "1", "575.57.08"),
                                    "text firmware/nvidia/575.57.08/gsp_ga10x.bin"]),
    "nsight_vse": ("2025.2.0.25123", ["data nsight_vse/NVIDIA.Nsight.VSE.msi"]),
    "visual_studio_integration": ("12.9.79", [
        "text visual_studio_integration/MSBuildExtensions/CUDA 12.9.props"]),
    **{nvpl: ("25.5", [f"header include/{nvpl}.h", *_so(f"lib/lib{nvpl}", "0", "0.4.0"),
                       f"text lib/cmake/{nvpl}/{nvpl}-config.cmake"])
       for nvpl in ("nvpl_blas", "nvpl_common", "nvpl_fft", "nvpl_lapack", "nvpl_rand",
                    "nvpl_scalapack", "nvpl_sparse", "nvpl_tensor")},
}
IMPLIED_PLATFORM = {p: "linux-sbsa" for p in IMPLIED if p.startswith("nvpl_")} | {
    "nsight_vse": "windows-x86_64", "visual_studio_integration": "windows-x86_64",
    "cuda_compat": "linux-aarch64", "cuda_compat_orin": "linux-sbsa", "libcudla": "linux-aarch64"}


def implied_member_list(pname: str) -> list[str]:
    version, members = IMPLIED[pname]
    top = top_name(pname, version, IMPLIED_PLATFORM.get(pname, PLATFORM))
    return [f"text {top}/LICENSE"] + [_prefix(line, top) for line in members]


def write_implied() -> list[Path]:
    written = []
    for pname in sorted(IMPLIED):
        header = (f"# {pname}: no PyPI wheel; the layout Nixpkgs' package file (and NVIDIA's "
                  f"docs) imply, written by tests/wheeltrees.py.\n")
        written.append(write_list(pname, implied_member_list(pname), header))
    return written


def main(argv: list[str]) -> int:
    from cudasplit.rules import load_ruleset

    only_13 = {p: w for p, w in WHEELS_13.items() if p not in WHEELS}
    for pname, wheel in sorted({**WHEELS, **only_13}.items()):
        outputs = load_ruleset(pname).package.outputs or ()
        header = (f"# {pname} {wheel.version} {PLATFORM} (CUDA {wheel.cuda}), laid out from the "
                  f"PyPI wheel {wheel.name}=={wheel.version} by tests/wheeltrees.py.\n"
                  f"# Headers capped at {MAX_PER_DIR} per directory.\n")
        print(write_list(pname, wheel_member_list(pname, wheel, outputs), header))
    for path in write_implied():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# -- a package set's archives: real bytes plus what the redist archive has and the wheel lacks --

SET_LAYOUT = 2  # bump when set_archive lays archives out differently (a new cache directory)

def set_archive(pname: str, wheel: Wheel, top: str, outputs: Iterable[str]) -> Path:
    """Uncompressed ``<top>.tar`` for a generated package set (``nixify-sets``): the wheel's
    real bytes in the redist layout (:func:`redist_tarball`'s), plus :func:`implied_extras`
    for ``outputs`` (small real ``*_static.a`` and stubs, samples, NVIDIA's ``.pc``) so that
    no declared output is empty. ``top`` is the manifest's archive name
    (``cudnn-linux-x86_64-9.27.0.42_cuda13-archive``). Built once into the cache."""
    from tests.support.builders import tree_from_reference

    outs = sorted(set(outputs))
    out_dir = cache_dir() / "redist" / f"{top}-set{SET_LAYOUT}-{'-'.join(outs)}"
    tarball = out_dir / f"{top}.tar"
    if tarball.exists():
        return tarball
    staging = out_dir / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    platform = "linux-sbsa" if "-linux-sbsa-" in top else PLATFORM
    _lay_out(pname, wheel, staging / top, None, WHEEL_ARCH[platform])
    shared = sorted({p.name.partition(".so")[0] for p in (staging / top / "lib").glob("*.so.*")})
    plain = top_name(pname, wheel.version)
    # The archive's stubs (cudart's libcuda.so) whatever the outputs are.
    stubs = ["stubs"] if pname in STUBS else []
    extras = [_strip_comment(line).replace(f" {plain}/", f" {top}/", 1) for line in
              implied_extras(pname, wheel.version, wheel.cuda, shared, [*outs, *stubs])]
    extras = [e for e in extras if not (staging / e.split(" ", 1)[1]).exists()]
    if extras:
        listing = out_dir / "extras.txt"
        listing.write_text("\n".join(extras) + "\n")
        tree_from_reference(listing, staging)
    tmp = tarball.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        tar.add(staging / top, arcname=top)
    os.replace(tmp, tarball)
    shutil.rmtree(staging, ignore_errors=True)
    return tarball
