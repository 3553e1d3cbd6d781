"""cuda_nvcc: the split compiler still compiles, because bin/nvcc.profile is rewritten.

The tree is assembled from the CUDA toolkit installed on the machine (hard links, nothing is
committed or downloaded); the test skips where there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir

TOOLKIT = Path(os.environ.get("CUDASPLIT_TEST_CUDA", "/usr/local/cuda-13.0"))
TOOLS = ("nvcc", "nvcc.profile", "ptxas", "fatbinary", "cudafe++", "nvlink", "bin2c", "crt")
KERNEL = """
#include <cuda_runtime.h>
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
int launch(float *x) { scale<<<1, 32>>>(x, 2.0f); return cudaGetLastError() == cudaSuccess; }
"""

pytestmark = pytest.mark.skipif(not (TOOLKIT / "bin" / "nvcc").is_file(),
                                reason=f"no CUDA toolkit at {TOOLKIT} (set CUDASPLIT_TEST_CUDA)")


def _link_tree(source: Path, dest: Path) -> None:
    """Hard links where possible (same filesystem), copies otherwise."""
    try:
        shutil.copytree(source, dest, copy_function=os.link)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest)


@pytest.fixture(scope="module")
def nvcc_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("nvcc") / "cuda_nvcc-linux-x86_64-13.0.88-archive"
    (top / "bin").mkdir(parents=True)
    for tool in TOOLS:
        path = TOOLKIT / "bin" / tool
        if path.is_dir():
            _link_tree(path, top / "bin" / tool)
        elif path.exists():
            shutil.copy2(path, top / "bin" / tool)
    _link_tree(TOOLKIT / "nvvm", top / "nvvm")
    _link_tree((TOOLKIT / "include").resolve(), top / "include")
    (top / "LICENSE").write_text("NVIDIA license")
    return top


def _compile(nvcc: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "kernel.cu"
    source.write_text(KERNEL)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run([str(nvcc), "-c", str(source), "-o", str(tmp_path / "kernel.o")],
                          env=env, capture_output=True, text=True, check=False, cwd=tmp_path)


@pytest.mark.parametrize("outputs", [None, ("out", "bin", "include", "lib")])
def test_split_nvcc_compiles_a_cu_file(nvcc_tree: Path, tmp_path: Path,
                                       outputs: tuple[str, ...] | None) -> None:
    out = tmp_path / "split"
    report = split_to_dir(nvcc_tree, out, SplitOptions(outputs=outputs))
    bin_output = "out" if outputs is None else "bin"
    profile = (out / bin_output / "bin/nvcc.profile").read_text()
    assert "$(TOP)" not in profile.replace("TOP ", "")
    include_output = "out" if outputs is None else "include"
    assert f'"-I{out / include_output}/include"' in profile
    assert f"{out / bin_output}/nvvm/bin" in profile  # nvvm stays with the compiler
    assert report.member("bin/nvcc.profile").rule == "cuda_nvcc.toml:nvcc-profile"
    result = _compile(out / bin_output / "bin/nvcc", tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "kernel.o").stat().st_size > 1000


def test_unrewritten_profile_would_not_find_headers(nvcc_tree: Path, tmp_path: Path) -> None:
    """The control: the redist layout has no targets/<triple>/, so the original profile fails."""
    out = tmp_path / "split"
    split_to_dir(nvcc_tree, out, SplitOptions(outputs=("out", "bin", "include", "lib"),
                                              rules_files=()))
    profile = out / "bin/bin/nvcc.profile"
    profile.write_text((TOOLKIT / "bin/nvcc.profile").read_text())
    result = _compile(out / "bin/bin/nvcc", tmp_path)
    assert result.returncode != 0


# -- CUDA 13 from NVIDIA's wheels, each package split into its own root -------------------

PROGRAM = """
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda/std/cstdint>  // a CCCL header: found through cuda_cccl's root
static_assert(sizeof(cuda::std::uint32_t) == 4, "libcu++ from cuda_cccl");
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
int main() {
    float *x = nullptr;
    if (cudaMalloc(&x, 32 * sizeof(float)) != cudaSuccess) { std::puts("no device"); return 0; }
    scale<<<1, 32>>>(x, 2.0f);
    std::printf("launch: %s\\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
"""


@pytest.fixture(scope="module")
def cuda13_roots(tmp_path_factory: pytest.TempPathFactory,
                 plain_split_13: Callable[..., Path]) -> dict[str, Path]:
    """cccl, crt, cudart, libnvvm and nvcc 13.0 split like buildRedist would, nvcc last with
    the others' roots (``--package-root PNAME[.OUTPUT]=DIR``)."""
    from tests.support.wheeltrees import WHEELS_13, redist_tarball

    base = tmp_path_factory.mktemp("cuda13")
    # Plain splits shared with the cross and CMake tests.
    roots = {pname: plain_split_13(pname)
             for pname in ("cuda_cccl", "cuda_crt", "cuda_cudart", "libnvvm")}
    # cuda_cudart is single-output (as Nixpkgs): one root for include, lib, static, stubs.
    package_roots = (("cuda_cccl", str(roots["cuda_cccl"] / "out")),
                     ("cuda_crt", str(roots["cuda_crt"] / "out")),
                     ("cuda_cudart", str(roots["cuda_cudart"] / "out")),
                     ("libnvvm", str(roots["libnvvm"] / "out")))
    split_to_dir(redist_tarball("cuda_nvcc", WHEELS_13["cuda_nvcc"]), base / "cuda_nvcc",
                 SplitOptions(package_roots=package_roots))
    roots["cuda_nvcc"] = base / "cuda_nvcc"
    return roots


@pytest.mark.slow
@pytest.mark.parametrize("cudart", ["static", "shared"])
def test_cuda13_nvcc_from_wheels_builds_a_program(cuda13_roots: dict[str, Path], tmp_path: Path,
                                                  cudart: str) -> None:
    nvcc_out = cuda13_roots["cuda_nvcc"] / "out"
    profile = (nvcc_out / "bin/nvcc.profile").read_text()
    cccl = cuda13_roots["cuda_cccl"] / "out"
    assert f'"-isystem" "{cccl}/include"' in profile  # not nvcc's own include/cccl
    assert f'"-I{cuda13_roots["cuda_crt"] / "out"}/include"' in profile
    assert (nvcc_out / "nvvm/bin/cicc").is_file()  # libnvvm copied into nvvm/, as Nixpkgs
    assert not (cccl / "include/nv").exists() or (cccl / "include/nv/target").exists()
    source = tmp_path / "prog.cu"
    source.write_text(PROGRAM)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [str(nvcc_out / "bin/nvcc"), f"--cudart={cudart}", "-arch=sm_80", "-o",
         str(tmp_path / "prog"), str(source)],
        env=env, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    needed = subprocess.run(["readelf", "-d", str(tmp_path / "prog")], capture_output=True,
                            text=True, check=True).stdout
    assert ("libcudart.so.13" in needed) == (cudart == "shared"), needed
