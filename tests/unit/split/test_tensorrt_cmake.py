"""TensorRT >= 11.2.1's CMake package files and the Windows libraries, as Nixpkgs' tensorrt.nix:
``cmake/`` moved to ``lib/cmake/TensorRT-Enterprise`` (dev), ``${_IMPORT_PREFIX}`` uses pointed
at the outputs, the Windows import checks deleted; ``*_win*`` kept on 10.2 only.

The CMake files are written for this test in the shape CMake's ``install(EXPORT)`` generates
(no TensorRT 11.2.1 archive is at hand)."""

from __future__ import annotations

from pathlib import Path

from cudasplit import SplitOptions, split_to_dir
from tests.support.tarutil import write_archive

TARGETS = """\
get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_FILE}" PATH)
get_filename_component(_IMPORT_PREFIX "${_IMPORT_PREFIX}" PATH)
add_library(TRT::nvinfer SHARED IMPORTED)
set_target_properties(TRT::nvinfer PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_IMPORT_PREFIX}/include"
)
"""
TARGETS_RELEASE = """\
set_target_properties(TRT::nvinfer PROPERTIES
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/lib/libnvinfer.so.11.2.1"
  )
list(APPEND _cmake_import_check_targets TRT::nvinfer )
list(APPEND _cmake_import_check_files_for_TRT::nvinfer "${_IMPORT_PREFIX}/lib/libnvinfer.so.11.2.1" )
set_target_properties(TRT::trtexec PROPERTIES
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/bin/trtexec"
  )
list(APPEND _cmake_import_check_targets TRT::nvinfer_builder_resource_win_x64 )
list(APPEND _cmake_import_check_files_for_TRT::nvinfer_builder_resource_win_x64 "${_IMPORT_PREFIX}/lib/libnvinfer_builder_resource_win.so.11.2.1" )
"""
LIB = "targets/x86_64-linux-gnu/lib"


def _split(tmp_path: Path, version: str, cmake: dict[str, str]) -> tuple[Path, list[str]]:
    entries = [("file", "LICENSE", b"license\n"),
               ("file", "include/NvInfer.h", b"#pragma once\n"),
               ("file", f"{LIB}/libnvinfer.so.{version}", b"not an ELF file\n"),
               ("file", f"{LIB}/libnvinfer_builder_resource_win.so.{version}", b"nor this\n"),
               ("symlink", "lib", LIB)]
    entries += [("file", f"cmake/{name}", text.encode()) for name, text in cmake.items()]
    tmp_path.mkdir(parents=True, exist_ok=True)
    archive = write_archive(tmp_path / "trt.tar.xz", entries,
                            top=f"tensorrt-linux-x86_64-{version}-archive")
    report = split_to_dir(archive, tmp_path / "split", SplitOptions(patch=False))
    return tmp_path / "split", [f"{p.code} {p.path}" for p in report.problems
                                if p.code.startswith("text-edit")]


def test_cmake_package_files_move_and_name_the_outputs(tmp_path: Path) -> None:
    split, problems = _split(tmp_path, "11.2.1.2", {
        "TensorRT-EnterpriseConfig.cmake": 'include("${CMAKE_CURRENT_LIST_DIR}/x.cmake")\n',
        "TensorRT-EnterpriseTargets.cmake": TARGETS,
        "TensorRT-EnterpriseTargets-release.cmake": TARGETS_RELEASE})
    assert problems == []
    assert not (split / "out/cmake").exists()
    cmake = split / "dev/lib/cmake/TensorRT-Enterprise"
    assert sorted(p.name for p in cmake.iterdir()) == [
        "TensorRT-EnterpriseConfig.cmake", "TensorRT-EnterpriseTargets-release.cmake",
        "TensorRT-EnterpriseTargets.cmake"]
    targets = (cmake / "TensorRT-EnterpriseTargets.cmake").read_text()
    assert f'INTERFACE_INCLUDE_DIRECTORIES "{split}/include/include"' in targets
    release = (cmake / "TensorRT-EnterpriseTargets-release.cmake").read_text()
    assert f'"{split}/lib/lib/libnvinfer.so.11.2.1"' in release
    assert f'"{split}/bin/bin/trtexec"' in release
    assert "_win" not in release and "${_IMPORT_PREFIX}/" not in release
    assert release.count("_cmake_import_check_") == 2
    assert not list((split / "lib/lib").glob("*_win*"))


def test_an_unexpected_import_prefix_use_is_a_problem(tmp_path: Path) -> None:
    _split_dir, problems = _split(tmp_path, "11.3.0.5", {
        "TensorRT-EnterpriseTargets.cmake": TARGETS + 'set(x "${_IMPORT_PREFIX}/share/x")\n'})
    assert problems == ["text-edit-leftover cmake/TensorRT-EnterpriseTargets.cmake"]


def test_windows_libraries_stay_on_10_2_only(tmp_path: Path) -> None:
    for version, kept in (("10.1.0.27", False), ("10.2.0.19", True), ("10.3.0.26", False)):
        split, _ = _split(tmp_path / version, version, {})
        assert bool(list((split / "lib/lib").glob("*_win*"))) is kept, version
