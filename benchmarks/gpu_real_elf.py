"""Issue 11 on a real GPU: split real NVIDIA files with long Nix-like paths, strip them, use them.

Two steps:

``python benchmarks/gpu_real_elf.py prepare``  (here; needs the PyPI wheels, cached by
    ``tests/realwheels.py``) writes three redist-layout tarballs of real NVIDIA bytes into
    ``.gpu/`` and a cudasplit wheel plus its dependency wheels (CPython 3.12) into ``.whl/``:

    * ``cuda_cudart-linux-x86_64-13.0.96-archive`` (libcudart.so.13 from ``nvidia-cuda-runtime``
      13.0.96, a gcc-built ``lib/stubs/libcuda.so``);
    * ``cuda_cupti-linux-x86_64-12.8.90-archive`` (libcupti, libnvperf_host, libnvperf_target
      from ``nvidia-cuda-cupti-cu12==12.8.90``: the files whose append-tier output crashed after
      ``strip`` before issue 11);
    * ``cuda_nvcc-linux-x86_64-13.0.88-archive`` (``bin/ptxas`` from ``nvidia-cuda-nvcc``).

``bash benchmarks/gpu_real_elf.sh``  (on the GPU machine) splits them with a store-length
    ``--cuda-compat``, ``--driver-link`` and ``--interpreter`` (a copy of the system loader under
    ``/tmp/.../nix/store/<hash>-glibc-2.40-66/lib/``), then for the patched files and for copies
    after ``strip --strip-debug`` and ``strip --strip-all``: runs a vector-add kernel linked
    against the split cudart (the driver must be initialised through the driver link), loads
    libcupti and libnvperf_host and asks CUPTI for its version and a GPU timestamp, and assembles
    a kernel with the split ptxas (new interpreter) whose cubin a driver-API program loads and
    launches. Its log is ``benchmarks/gpu_real_elf.log``.
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
sys.path.insert(0, str(REPO))

from benchmarks.gpu_driver_link import STUB_SOURCE, build_wheels  # noqa: E402
from tests.support.realwheels import wheel_root  # noqa: E402

GPU = REPO / ".gpu"


def _tarball(top_name: str, files: dict[str, Path], links: dict[str, str],
             stub: bool = False) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / top_name
        for rel, src in files.items():
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, top / rel)
        for rel, target in links.items():
            (top / rel).symlink_to(target)
        if stub:
            (top / "lib" / "stubs").mkdir(parents=True)
            stub_c = Path(tmp) / "stub.c"
            stub_c.write_text(STUB_SOURCE)
            subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                            str(top / "lib" / "stubs" / "libcuda.so"), str(stub_c)], check=True)
        (top / "LICENSE").write_text("NVIDIA Software License (see the redistributable)\n")
        GPU.mkdir(exist_ok=True)
        dest = GPU / f"{top_name}.tar.xz"
        with tarfile.open(dest, "w:xz") as tar:
            tar.add(top, arcname=top_name)
    return dest


def build_tarballs() -> list[Path]:
    for old in GPU.glob("*.tar.xz"):
        old.unlink()
    runtime = wheel_root("nvidia-cuda-runtime", "13.0.96") / "nvidia" / "cu13" / "lib"
    cupti = wheel_root("nvidia-cuda-cupti-cu12", "12.8.90") / "nvidia" / "cuda_cupti" / "lib"
    nvcc = wheel_root("nvidia-cuda-nvcc", "13.0.88") / "nvidia" / "cu13" / "bin"
    return [
        _tarball("cuda_cudart-linux-x86_64-13.0.96-archive",
                 {"lib/libcudart.so.13.0.96": runtime / "libcudart.so.13"},
                 {"lib/libcudart.so.13": "libcudart.so.13.0.96",
                  "lib/libcudart.so": "libcudart.so.13"}, stub=True),
        _tarball("cuda_cupti-linux-x86_64-12.8.90-archive",
                 {"lib/libcupti.so.2025.1.1": cupti / "libcupti.so.12",
                  "lib/libnvperf_host.so": cupti / "libnvperf_host.so",
                  "lib/libnvperf_target.so": cupti / "libnvperf_target.so"},
                 {"lib/libcupti.so.12": "libcupti.so.2025.1.1",
                  "lib/libcupti.so": "libcupti.so.12"}),
        _tarball("cuda_nvcc-linux-x86_64-13.0.88-archive", {"bin/ptxas": nvcc / "ptxas"}, {}),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare"])
    parser.parse_args()
    for path in build_tarballs():
        print(path, path.stat().st_size)
    build_wheels()
    print(sorted(p.name for p in (REPO / ".whl").iterdir()))


if __name__ == "__main__":
    main()
