"""Acceptance with a real conda client: the conda-forge profile's channel, from NVIDIA's 13.0
wheels laid out as redist archives, installed by py-rattler into fresh prefixes.

* ``cuda-nvcc cuda-cudart-dev libcublas-dev``: nvcc compiles and links a program against
  cudart and cuBLAS, ``ld.so --list`` finds the CUDA libraries in the prefix, and CMake's
  ``find_package(CUDAToolkit)`` finds the toolkit there;
* ``cuda-nvcc`` beside the sbsa ``*_linux-aarch64`` packages: the x86_64 nvcc builds an
  AArch64 program that qemu runs to ``cudaErrorNoDevice`` (a stand-in libcuda, no device);
* every package holds exactly what its feedstock recipe's ``files:`` select from the same
  archive, its links saying what conda-build leaves them saying (our model of the recipes,
  tests/conda/feedstock.py), and every library has the DT_RPATH ``$ORIGIN`` conda-forge's rpath
  test asks for;
* the environment, activated as a conda client activates it (py-rattler's activation script,
  which sources cuda-nvcc_linux-64's scripts), builds the feedstock's own tests: the host
  compiler with ``-lcuda -lcudart_static``, and nvcc; without activation the first fails, and
  deactivation gives the variables back;
* every arch-specific package pins ``__glibc`` at least at the highest ``GLIBC_`` version any
  ELF file it installs needs, as ``readelf`` lists them (cuBLAS: 2.27 measured in
  libcublasLt, pinned at the feedstock's 2.28).

Tools: gcc/g++ (nvcc's host compiler), ``aarch64-linux-gnu-g++`` and ``qemu-aarch64`` for the
cross test, the CMake wheel (tests/support/realwheels.py); each test that needs one skips,
naming it, where it is missing.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from cudasplit._release.conda import conda_profile, outputs_for
from cudasplit._rulebook import default_rules_dir
from tests.conda.client import install
from tests.conda.feedstock import Member, install_prefix, packaged, select
from tests.conda.redist import RealChannel
from tests.support.builders import dynamic_entries
from tests.support.realwheels import wheel_root
from tests.support.standin import build_stand_in

pytestmark = [pytest.mark.realbytes, pytest.mark.slow]

ENV = {"PATH": "/usr/bin:/bin"}
# find_package(CUDAToolkit) in a conda prefix (headers only below targets/<triple>/include)
# needs CMake 3.28 or newer: 3.28.1 (the oldest 3.28 on PyPI) and 4.4.5 find it, 3.27.9 does not
# ("Unable to find cuda_runtime.h in <prefix>/include"); docs/howto/conda-forge.md says so.
CMAKE_VERSIONS = ("4.4.5", "3.28.1")
CMAKE_TOO_OLD = "3.27.9"

PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cuda/std/cstdint>  // CCCL, from targets/<triple>/include/cccl
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
int main() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    cublasHandle_t handle;
    cublasStatus_t status = cublasCreate(&handle);
    std::printf("%s %d %s\n", cudaGetErrorName(err), (int)err, cublasGetStatusName(status));
    return 0;
}
"""

CROSS_PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda/std/cstdint>
__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
int main() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    std::printf("%s %d\n", cudaGetErrorName(err), (int)err);
    return 0;
}
"""

CMAKELISTS = """
cmake_minimum_required(VERSION 3.24)
project(x LANGUAGES CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_executable(prog prog.cu)
target_link_libraries(prog PRIVATE CUDA::cudart CUDA::cublas)
set_target_properties(prog PROPERTIES CUDA_ARCHITECTURES 90)
message(STATUS "found: ${CUDAToolkit_BIN_DIR}|${CUDAToolkit_INCLUDE_DIRS}|${CUDA_cublas_LIBRARY}|${CUDAToolkit_VERSION}")
"""


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed (Debian: g++, g++-aarch64-linux-gnu, qemu-user)")
    return path


@pytest.fixture(scope="module")
def toolkit(real_channel: RealChannel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cuda-nvcc cuda-cudart-dev libcublas-dev`` (and cuda-cupti-dev, for the rpath check)."""
    prefix = tmp_path_factory.mktemp("toolkit") / "prefix"
    asyncio.run(install(real_channel.path, ["cuda-nvcc", "cuda-cudart-dev", "libcublas-dev",
                                            "cuda-cupti-dev"], prefix, real_channel.cache))
    return prefix


def _nvcc(prefix: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(prefix / "bin/nvcc"), *args], env=ENV, cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=300)


def test_nvcc_links_cudart_and_cublas_from_the_prefix(toolkit: Path, tmp_path: Path) -> None:
    _need("g++")
    (tmp_path / "prog.cu").write_text(PROGRAM)
    built = _nvcc(toolkit, "-arch=sm_90", "--cudart=shared", "-lcublas",
                  f"-Xlinker=-rpath={toolkit}/lib", "-o", "prog", "prog.cu", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    listed = subprocess.run([_loader(), "--list", str(tmp_path / "prog")], capture_output=True,
                            text=True, check=True, env=ENV).stdout
    assert "not found" not in listed, listed
    for name in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"):
        assert f"{name} => {toolkit}/lib/{name}" in listed, listed
    driver = build_stand_in(_need("gcc"), tmp_path / "driver").parent
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60,
                         env={**ENV, "LD_LIBRARY_PATH": str(driver)}, check=False)
    assert run.stdout.split()[:2] == ["cudaErrorNoDevice", "100"], run.stdout + run.stderr


def _loader() -> str:
    for path in ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"):
        if Path(path).exists():
            return path
    pytest.skip("no x86_64 loader to run --list with")


# The feedstock's host-compiler test, in our words: it includes the runtime's header and CCCL's
# Thrust (targets/<triple>/include/cccl) and links the driver stub and the static runtime.
HOST_TEST = """#include <cuda_runtime.h>
#include <thrust/version.h>
int main() { return THRUST_MAJOR_VERSION > 0 ? 0 : 1; }
"""
HOST_BUILD = "g++ -std=c++17 $CXXFLAGS test.cpp $LDFLAGS -lcuda -lcudart_static -o host"
NVCC_BUILD = "nvcc test.cu -o device"
FLAGS = ("CFLAGS", "CPPFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_PREPEND_FLAGS")


def test_the_activated_environment_builds_the_feedstocks_tests(toolkit: Path,
                                                               tmp_path: Path) -> None:
    _need("g++")
    from rattler.shell import ActivationVariables, Shell, activate

    (tmp_path / "test.cpp").write_text(HOST_TEST)
    (tmp_path / "test.cu").write_text("int main() { return 0; }\n")
    env = {**ENV, "CXX": "g++", "CFLAGS": "-O1", "HOME": str(tmp_path)}
    before = subprocess.run(["bash", "-c", HOST_BUILD], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=False)
    assert before.returncode != 0 and "cuda_runtime.h" in before.stderr, before.stderr
    on = activate(toolkit, ActivationVariables(None, ["/usr/bin", "/bin"]), Shell.bash).script
    assert "~cuda-nvcc_activate.sh" in on
    empty = tmp_path / "empty"
    (empty / "conda-meta").mkdir(parents=True)
    off = activate(empty, ActivationVariables(toolkit, [f"{toolkit}/bin", "/usr/bin", "/bin"]),
                   Shell.bash).script
    assert "~cuda-nvcc_deactivate.sh" in off
    show = "; ".join(f'echo "{n}=${{{n}-<unset>}}"' for n in FLAGS)
    script = f"set -e\n{on}\n{HOST_BUILD}\n{NVCC_BUILD}\n{show}\n{off}\n{show}\n"
    built = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                           text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    lines = built.stdout.splitlines()
    active, restored = lines[-2 * len(FLAGS):-len(FLAGS)], lines[-len(FLAGS):]
    assert "NVCC_PREPEND_FLAGS=-ccbin=g++" in active
    assert f"LDFLAGS=-L{toolkit}/targets/x86_64-linux/lib " \
           f"-L{toolkit}/targets/x86_64-linux/lib/stubs" in active
    assert restored == ["CFLAGS=-O1", *(f"{n}=<unset>" for n in FLAGS[1:])]
    assert (tmp_path / "host").is_file() and (tmp_path / "device").is_file()


def _readelf_floor(path: Path) -> tuple[int, ...]:
    listing = subprocess.run(["readelf", "-V", "-W", str(path)], capture_output=True,
                             text=True, check=True, env=ENV).stdout
    versions = re.findall(r"Name: GLIBC_(\d+(?:\.\d+)+)", listing)
    return max((tuple(map(int, v.split("."))) for v in versions), default=())


def test_every_glibc_pin_is_at_least_what_the_installed_files_need(toolkit: Path) -> None:
    """Independent of cudasplit's reader: every ELF file an arch-specific package installs
    (links followed into the packages they point at), measured with ``readelf -V``."""
    _need("readelf")
    pins: dict[str, tuple[int, ...]] = {}
    checked = 0
    for record in sorted((toolkit / "conda-meta").glob("*.json")):
        meta = json.loads(record.read_text())
        glibc = [d for d in meta["depends"] if d.startswith("__glibc ")]
        if meta.get("noarch"):
            assert glibc == [], meta["name"]
            continue
        floor: tuple[int, ...] = ()
        for path in meta["files"]:
            real = (toolkit / path).resolve()
            if real.is_file() and real.read_bytes()[:4] == b"\x7fELF":
                floor = max(floor, _readelf_floor(real))
        if not floor and not glibc:
            continue
        match = re.fullmatch(r"__glibc >=(\d+(?:\.\d+)+),<3\.0\.a0", glibc[0] if glibc else "")
        assert match is not None, (meta["name"], glibc, floor)
        pins[meta["name"]] = pinned = tuple(map(int, match[1].split(".")))
        assert pinned >= floor, (meta["name"], pinned, floor)
        checked += floor != ()
    assert checked >= 8, pins
    # cuBLAS: libcublasLt needs GLIBC_2.27; the feedstock builds with c_stdlib_version 2.28
    assert _readelf_floor(toolkit / "lib/libcublasLt.so.13") == (2, 27)
    assert {n: pins[n] for n in ("libcublas", "libcublas-dev")} == dict.fromkeys(
        ("libcublas", "libcublas-dev"), (2, 28))


def test_the_splits_inventory_measures_the_floor_the_pin_uses(real_channel: RealChannel) -> None:
    """The split's own inventory (the report) measures libcublasLt at GLIBC_2.27, the number
    the packer pins from (raised to the feedstock's 2.28)."""
    report = real_channel.reports[("libcublas", "linux-x86_64")]
    rows = {row["prefix"]: row for row in report.glibc_floor()}
    assert rows["GLIBC"]["version"] == "2.27" and "libcublasLt" in str(rows["GLIBC"]["path"])


def _cmake(version: str) -> tuple[Path, list[str]]:
    """CMake ``version`` from its PyPI wheel, and the generator to use."""
    cmake = wheel_root("cmake", version) / "cmake" / "data" / "bin" / "cmake"
    if not cmake.is_file():
        pytest.skip(f"the cmake=={version} wheel has no cmake/data/bin/cmake")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    if not generator and not shutil.which("make"):
        pytest.skip("neither ninja nor make installed")
    return cmake, generator


def _configure(cmake: Path, generator: list[str], toolkit: Path,
               tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    (tmp_path / "CMakeLists.txt").write_text(CMAKELISTS)
    (tmp_path / "prog.cu").write_text(PROGRAM)
    # as in an activated environment: the prefix's bin on PATH, nothing else said
    env = {"PATH": f"{toolkit}/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    configure = subprocess.run([str(cmake), "-S", str(tmp_path), "-B", str(tmp_path / "build"),
                                *generator], env=env, capture_output=True, text=True,
                               timeout=600, check=False)
    return configure, env


def test_cmake_before_3_28_does_not_find_the_toolkit(toolkit: Path, tmp_path: Path) -> None:
    configure, _env = _configure(*_cmake(CMAKE_TOO_OLD), toolkit, tmp_path)
    assert configure.returncode != 0
    assert f"Unable to find cuda_runtime.h in \"{toolkit}/include\"" in configure.stdout


@pytest.mark.parametrize("version", CMAKE_VERSIONS)
def test_cmake_finds_the_toolkit_in_the_prefix(toolkit: Path, tmp_path: Path,
                                               version: str) -> None:
    cmake, generator = _cmake(version)
    configure, env = _configure(cmake, generator, toolkit, tmp_path)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    found = next(line for line in configure.stdout.splitlines() if "found: " in line)
    bin_dir, includes, cublas, nvcc_version = found.split("found: ", 1)[1].split("|")
    assert bin_dir == f"{toolkit}/bin" and nvcc_version == "13.0.88"
    assert f"{toolkit}/targets/x86_64-linux/include" in includes.split(";")
    assert Path(cublas).resolve() == (toolkit / "targets/x86_64-linux/lib"
                                      / "libcublas.so.13.1.1.3")
    build = subprocess.run([str(cmake), "--build", str(tmp_path / "build")], env=env,
                           capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stdout + build.stderr


def test_sbsa_packages_beside_x86_64_nvcc_build_an_aarch64_program(
        real_channel: RealChannel, tmp_path: Path) -> None:
    cross, qemu = _need("aarch64-linux-gnu-g++"), _need("qemu-aarch64")
    asyncio.run(install(real_channel.path, ["cuda-nvcc", "cuda-nvcc-dev_linux-aarch64",
                                            "cuda-cudart-dev_linux-aarch64"],
                        tmp_path / "prefix", real_channel.cache))
    prefix = tmp_path / "prefix"
    (tmp_path / "prog.cu").write_text(CROSS_PROGRAM)
    lib = prefix / "targets/sbsa-linux/lib"
    built = _nvcc(prefix, "-ccbin", cross, "-arch=sm_90", "--cudart=shared",
                  f"-Xlinker=-rpath={lib}", "-o", "prog", "prog.cu", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    driver = build_stand_in(_need("aarch64-linux-gnu-gcc"), tmp_path / "driver").parent
    run = subprocess.run([qemu, "-L", "/usr/aarch64-linux-gnu", "-E",
                          f"LD_LIBRARY_PATH={driver}", str(tmp_path / "prog")],
                         capture_output=True, text=True, timeout=120, check=False, env=ENV)
    assert run.stdout.strip() == "cudaErrorNoDevice 100", run.stdout + run.stderr


# -- what the packages hold ------------------------------------------------------------------


def _component(package: Path, prefix: str) -> tarfile.TarFile:
    with zipfile.ZipFile(package) as zf:
        name = next(n for n in zf.namelist() if n.startswith(prefix))
        with zf.open(name) as raw:
            data = zstandard.ZstdDecompressor().stream_reader(raw).read()
    return tarfile.open(fileobj=io.BytesIO(data))


def _paths(package: Path) -> set[str]:
    with _component(package, "info-") as tar:
        member = tar.extractfile("info/paths.json")
        assert member is not None
        return {p["_path"] for p in json.load(member)["paths"]}


def _contents(package: Path) -> dict[str, str | None]:
    """The package's payload: path -> link text (``None``: a file)."""
    with _component(package, "pkg-") as tar:
        return {m.name: m.linkname if m.issym() else None for m in tar if not m.isdir()}


def test_file_lists_and_link_targets_equal_what_the_recipes_make(
        real_channel: RealChannel, tmp_path: Path) -> None:
    """Every package holds exactly the paths its recipe's ``files:`` select from the prefix
    the feedstock's build.sh fills, and each link says what conda-build leaves it saying: for
    cuda_cudart, the nvcc-impl set and libcublas (and the others of the channel), equal."""
    rules = default_rules_dir()
    checked = links = 0
    for (pname, platform), report in real_channel.reports.items():
        if (pname, platform) in real_channel.reduced and pname == "cuda_nvcc":
            continue  # without bin/nvcc, build.sh's targets/<triple>/bin/nvcc would dangle
        members = [Member(r.path, r.link if r.kind == "symlink" else None)
                   for r in report.members if r.kind not in ("dir", "hardlink")]
        prefix = tmp_path / f"{pname}-{platform}"
        install_prefix(pname, members, platform, prefix)
        profile = conda_profile(rules, "conda-forge", platform)
        packages = {p.name.rsplit("-", 2)[0]: p for p in real_channel.packages[(pname, platform)]}
        for output in outputs_for(profile.recipes, pname, platform):
            if output.redist == ("*",):
                continue
            package = packages[output.name]
            expected = packaged(prefix, select(prefix, output.files))
            expected.update(dict.fromkeys((dest for dest, _text in output.scripts), None))
            assert _paths(package) == set(expected), (pname, platform, output.name)
            assert _contents(package) == expected, (pname, platform, output.name)
            checked += 1
            links += sum(text is not None for text in expected.values())
    assert checked >= 40 and links >= 30, (checked, links)


def test_every_library_has_dt_rpath_origin(toolkit: Path) -> None:
    """conda-forge's test-rpath.sh over the installed prefix: every shared library (stubs
    aside) says exactly $ORIGIN, as DT_RPATH (their test fails on RUNPATH)."""
    libraries = [p for d in ("targets/x86_64-linux/lib", "nvvm/lib64")
                 for p in (toolkit / d).iterdir()
                 if ".so" in p.name and p.is_file() and not p.is_symlink()]
    for library in libraries:
        entries = dynamic_entries(library)
        assert entries.get("RPATH") == ["$ORIGIN"] and "RUNPATH" not in entries, \
            (library, entries)
    names = {p.name for p in libraries}
    assert {"libcudart.so.13.0.96", "libcublasLt.so.13.1.1.3", "libnvvm.so.4",
            "libnvperf_host.so"} <= names, names


def test_compiler_binaries_get_their_fixed_lists(toolkit: Path) -> None:
    """The nvcc-impl recipe's lists: bin/ and nvvm/bin/ find lib/ and targets/<triple>/lib."""
    tools = "$ORIGIN/../lib:$ORIGIN/../targets/x86_64-linux/lib"
    for name in ("nvcc", "ptxas", "nvlink", "fatbinary", "cudafe++", "bin2c"):
        assert dynamic_entries(toolkit / "bin" / name).get("RPATH") == [tools], name
    cicc = "$ORIGIN/../lib64:$ORIGIN/../../lib:$ORIGIN/../../targets/x86_64-linux/lib"
    assert dynamic_entries(toolkit / "nvvm/bin/cicc").get("RPATH") == [cicc]
