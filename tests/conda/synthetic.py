"""Small archives in NVIDIA's layout, built here with gcc, for the conda-forge profile's fast tests.

``cudart_tree`` is cuda_cudart's layout with what the wheel-derived real-byte tarballs lack: the
libcuda stub, the static archives and NVIDIA's ``pkg-config/`` modules (``cudaroot=``). Its
libraries are gcc-built stand-ins (``libcudart.so.13.0.96`` with its SONAME and an old DT_RUNPATH
to be replaced), never NVIDIA's bytes.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.builders import compile_shared, make_static_archive, write_tarball

VERSION = "13.0.96"
TOP = f"cuda_cudart-linux-x86_64-{VERSION}-archive"

PC = """cudaroot=/usr/local/cuda-13.0
libdir=${{cudaroot}}/targets/x86_64-linux/lib
includedir=${{cudaroot}}/targets/x86_64-linux/include

Name: {name}
Description: {name} stand-in module
Version: 13.0
Libs: -L${{libdir}} -l{lib}
Cflags: -I${{includedir}}
"""


def cudart_tree(base: Path, top: str = TOP) -> Path:
    """The top directory of a cuda_cudart-like archive below ``base``."""
    root = base / top
    lib = root / "lib"
    compile_shared(lib, f"libcudart.so.{VERSION}", "int cudart_value(void) { return 13; }\n",
                   soname="libcudart.so.13", runpath="/usr/local/cuda/lib64")
    (lib / "libcudart.so.13").symlink_to(f"libcudart.so.{VERSION}")
    (lib / "libcudart.so").symlink_to("libcudart.so.13")
    make_static_archive(lib, "libcudart_static.a", ["int cudart_static(void) { return 1; }\n"])
    make_static_archive(lib, "libcudadevrt.a", ["int cudadevrt(void) { return 2; }\n"])
    compile_shared(lib / "stubs", "libcuda.so", "int cuInit(unsigned f) { (void)f; return 34; }\n",
                   soname="libcuda.so.1")
    (root / "include" / "cooperative_groups").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("/* stand-in */\n")
    (root / "include" / "cooperative_groups" / "details.h").write_text("/* stand-in */\n")
    (root / "pkg-config").mkdir()
    for name, libname in (("cuda", "cuda"), ("cudart", "cudart")):
        (root / "pkg-config" / f"{name}-13.0.pc").write_text(PC.format(name=name, lib=libname))
    (root / "LICENSE").write_text("stand-in license text of a test archive\n")
    (root / "extras").mkdir()
    (root / "extras" / "README").write_text("in no package\n")
    return root


def cudart_tarball(base: Path) -> Path:
    """``cudart_tree`` as an uncompressed tarball named like NVIDIA's."""
    return write_tarball(cudart_tree(base / "tree"), base, "none")


def cccl_tarball(base: Path) -> Path:
    """A cuda_cccl-like archive (headers and CMake files; cuda-cudart-dev needs it)."""
    root = base / "tree" / "cuda_cccl-linux-x86_64-13.0.85-archive"
    for rel in ("include/cccl/cuda/std/cstdint", "lib/cmake/cccl/cccl-config.cmake"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("/* stand-in */\n")
    (root / "LICENSE").write_text("stand-in license text of a test archive\n")
    return write_tarball(root, base, "none")


DRIVER = "580.95.05"
# name -> the links the archive has (NVIDIA's compat and driver archives have these chains)
COMPAT_LIBS = {"libcuda": ("1", ""), "libnvidia-nvvm": ("4", ""),
               "libnvidia-ptxjitcompiler": ("1", ""), "libcudadebugger": ("1",),
               "libnvidia-pkcs11": ("1",)}


def compat_tarball(base: Path, pname: str = "cuda_compat") -> Path:
    """A cuda_compat-like archive (``compat/``), or with ``pname="nvidia_driver"`` a driver
    archive's ``lib/`` and a tool; the libraries are gcc-built stand-ins."""
    directory = "compat" if pname == "cuda_compat" else "lib"
    root = base / "tree" / f"{pname}-linux-x86_64-{DRIVER}-archive"
    for stem, chain in COMPAT_LIBS.items():
        where = root / directory
        compile_shared(where, f"{stem}.so.{DRIVER}", f"int {stem.replace('-', '_')}(void) "
                       "{ return 1; }\n", soname=f"{stem}.so.{chain[0]}")
        previous = f"{stem}.so.{DRIVER}"
        for short in chain:
            alias = f"{stem}.so.{short}" if short else f"{stem}.so"
            (where / alias).symlink_to(previous)
            previous = alias
    if pname == "nvidia_driver":
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "nvidia-smi").write_text("#!/bin/sh\n")
    (root / "LICENSE").write_text("stand-in license text of a test archive\n")
    return write_tarball(root, base, "none")
