"""cuda_crt's text_edits on NVIDIA's real crt headers (PyPI wheels): every edit Nixpkgs'
cuda_crt/package.nix postInstall makes at a version (and cudasplit ships) finds its text there
(no ``text-edit-unmatched``), as its ``--replace-fail`` needs, and the result has Nixpkgs'
changes; no other header changes.

CUDA 12.9's headers come from the nvcc wheel (Nixpkgs cuts cuda_crt from the nvcc archive on
12.x), split both as cuda_crt and as cuda_nvcc (which takes cuda_crt's edits on 12.x:
``text_edits_from``); 13.x from ``nvidia-cuda-crt``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudasplit import PackageId, SplitOptions, split_to_dir
from tests.support.realwheels import wheel_root

HEADERS = ("math_functions.h", "math_functions.hpp", "host_defines.h")
WHEELS = {"12.9.86": ("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc"),
          "13.0.88": ("nvidia-cuda-crt", "nvidia/cu13"),
          "13.1.115": ("nvidia-cuda-crt", "nvidia/cu13"),
          "13.3.33": ("nvidia-cuda-crt", "nvidia/cu13"),
          "13.4.92": ("nvidia-cuda-crt", "nvidia/cu13")}


def _older(version: str, than: str) -> bool:
    return tuple(map(int, version.split(".")[:2])) < tuple(map(int, than.split(".")))


def _postinstall_noexcept(version: str, original: dict[str, str]) -> list[tuple[str, str]]:
    """(file, text) Nixpkgs' postInstall loop writes: its function list and argument spelling."""
    if not _older(version, "13.2"):
        return []
    names = ["rsqrt", "rsqrtf"] + (["sinpi", "sinpif", "cospi", "cospif"]
                                   if _older(version, "13.0") else [])
    found = []
    for name in names:
        type_ = "float" if name.endswith("f") else "double"
        argument = f"{type_} a"
        if name.startswith("rsqrt") or type_ == "float":
            argument = f"const {argument}"
        assert f"{name}({type_} x);" in original["math_functions.h"]
        found += [("math_functions.h", f"{name}({type_} x) noexcept (true);"),
                  ("math_functions.hpp", f"__func__({type_} {name}({argument}) throw())")]
    return found


@pytest.mark.parametrize(("version", "pname"), [*((v, "cuda_crt") for v in sorted(WHEELS)),
                                              ("12.9.86", "cuda_nvcc")])
def test_crt_edits_match_nvidias_headers(tmp_path: Path, version: str, pname: str) -> None:
    wheel, inner = WHEELS[version]
    crt = wheel_root(wheel, version) / inner / "include/crt"
    top = tmp_path / f"cuda_nvcc-linux-x86_64-{version}-archive"
    (top / "include/crt").mkdir(parents=True)
    for name in HEADERS:
        shutil.copy(crt / name, top / "include/crt" / name)
    report = split_to_dir(top, tmp_path / "split", SplitOptions(
        patch=False, package=PackageId(pname, "linux-x86_64", version), glibc_version="2.42"))
    assert [p.code for p in report.problems] == []
    original = {name: (crt / name).read_text() for name in HEADERS}
    got = {name: (tmp_path / "split/out/include/crt" / name).read_text() for name in HEADERS}

    for name, text in _postinstall_noexcept(version, original):
        assert text in got[name]
    clang = "defined(__CUDA_LIBDEVICE__)) && !defined(__clang__)"
    assert (clang in got["host_defines.h"]) == _older(version, "13.0")
    # Nothing else changed: undoing the edits' insertions gives NVIDIA's text back.
    for name in HEADERS:
        assert _undone(got[name]) == _undone(original[name]), name


def _undone(text: str) -> str:
    for new, old in ((" noexcept (true);", ";"), (" throw())", ")"),
                     ("#if (defined(__CUDACC__)", "#if defined(__CUDACC__)"),
                     ("defined(__CUDA_LIBDEVICE__)) && !defined(__clang__)",
                      "defined(__CUDA_LIBDEVICE__)")):
        text = text.replace(new, old)
    return text
