"""Issue 25 on real bytes: one toolkit prefix from split wheels, native and x86_64 -> sbsa.

NVIDIA's x86_64 nvcc 13.0 (+ libnvvm, cuda_crt, cuda_cccl) and cuda_cudart for both
linux-x86_64 and linux-sbsa (the aarch64 ``nvidia-cuda-runtime`` wheel laid out as a
``cuda_cudart-linux-sbsa-...`` tarball) are split plainly, each cudart with a driver link
that holds a stand-in ``libcuda.so.1`` built here (it has no device; never NVIDIA's driver).
``cudasplit toolkit`` joins them; the one nvcc then builds an AArch64 program with
``-ccbin aarch64-linux-gnu-g++`` that, under ``qemu-aarch64``, loads the split libcudart, reaches
the stand-in through the driver link in its RUNPATH and ends with cudaErrorNoDevice (100), and
an x86_64 program without ``-ccbin`` that does the same natively.

Tools: ``aarch64-linux-gnu-g++`` (Debian ``g++-aarch64-linux-gnu``) and ``qemu-aarch64``
(``qemu-user``); each test that needs one skips, naming it, where it is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudasplit import SplitOptions, runpath_policy, split_to_dir
from cudasplit._elf.read import EM_AARCH64, EM_X86_64, elf_machine
from cudasplit.outputs import toolkit_view
from tests.support.standin import build_stand_in
from tests.support.wheeltrees import WHEELS_13, redist_tarball

CROSS_CXX = "aarch64-linux-gnu-g++"
CROSS_CC = "aarch64-linux-gnu-gcc"
SYSROOT = Path("/usr/aarch64-linux-gnu")
ENV = {"PATH": "/usr/bin:/bin"}

PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda/std/cstdint>  // CCCL: from targets/<dir>/include/cccl
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
int main() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    std::printf("%s %d\n", cudaGetErrorName(err), (int)err);
    return 0;
}
"""


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed (Debian: g++-aarch64-linux-gnu, qemu-user)")
    return path


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory,
           plain_split_13: Callable[..., Path]) -> dict[str, Path]:
    """Plain splits of each package and the toolkit prefix over them."""
    base = tmp_path_factory.mktemp("cross")
    dirs: dict[str, Path] = {}
    for pname in ("cuda_cccl", "cuda_crt", "libnvvm", "cuda_nvcc"):
        dirs[pname] = plain_split_13(pname)  # shared with the CMake and nvcc tests
    for platform in ("linux-x86_64", "linux-sbsa"):
        link = dirs[f"driver-{platform}"] = base / f"driver-{platform}"
        dirs[f"cuda_cudart-{platform}"] = base / f"cuda_cudart-{platform}"
        split_to_dir(redist_tarball("cuda_cudart", WHEELS_13["cuda_cudart"], platform=platform),
                     dirs[f"cuda_cudart-{platform}"],
                     SplitOptions(runpath=runpath_policy(driver_link=str(link))))
    splits = [d for name, d in dirs.items() if not name.startswith("driver")]
    dirs["root"] = base / "cuda"
    toolkit_view(splits, dirs["root"])
    return dirs


def _nvcc(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(root / "bin/nvcc"), *args], env=ENV, cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300)


def test_prefix_holds_both_targets(prefix: dict[str, Path]) -> None:
    root = prefix["root"]
    assert elf_machine(root / "targets/sbsa-linux/lib/libcudart.so.13") == EM_AARCH64
    assert elf_machine(root / "targets/x86_64-linux/lib/libcudart.so.13") == EM_X86_64
    assert elf_machine(root / "nvvm/bin/cicc") == EM_X86_64
    for target in ("sbsa-linux", "x86_64-linux"):
        assert (root / f"targets/{target}/include/crt/host_config.h").is_file()
        assert (root / f"targets/{target}/include/cccl/cuda/std/cstdint").is_file()


def test_nvcc_picks_the_target_dir_from_ccbin(prefix: dict[str, Path], tmp_path: Path) -> None:
    _need(CROSS_CXX)
    source = tmp_path / "prog.cu"
    source.write_text(PROGRAM)
    cross = _nvcc(prefix["root"], "-dryrun", "-ccbin", CROSS_CXX, "-c", str(source),
                  cwd=tmp_path)
    assert "_TARGET_DIR_=targets/sbsa-linux" in cross.stderr, cross.stderr
    native = _nvcc(prefix["root"], "-dryrun", "-c", str(source), cwd=tmp_path)
    assert "_TARGET_DIR_=targets/x86_64-linux" in native.stderr, native.stderr
    assert f"-I{prefix['root']}/bin/../targets/sbsa-linux/include" in cross.stderr


def _build(prefix: dict[str, Path], tmp_path: Path, *ccbin: str) -> Path:
    source, exe = tmp_path / "prog.cu", tmp_path / "prog"
    source.write_text(PROGRAM)
    target = "sbsa-linux" if ccbin else "x86_64-linux"
    lib = prefix["root"] / "targets" / target / "lib"
    done = _nvcc(prefix["root"], *ccbin, "-arch=sm_90", "--cudart=shared",
                 f"-Xlinker=-rpath={lib}", "-o", str(exe), str(source), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return exe


def test_cross_compiled_program_runs_under_qemu(prefix: dict[str, Path], tmp_path: Path) -> None:
    _need(CROSS_CXX)
    qemu = _need("qemu-aarch64")
    build_stand_in(_need(CROSS_CC), prefix["driver-linux-sbsa"] / "lib")
    exe = _build(prefix, tmp_path, "-ccbin", CROSS_CXX)
    assert elf_machine(exe) == EM_AARCH64
    # libcudart -> libcuda.so.1 through the split cudart's RUNPATH (the driver link) alone
    run = subprocess.run([qemu, "-L", str(SYSROOT), str(exe)], capture_output=True, text=True,
                         env=ENV, timeout=120, check=False)
    assert run.stdout.strip() == "cudaErrorNoDevice 100", run.stderr


def test_same_nvcc_without_ccbin_builds_for_x86_64(prefix: dict[str, Path],
                                                  tmp_path: Path) -> None:
    build_stand_in(_need("gcc"), prefix["driver-linux-x86_64"] / "lib")
    exe = _build(prefix, tmp_path)
    assert elf_machine(exe) == EM_X86_64
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=ENV, timeout=60,
                         check=False)
    assert run.stdout.strip() == "cudaErrorNoDevice 100", run.stderr


def test_sbsa_target_with_an_x86_64_cudart_root_fails(prefix: dict[str, Path],
                                                      tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cudasplit.cli import main
    x86 = prefix["cuda_cudart-linux-x86_64"]
    result = CliRunner().invoke(main, [
        "split", str(redist_tarball("cuda_nvcc", WHEELS_13["cuda_nvcc"])),
        "-o", str(tmp_path / "nvcc"), "--target-platform", "linux-sbsa",
        "--package-root", f"cuda_cudart={x86 / 'out'}"])  # cudart is one output, as in Nixpkgs
    assert result.exit_code == 2
    assert "libcudart.so.13.0.96 is x86-64, but the target platform linux-sbsa needs " \
        "AArch64" in result.stderr
    assert not (tmp_path / "nvcc").exists()


# -- --nix on a cross build: a cross gcc's libstdc++ lives in <cc.lib>/<config>/lib -----------


def _cross_nix_env(tmp_path: Path, cc_lib: Path, store: str) -> dict[str, str]:
    loader = SYSROOT / "lib/ld-linux-aarch64.so.1"
    if not (SYSROOT / "lib/libstdc++.so.6").is_file() or not loader.is_file():
        pytest.skip(f"no aarch64 libstdc++/loader in {SYSROOT} (g++-aarch64-linux-gnu)")
    cc = tmp_path / "cc-wrapper"
    (cc / "nix-support").mkdir(parents=True, exist_ok=True)
    (cc / "nix-support/dynamic-linker").write_text(f"{loader}\n")
    outs = {o: str(tmp_path / store / o) for o in ("out", "lib", "include", "static")}
    return {"outputs": " ".join(outs), **outs, "NIX_CC": str(cc), "buildInputs": str(cc_lib)}


def test_nix_split_finds_a_cross_gccs_libstdcxx(tmp_path: Path) -> None:
    """The sbsa libcudart NEEDs libstdc++.so.6: a cross gcc's cc.lib has it only in
    aarch64-unknown-linux-gnu/lib (nixpkgs#242050); --nix searches there too."""
    from cudasplit import ProblemsFound, split_nix

    cc_lib = tmp_path / "gcc-lib"
    (cc_lib / "lib").mkdir(parents=True)
    tarball = redist_tarball("cuda_cudart", WHEELS_13["cuda_cudart"], platform="linux-sbsa")
    with pytest.raises(ProblemsFound, match=r"libstdc\+\+\.so\.6"):
        split_nix(tarball, _cross_nix_env(tmp_path, cc_lib, "first"))  # <cc.lib>/lib alone
    config_lib = cc_lib / "aarch64-unknown-linux-gnu/lib"
    config_lib.mkdir(parents=True)
    for name in ("libstdc++.so.6", "libgcc_s.so.1"):
        shutil.copy2(SYSROOT / "lib" / name, config_lib / name)
    report = split_nix(tarball, _cross_nix_env(tmp_path, cc_lib, "second"))
    record = report.member("lib/libcudart.so.13.0.96")
    assert str(config_lib) in (record.runpath_after or ""), record


def test_split_profile_keeps_target_dir_through_a_plain_join(prefix: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """Without `cudasplit toolkit`: the split nvcc's own (rewritten) profile, linked into a
    plain symlink join that has targets/, still lets -ccbin choose the target's directory."""
    _need(CROSS_CXX)
    join = tmp_path / "join"
    (join / "bin").mkdir(parents=True)
    split_bin = prefix["cuda_nvcc"] / "out/bin"
    for name in ("nvcc", "nvcc.profile"):
        (join / "bin" / name).symlink_to(split_bin / name)
    (join / "targets").symlink_to(prefix["root"] / "targets")
    source = tmp_path / "prog.cu"
    source.write_text(PROGRAM)
    done = _nvcc(join, "-dryrun", "-ccbin", CROSS_CXX, "-c", str(source), cwd=tmp_path)
    # each profile line prints the variable's value so far: the last one is what nvcc uses
    includes = [line for line in done.stderr.splitlines()
                if "INCLUDES=" in line and "SYSTEM" not in line][-1]
    ours = f"-I{join}/bin/../targets/sbsa-linux/include"
    assert ours in includes, includes
    assert includes.index(ours) < includes.index(f"-I{prefix['cuda_nvcc']}/out/include")
    libraries = [line for line in done.stderr.splitlines() if "LIBRARIES=" in line][-1]
    lib = f"-L{join}/bin/../targets/sbsa-linux/lib"
    assert lib in libraries and libraries.index(lib) < libraries.index(
        f"-L{prefix['cuda_nvcc']}/out/lib")
