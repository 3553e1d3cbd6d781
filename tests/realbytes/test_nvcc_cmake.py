"""nvcc.profile after a split, read by a real CMake (PyPI ``cmake``) through a real nvcc 13.0
(PyPI wheels, tests/wheeltrees.py): FindCUDAToolkit runs ``nvcc -v`` and takes the *first*
``#$ INCLUDES=`` / ``#$ LIBRARIES=`` line, so cudasplit's extra directories must be in NVIDIA's
own assignments, not in lines after them (issue 27). Also: a --package-root that does not
exist warns, and is an error inside a Nix build.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_nix, split_to_dir
from cudasplit._split.rewrites import ProfileExtras, rewrite_nvcc_profile
from cudasplit.errors import OptionsError
from tests.realbytes.test_nvcc import cuda13_roots  # noqa: F401  (fixture)
from tests.support.realwheels import wheel_root

PROFILE_13 = """
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/$(_TARGET_DIR_)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""
ROOTS = {"include": "/n/inc", "lib": "/n/lib", "stubs": "/n/stubs", "nvvm": "/n", "bin": "/n",
         "cccl": "/c"}


def test_extras_go_into_the_first_assignments() -> None:
    extras = ProfileExtras(("/cudart/include", "/crt/include"), ("/cudart/lib",))
    text = rewrite_nvcc_profile(PROFILE_13, ROOTS, extras)
    here = "$(_HERE_)/../$(_TARGET_DIR_)"
    includes = re.findall(r"^INCLUDES\b.*$", text, re.M)
    libraries = re.findall(r"^LIBRARIES\b.*$", text, re.M)
    # INCLUDES: NVIDIA's line comes first (its kept target-dir copy prepends, so it ends the
    # file); LIBRARIES: the kept copy appends, so it precedes NVIDIA's line and is the first
    # assignment. Either way the extras join the first one, the one CMake reads.
    assert includes[0] == ('INCLUDES        +=  "-I/n/inc/include" "-I/cudart/include" '
                           '"-I/crt/include" $(_SPACE_)')
    assert includes[1:] == [f'INCLUDES        +=  "-I{here}/include" $(_SPACE_)']
    assert libraries[0].startswith(f'LIBRARIES        =+ $(_SPACE_) "-L{here}/lib')
    assert libraries[0].endswith('"-L/cudart/lib"')
    assert libraries[1] == 'LIBRARIES        =+ $(_SPACE_) "-L/n/stubs/lib/stubs" "-L/n/lib/lib"'
    assert "split-out packages nvcc needs" not in text


def test_a_profile_without_the_assignments_gets_new_lines() -> None:
    text = rewrite_nvcc_profile("TOP = $(_HERE_)/..\n", ROOTS,
                                ProfileExtras(("/cudart/include",), ()))
    assert text.endswith('INCLUDES        +=  "-I/cudart/include" $(_SPACE_)\n')


def _nvcc_tree(tmp_path: Path) -> Path:
    top = tmp_path / "cuda_nvcc-linux-x86_64-13.0.88-archive"
    (top / "bin").mkdir(parents=True)
    (top / "bin/nvcc.profile").write_text(PROFILE_13)
    (top / "LICENSE").write_text("license\n")
    return top


def test_a_package_root_that_does_not_exist_warns(tmp_path: Path) -> None:
    roots = (("cuda_cudart", str(tmp_path / "nowhere")), ("cuda_crt", str(tmp_path)),
             ("cuda_cccl", str(tmp_path / "gone")))
    report = split_to_dir(_nvcc_tree(tmp_path), tmp_path / "split",
                          SplitOptions(package_roots=roots, patch=False))
    missing = [w.message for w in report.warnings if w.code == "package-root-missing"]
    assert any("cuda_cudart" in m and "does not exist" in m for m in missing), missing
    assert any("cccl root" in m for m in missing), missing
    incomplete = [w.message for w in report.warnings if w.code == "package-root-incomplete"]
    assert any(f"{tmp_path}/include" in m for m in incomplete), incomplete  # crt: no include/


def test_a_package_root_that_does_not_exist_fails_a_nix_build(tmp_path: Path) -> None:
    env = {"outputs": "out", "out": str(tmp_path / "out")}
    options = SplitOptions(package_roots=(("cuda_cudart", str(tmp_path / "nowhere")),),
                           patch=False)
    with pytest.raises(OptionsError, match=r"package_roots cuda_cudart=.*nowhere: no such"):
        split_nix(_nvcc_tree(tmp_path), env, options)
    assert not (tmp_path / "out").exists()


def _cmake() -> str | None:
    """CMake >= 4.3 from its PyPI wheel (cached like NVIDIA's): older CMakes read nvcc.profile
    differently, and the distribution's may be anything."""
    path = wheel_root("cmake", "4.4.5") / "cmake" / "data" / "bin" / "cmake"
    return str(path) if path.is_file() else None


CMAKELISTS = """cmake_minimum_required(VERSION 3.24)
project(probe LANGUAGES NONE)
find_package(CUDAToolkit REQUIRED)
message(STATUS "PROBE_INCLUDES=${CUDAToolkit_INCLUDE_DIRS}")
message(STATUS "PROBE_CUDART=${CUDA_cudart_LIBRARY}")
message(STATUS "PROBE_VERSION=${CUDAToolkit_VERSION}")
"""


def _configure(cmake: str, nvcc_bin: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir(parents=True, exist_ok=True)
    (src / "CMakeLists.txt").write_text(CMAKELISTS)
    env = {"PATH": f"{nvcc_bin}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run([cmake, "-S", str(src), "-B", str(build),
                           f"-DCUDAToolkit_NVCC_EXECUTABLE={nvcc_bin / 'nvcc'}"],
                          env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.slow
def test_find_cuda_toolkit_sees_the_split_cudart(cuda13_roots: dict[str, Path],  # noqa: F811
                                                 tmp_path: Path) -> None:
    cmake = _cmake()
    if cmake is None:
        pytest.skip("no cmake (pip install cmake)")
    nvcc_out = cuda13_roots["cuda_nvcc"] / "out"
    cudart = cuda13_roots["cuda_cudart"] / "out"
    done = _configure(cmake, nvcc_out / "bin", tmp_path / "merged")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    includes = re.search(r"PROBE_INCLUDES=(.*)", done.stdout)
    crt = cuda13_roots["cuda_crt"] / "out"
    assert includes is not None, done.stdout
    assert {f"{cudart}/include", f"{crt}/include"} <= set(includes[1].split(";")), done.stdout
    assert f"PROBE_CUDART={cudart}/lib/libcudart.so" in done.stdout, done.stdout
    # The layout before the fix: the same directories in a second assignment after NVIDIA's.
    # FindCUDAToolkit reads the first one only and does not find the runtime at all.
    late = tmp_path / "late"
    shutil.copytree(nvcc_out, late, symlinks=True)
    profile = late / "bin/nvcc.profile"
    text = profile.read_text()
    extra = re.search(r'^INCLUDES.*?(( "-I[^"]+")+) \$\(_SPACE_\)$', text, re.M)
    assert extra is not None
    text = text.replace(extra[1], "", 1)
    profile.write_text(text + f"\nINCLUDES        +={extra[1]} $(_SPACE_)\n")
    late_run = _configure(cmake, late / "bin", tmp_path / "appended")
    late_includes = re.search(r"PROBE_INCLUDES=(.*)", late_run.stdout)
    assert late_includes is not None, late_run.stdout + late_run.stderr
    assert f"{cudart}/include" not in late_includes[1].split(";"), late_run.stdout
