"""Issue 25: CMake >= 4.3 builds a CUDA project against one toolkit prefix of split wheels.

CMake 4.3 rejects the semicolon list Nixpkgs passes as ``CUDAToolkit_ROOT``; the toolkit view
makes it one path. CMake comes from its PyPI wheel (cached like NVIDIA's, tests/realwheels.py);
the test skips where it cannot be had. CMake's CUDA language takes its compiler from CUDACXX
(or PATH), as with NVIDIA's own installation; ``find_package(CUDAToolkit)`` from
``CUDAToolkit_ROOT``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudasplit.outputs import toolkit_view
from tests.support.realwheels import wheel_root
from tests.support.standin import build_stand_in

CMAKE_WHEEL = ("cmake", "4.4.5")  # >= 4.3: the release that refuses a CUDAToolkit_ROOT list

CMAKELISTS = """
cmake_minimum_required(VERSION 3.24)
project(x LANGUAGES CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_executable(prog prog.cu)
target_link_libraries(prog PRIVATE CUDA::cudart)
set_target_properties(prog PROPERTIES CUDA_ARCHITECTURES 90)
message(STATUS "cudasplit-toolkit: ${CUDAToolkit_BIN_DIR}|${CUDAToolkit_INCLUDE_DIRS}")
"""

PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda/std/cstdint>
__global__ void square(int *x) { x[threadIdx.x] *= x[threadIdx.x]; }
int main() {
    int host[32], *dev = nullptr;
    for (int i = 0; i < 32; ++i) host[i] = i;
    cudaError_t err = cudaMalloc(&dev, sizeof host);
    if (err != cudaSuccess) { std::printf("no device: %s\n", cudaGetErrorName(err)); return 0; }
    cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
    square<<<1, 32>>>(dev);
    cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost);
    std::printf("kernel: %s %d\n", cudaGetErrorName(cudaGetLastError()), host[31]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def cmake() -> Path:
    path = wheel_root(*CMAKE_WHEEL) / "cmake" / "data" / "bin" / "cmake"
    if not path.is_file():
        pytest.skip(f"the {CMAKE_WHEEL[0]}=={CMAKE_WHEEL[1]} wheel has no cmake/data/bin/cmake")
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, plain_split_13: Callable[..., Path]) -> Path:
    base = tmp_path_factory.mktemp("cmake-toolkit")
    splits = [plain_split_13(pname)  # shared with the cross and nvcc tests
              for pname in ("cuda_cccl", "cuda_crt", "libnvvm", "cuda_nvcc", "cuda_cudart")]
    splits.append(plain_split_13("cuda_cudart", "linux-sbsa"))
    toolkit_view(splits, base / "cuda")
    return base / "cuda"


def _configure_and_build(cmake: Path, root: Path, tmp_path: Path, *flags: str) -> str:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    if not generator and not shutil.which("make"):
        pytest.skip("neither ninja nor make installed")
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    (tmp_path / "prog.cu").write_text(PROGRAM)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CUDAToolkit_ROOT": str(root),
           "CUDACXX": str(root / "bin/nvcc")}
    configure = subprocess.run([str(cmake), "-S", str(tmp_path), "-B", str(tmp_path / "build"),
                                *generator, *flags], env=env, capture_output=True, text=True,
                               timeout=600, check=False)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    build = subprocess.run([str(cmake), "--build", str(tmp_path / "build")], env=env,
                           capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    return configure.stdout


def test_cmake_configures_and_builds_against_the_prefix(cmake: Path, root: Path,
                                                        tmp_path: Path) -> None:
    configured = _configure_and_build(cmake, root, tmp_path)
    assert f"cudasplit-toolkit: {root}/bin|{root}/targets/x86_64-linux/include" in configured
    run = subprocess.run([str(tmp_path / "build/prog")], capture_output=True, text=True,
                         timeout=60, check=False)
    # No GPU here: the runtime loads and says so; on a GPU the kernel squares 31.
    assert run.stdout.startswith(("no device:", "kernel: cudaSuccess 961")), run.stdout


def test_cmake_cross_compiles_for_sbsa(cmake: Path, root: Path, tmp_path: Path) -> None:
    """The same prefix, CMake cross-compiling: FindCUDAToolkit picks targets/sbsa-linux."""
    tools = {t: shutil.which(t) for t in ("aarch64-linux-gnu-g++", "aarch64-linux-gnu-gcc",
                                          "qemu-aarch64")}
    missing = [t for t, path in tools.items() if path is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (g++-aarch64-linux-gnu, qemu-user)")
    configured = _configure_and_build(
        cmake, root, tmp_path, "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
        "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
        "-DCMAKE_CUDA_HOST_COMPILER=aarch64-linux-gnu-g++")
    assert f"cudasplit-toolkit: {root}/bin|{root}/targets/sbsa-linux/include" in configured
    driver = build_stand_in("aarch64-linux-gnu-gcc", tmp_path / "driver").parent
    # CMake leaves the toolkit's lib dir out of RUNPATH (nvcc names it: an implicit dir).
    libs = f"{root}/targets/sbsa-linux/lib:{driver}"
    run = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", "-E",
                          f"LD_LIBRARY_PATH={libs}", str(tmp_path / "build/prog")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.stdout.strip() == "no device: cudaErrorNoDevice", run.stdout + run.stderr
