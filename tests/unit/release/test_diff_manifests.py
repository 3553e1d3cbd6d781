"""``diff`` of two manifests without tarballs (issue 27): packages added, removed and renamed
(cuda_cccl -> cccl at 13.3), versions and platforms, from NVIDIA's real manifests."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cudasplit.cli import main
from cudasplit.releases import diff_releases
from tests.support.paths import DATA

MANIFESTS = DATA / "manifests"
OLD, NEW = MANIFESTS / "redistrib_13.0.3.json", MANIFESTS / "redistrib_13.4.2.json"


def _pnames(path: Path) -> set[str]:
    return {k for k, v in json.loads(path.read_text()).items() if isinstance(v, dict)}


def test_13_0_to_13_4_names_the_cccl_rename_and_every_package_added_or_removed() -> None:
    result = diff_releases(OLD, NEW)
    [renamed] = result.of("package-renamed")
    assert (renamed.package, renamed.old.split()[0], renamed.new.split()[0]) == (
        "cuda_cccl", "cuda_cccl", "cccl")
    assert renamed.new == "cccl 13.3.4.3.1" and renamed.path == "CUDA 13.3"
    old, new = _pnames(OLD), _pnames(NEW)
    assert {c.package for c in result.of("package-removed")} == old - new - {"cuda_cccl"}
    assert {c.package for c in result.of("package-added")} == new - old - {"cccl"}
    # Facts of the two manifests (nixpkgs-today.md section 2), independently of the set maths.
    assert {"cuda_tileiras", "libcuobjclient", "cuda_compat_orin", "libcudla"} == \
        {c.package for c in result.of("package-added")}
    assert {"nvidia_driver", "fabricmanager", "cuda_nsight", "collectx_bringup"} <= \
        {c.package for c in result.of("package-removed")}
    assert ("libcublas", "windows-arm64") in {(c.package, c.path)
                                              for c in result.of("platform-added")}
    assert result.of("version")  # every remaining package moved on


def test_cli_text_and_exit_code() -> None:
    done = CliRunner().invoke(main, ["diff", str(OLD), str(NEW)])
    assert done.exit_code == 1, done.output
    lines = done.output.splitlines()
    assert "~ package renamed cuda_cccl 13.0.85 -> cccl 13.3.4.3.1 (CUDA 13.3)" in lines
    assert "- package nvidia_driver" in " ".join(lines)
    same = CliRunner().invoke(main, ["diff", str(NEW), str(NEW)])
    assert same.exit_code == 0 and "package" not in same.output.split("\n", 2)[-1]
