"""Show on a machine with an NVIDIA GPU that a split cudart finds the driver through RUNPATH.

Two steps:

``python benchmarks/gpu_driver_link.py prepare``  (here, with network or a local toolkit)
    builds ``.gpu/cuda_cudart-linux-x86_64-<ver>-archive.tar.xz`` from NVIDIA's own
    ``libcudart.so.13`` (local CUDA toolkit, else the ``nvidia-cuda-runtime`` wheel) plus a
    cudasplit wheel and its dependency wheels in ``.whl/`` (nothing of it is committed).

``bash benchmarks/gpu_driver_link.sh``  (on the GPU machine, see that script)
    installs the wheels, splits the tarball with ``--driver-link <dir>`` where ``<dir>/lib``
    holds a link to the driver's ``libcuda.so.1``, builds a vector-add kernel linked against
    the split cudart and runs it with no ``LD_LIBRARY_PATH``; ``LD_DEBUG=libs`` shows which
    ``libcuda.so.1`` the loader initialised. A control split without the driver link shows the
    loader falling back to the system cache.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPU = REPO / ".gpu"
WHEELS = REPO / ".whl"
VERSION = "13.0.96"
TOOLKIT_LIB = Path("/usr/local/cuda-13.0/lib")
# A link-time stand-in: returns CUDA_ERROR_STUB_LIBRARY (34) like NVIDIA's own stub.
STUB_SOURCE = "int cuInit(unsigned int flags) { (void)flags; return 34; }\n"


def find_cudart() -> Path:
    candidate = TOOLKIT_LIB / "libcudart.so.13"
    if candidate.is_file():
        return candidate
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                        "nvidia-cuda-runtime==13.0.96"], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        subprocess.run(["unzip", "-q", str(wheel), "-d", str(GPU / "wheel")], check=True)
    return next((GPU / "wheel").rglob("libcudart.so.13"))


def build_tarball() -> Path:
    top_name = f"cuda_cudart-linux-x86_64-{VERSION}-archive"
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / top_name
        (top / "lib" / "stubs").mkdir(parents=True)
        (top / "include").mkdir()
        shutil.copy2(find_cudart(), top / "lib" / f"libcudart.so.{VERSION}")
        (top / "lib" / "libcudart.so.13").symlink_to(f"libcudart.so.{VERSION}")
        (top / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
        stub_c = Path(tmp) / "stub.c"
        stub_c.write_text(STUB_SOURCE)
        subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                        str(top / "lib" / "stubs" / "libcuda.so"), str(stub_c)], check=True)
        (top / "include" / "cudart_split_marker.h").write_text("/* marker */\n")
        (top / "LICENSE").write_text("NVIDIA Software License (see the redistributable)\n")
        GPU.mkdir(exist_ok=True)
        dest = GPU / f"{top_name}.tar.xz"
        with tarfile.open(dest, "w:xz") as tar:
            tar.add(top, arcname=top_name)
    return dest


def build_wheels() -> None:
    WHEELS.mkdir(exist_ok=True)
    for old in WHEELS.glob("cudasplit-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(WHEELS),
                    str(REPO)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux2014_x86_64", "-d", str(WHEELS),
                    "lief==1.0.0", "zstandard==0.25.0", "pyelftools==0.33"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare"])
    parser.parse_args()
    print(build_tarball())
    build_wheels()
    print(sorted(p.name for p in WHEELS.iterdir()))


if __name__ == "__main__":
    main()
