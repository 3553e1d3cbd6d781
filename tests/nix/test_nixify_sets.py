"""``nixify-sets``: one package set per CUDA release from NVIDIA's manifests alone, evaluated
with ``nix-instantiate --eval --strict`` against a stand-in for the Nixpkgs attributes
(tests/data/nix/sets-standin.nix), and compared with Nixpkgs 13.4's outputs table
(tests/data/nixpkgs-13.4-outputs.json) and library.nix edges (issue 27, item 8)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit import nixify_sets
from cudasplit.cli import main
from tests.support.paths import DATA

DATA = DATA
MANIFESTS = [DATA / "manifests" / n for n in (
    "redistrib_12.9.2.json", "redistrib_13.0.3.json", "redistrib_13.3.1.json",
    "redistrib_13.4.2.json", "cudnn_redistrib_9.27.0.json")]
NIXPKGS = {k: v for k, v in json.loads((DATA / "nixpkgs-13.4-outputs.json").read_text()).items()
           if not k.startswith("_")}
# Packages cudasplit has and Nixpkgs does not (docs/reference/packages-divergences.md).
ONLY_HERE = {"cuda_compat_orin", "cudnn_jit"}


@pytest.fixture(scope="module")
def sets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sets")
    nixify_sets(MANIFESTS, out)
    return out


def _eval(sets_dir: Path, set_name: str, system: str = "x86_64-linux", *,
          compat: bool = False, caps: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    if shutil.which("nix-instantiate") is None:
        pytest.skip("nix-instantiate not found (Debian: apt-get install nix-bin)")
    cmd = ["nix-instantiate", "--eval", "--strict", "--json",
           str(DATA / "nix" / "sets-standin.nix"), "--arg", "dir", str(sets_dir),
           "--argstr", "system", system, "--argstr", "setName", set_name,
           "--arg", "enableCompat", "true" if compat else "false",
           "--arg", "caps", "[ " + " ".join(f'"{c}"' for c in caps) + " ]"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


def test_one_set_per_cuda_release(sets_dir: Path) -> None:
    names = sorted(p.name for p in sets_dir.iterdir())
    assert names == ["cudaPackages_12_9.nix", "cudaPackages_13_0.nix", "cudaPackages_13_3.nix",
                     "cudaPackages_13_4.nix", "default.nix", "mk-redist.nix", "release.nix"]
    assert "cudnn_redistrib_9.27.0.json" in (sets_dir / "cudaPackages_12_9.nix").read_text()


@pytest.mark.parametrize("set_name", ["cudaPackages_12_9", "cudaPackages_13_0",
                                      "cudaPackages_13_3", "cudaPackages_13_4"])
def test_outputs_match_nixpkgs(sets_dir: Path, set_name: str) -> None:
    evaluated = _eval(sets_dir, set_name, compat=True)  # cuda_compat 13.3 is opt-in
    for pname, drv in evaluated.items():
        if pname in ONLY_HERE or any("no x86_64-linux archive" in p for p in drv["problems"]):
            continue  # documented extras; packages with no archive for this system
        assert pname in NIXPKGS, pname
        assert sorted(drv["outputs"]) == sorted(NIXPKGS[pname]), pname
        release = set_name.removeprefix("cudaPackages_").replace("_", ".")
        assert drv["name"] == f"cuda{release}-{pname}-{drv['version']}"
        assert {"outputs", "propagation", "libraries"} <= drv["tests"].keys()
        for output in drv["outputs"]:
            assert f"output {output} missing" in drv["tests"]["outputs"]


def test_propagation_edges_as_library_nix(sets_dir: Path) -> None:
    s134, s130, s129 = (_eval(sets_dir, f"cudaPackages_{v}") for v in ("13_4", "13_0", "12_9"))
    assert s134["cuda_cudart"]["propagated"] == ["cuda_crt", "cccl"]
    assert s130["cuda_cudart"]["propagated"] == ["cuda_crt", "cuda_cccl"]
    assert s129["cuda_cudart"]["propagated"] == ["cuda_cccl"]  # no cuda_crt package in 12.9
    for pname in ("libcublas", "libcufft", "libcurand", "libnpp", "libnvjpeg", "cuda_nvcc"):
        assert s134[pname]["propagated"] == ["cuda_cudart"], pname
        assert "cuda_cudart.out" in s134[pname]["tests"]["propagation"] or \
            "cuda_cudart-13.4.92-out" in s134[pname]["tests"]["propagation"]
    assert s134["libcuobjclient"]["propagated"] == ["libcufile"]
    # stdenv writes a propagated package's dev output, so that is what the test looks for.
    wanted = s134["libcuobjclient"]["tests"]["propagation"].split("grep -q ")[1].split()[0]
    assert "-libcufile-" in wanted and wanted.endswith("-dev"), wanted
    assert s129["cuda_nvprof"]["propagated"] == ["cuda_cudart"]
    assert s134["libcusolver"]["buildInputs"] == ["libcublas", "libcusparse", "libnvjitlink"]
    assert s134["cudnn"]["version"] == "9.27.0.42"
    assert set(s134["cuda_cudart"]["tests"]) == {"outputs", "propagation", "libraries",
                                                 "no-compiler"}
    assert s134["libcublas"]["libraryPath"].startswith("/nix/store/3333")  # libstdc++


def test_meta_broken_compat_opt_in_and_capabilities(sets_dir: Path) -> None:
    s129 = _eval(sets_dir, "cudaPackages_12_9")
    assert s129["nvidia_driver"]["broken"] and "linuxPackages" in s129["nvidia_driver"][
        "problems"][0]
    assert s129["libcublas"]["broken"] is False and s129["libcublas"]["license"] == "CUDA Toolkit"
    off = _eval(sets_dir, "cudaPackages_13_3")
    assert off["cuda_compat"]["broken"] and "cuda_compat" not in off["cuda_cudart"]["propagated"]
    on = _eval(sets_dir, "cudaPackages_13_3", compat=True)
    assert not on["cuda_compat"]["broken"]
    assert on["cuda_cudart"]["propagated"] == ["cuda_crt", "cccl", "cuda_compat"]
    orin = _eval(sets_dir, "cudaPackages_13_4", "aarch64-linux", caps=("8.7",))
    assert orin["libcudla"]["broken"] is False
    server = _eval(sets_dir, "cudaPackages_13_4", "aarch64-linux", caps=("9.0",))
    assert server["libcudla"]["broken"] and "7.2 and 8.7" in server["libcudla"]["problems"][0]


def test_cli(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["nixify-sets", *map(str, MANIFESTS), "-o",
                                     str(tmp_path / "sets")])
    assert done.exit_code == 0, done.output
    assert "cudaPackages_13_4" in done.output and "broken: " in done.output
    bad = CliRunner().invoke(main, ["nixify-sets", str(MANIFESTS[-1]), "-o", str(tmp_path)])
    assert bad.exit_code == 2 and "at least one CUDA" in bad.output


def test_release_nix_has_one_job_per_set_package_and_system(sets_dir: Path) -> None:
    """release.nix (Hydra, or nix-build -A with --builders) against a stand-in <nixpkgs>."""
    if shutil.which("nix-instantiate") is None:
        pytest.skip("nix-instantiate not found (Debian: apt-get install nix-bin)")
    expr = (f"let jobs = import {sets_dir}/release.nix {{ nixpkgs = "
            f"{DATA}/nix/release-standin.nix; cudasplitFor = pkgs: {{ outPath = \"/c\"; }}; }};"
            " in builtins.mapAttrs (s: ps: builtins.mapAttrs (p: js: builtins.mapAttrs "
            "(sys: d: d.name + \"@\" + d.system) js) ps) jobs")
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    jobs = json.loads(done.stdout)
    assert sorted(jobs) == ["cudaPackages_12_9", "cudaPackages_13_0", "cudaPackages_13_3",
                            "cudaPackages_13_4"]
    assert jobs["cudaPackages_13_4"]["cuda_cudart"] == {
        "aarch64-linux": "cuda13.4-cuda_cudart-13.4.92@aarch64-linux",
        "x86_64-linux": "cuda13.4-cuda_cudart-13.4.92@x86_64-linux"}
    assert list(jobs["cudaPackages_13_4"]["cuda_opencl"]) == ["x86_64-linux"]  # no sbsa build
    assert list(jobs["cudaPackages_13_4"]["libcudla"]) == ["aarch64-linux"]
