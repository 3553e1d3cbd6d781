"""``nixify-sets``: one package set per CUDA release from NVIDIA's manifests alone, evaluated
with ``nix-instantiate --eval --strict`` against a stand-in for the Nixpkgs attributes
(tests/data/nix/sets-standin.nix): the pins, Nixpkgs' library.nix edges, meta and its
assertions, the command line, release.nix. Package by package against Nixpkgs' buildRedist, for
all eight of its sets: tests/nix/test_nixpkgs_parity.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit._release.manifest import parse_manifest
from cudasplit._release.nixify import Pin, plan_sets, render_set
from cudasplit.cli import main
from cudasplit.nixify import nixify_sets
from cudasplit.releases import load_manifest
from tests.nix.nixtools import need_nix
from tests.support.paths import DATA

DATA = DATA
MANIFESTS = [DATA / "manifests" / n for n in (
    "redistrib_12.9.2.json", "redistrib_13.0.3.json", "redistrib_13.3.1.json",
    "redistrib_13.4.2.json", "cudnn_redistrib_9.27.0.json")]
# Several versions of one redist: real cuDNN 9.8.0, synthetic cuSPARSELt and TensorRT
# (tests/data/manifests/synthetic/README.md; TensorRT 10.13.0 left out on purpose).
EXTRA = [DATA / "manifests" / "cudnn_redistrib_9.8.0.json",
         *sorted((DATA / "manifests" / "synthetic").glob("*.json"))]


@pytest.fixture(scope="module")
def sets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sets")
    nixify_sets([*EXTRA, *MANIFESTS], out)
    return out


def _eval(sets_dir: Path, set_name: str, system: str = "x86_64-linux", *,
          compat: bool = False, caps: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    need_nix()
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
                     "cudaPackages_13_4.nix", "default.nix", "mk-redist.nix", "overlay.nix",
                     "release.nix"]
    head = (sets_dir / "cudaPackages_12_9.nix").read_text().split("\n")[0]
    assert "cudnn_redistrib_9.27.0.json" in head and "9.8.0" not in head


def test_propagation_edges_as_library_nix(sets_dir: Path) -> None:
    s134, s130, s129 = (_eval(sets_dir, f"cudaPackages_{v}") for v in ("13_4", "13_0", "12_9"))
    assert s134["cuda_cudart"]["propagated"] == ["cuda_crt", "cccl"]
    assert s130["cuda_cudart"]["propagated"] == ["cuda_crt", "cuda_cccl"]
    # 12.9: cuda_crt is cut from nvcc's archive (Nixpkgs' cuda_crt/package.nix), split as
    # cuda_crt; `cccl` is the attribute in every set, its package cuda_cccl before 13.3.
    assert s129["cuda_cudart"]["propagated"] == ["cuda_crt", "cuda_cccl"]
    assert s129["cuda_crt"]["version"] == "12.9.86" and "/cuda_nvcc-" in s129["cuda_crt"]["url"]
    assert s129["cuda_crt"]["flags"] == ["--package", "cuda_crt"]
    assert s129["cccl"]["pname"] == "cuda_cccl" and s134["cccl"]["pname"] == "cccl"
    assert s134["cuda_nvcc"]["propagated"] == []
    assert s134["cuda_nvcc"]["targetPropagated"] == ["cuda_cudart"]  # depsTargetTargetPropagated
    for pname in ("libcublas", "libcufft", "libcurand", "libnpp", "libnvjpeg"):
        assert s134[pname]["propagated"] == ["cuda_cudart"], pname
        assert "cuda_cudart.out" in s134[pname]["tests"]["propagation"] or \
            "cuda_cudart-13.4.92-out" in s134[pname]["tests"]["propagation"]
    # from CUDA 13.4 also rdma-core (cuobjextrc_types.h includes infiniband/verbs.h)
    assert s134["libcuobjclient"]["propagated"] == ["libcufile", "rdma-core"]
    # stdenv writes a propagated package's dev output, so that is what the test looks for.
    wanted = s134["libcuobjclient"]["tests"]["propagation"].split("grep -q ")[1].split()[0]
    assert "-libcufile-" in wanted and wanted.endswith("-dev"), wanted
    assert s129["cuda_nvprof"]["propagated"] == ["cuda_cudart"]
    assert s134["libcusolver"]["buildInputs"] == ["libcublas", "libcusparse", "libnvjitlink"]
    assert s134["cudnn"]["version"] == "9.27.0.42"
    assert set(s134["cuda_cudart"]["tests"]) == {"outputs", "propagation", "libraries",
                                                 "no-compiler"}
    assert s134["libcublas"]["libraryPath"].startswith("/nix/store/3333")  # libstdc++
    # cuda_crt's noexcept edits are gated on the glibc the headers meet: stdenv's, as X.Y.
    assert s134["cuda_crt"]["glibc"] == "2.42"


def test_meta_broken_compat_opt_in_and_capabilities(sets_dir: Path) -> None:
    s129 = _eval(sets_dir, "cudaPackages_12_9")
    assert s129["nvidia_driver"]["unavailable"] and "linuxPackages" in s129["nvidia_driver"][
        "problems"][0]
    assert s129["libcublas"]["unavailable"] is False
    assert s129["libcublas"]["release"]["license"] == "CUDA Toolkit"  # the manifest's words
    assert s129["libcublas"]["licenses"] == ["CUDA EULA"]  # lib.licenses.nvidiaCudaRedist
    off = _eval(sets_dir, "cudaPackages_13_3")
    assert off["cuda_compat"]["unavailable"] and "cuda_compat" not in off["cuda_cudart"]["propagated"]
    on = _eval(sets_dir, "cudaPackages_13_3", compat=True)
    assert not on["cuda_compat"]["unavailable"]
    assert on["cuda_cudart"]["propagated"] == ["cuda_crt", "cccl", "cuda_compat"]
    # 12.9's cuda_compat is the L4T one (linux-aarch64): not propagated where it is absent.
    l4t = _eval(sets_dir, "cudaPackages_12_9", compat=True)
    assert l4t["cuda_compat"]["unavailable"]
    assert l4t["cuda_cudart"]["propagated"] == ["cuda_crt", "cuda_cccl"]
    orin = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux", compat=True, caps=("8.7",))
    assert orin["cuda_cudart"]["propagated"] == ["cuda_crt", "cuda_cccl", "cuda_compat"]
    orin = _eval(sets_dir, "cudaPackages_13_4", "aarch64-linux", caps=("8.7",))
    assert orin["libcudla"]["unavailable"] is False
    server = _eval(sets_dir, "cudaPackages_13_4", "aarch64-linux", caps=("9.0",))
    assert server["libcudla"]["unavailable"] and "7.2 and 8.7" in server["libcudla"]["problems"][0]


def test_cli(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["nixify-sets", *map(str, MANIFESTS), "-o",
                                     str(tmp_path / "sets")])
    assert done.exit_code == 0, done.output
    assert "cudaPackages_13_4" in done.output and "broken: " in done.output
    pinned = CliRunner().invoke(main, ["nixify-sets", *map(str, [*MANIFESTS, *EXTRA]), "-o",
                                       str(tmp_path / "pinned")])
    assert pinned.exit_code == 0, pinned.output
    assert ("pins: cudnn 9.27.0 (other aarch64-linux 9.27.0, Jetson 9.20.0); cusparselt 0.8.1; "
            "tensorrt 11.3.0 (other aarch64-linux 10.13.0, Jetson 10.7.0)") in pinned.output
    assert "warning: cudaPackages_12_9 takes tensorrt 10.13.0" in pinned.output
    assert "note: no set takes " in pinned.output and "cudnn_redistrib_9.8.0.json" in \
        pinned.output
    bad = CliRunner().invoke(main, ["nixify-sets", str(MANIFESTS[-1]), "-o", str(tmp_path)])
    assert bad.exit_code == 2 and "at least one CUDA" in bad.output


def test_release_nix_has_one_job_per_set_package_and_system(sets_dir: Path) -> None:
    """release.nix (Hydra, or nix-build -A with --builders) against a stand-in <nixpkgs>."""
    need_nix()
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


def test_pins_per_set_and_build(sets_dir: Path) -> None:
    """cuDNN, cuSPARSELt and TensorRT as Nixpkgs' cuda-packages.nix pins them, chosen when the
    set is evaluated: Jetson, other aarch64-linux, x86_64-linux (nixpkgs-today.md section 1)."""
    x86 = _eval(sets_dir, "cudaPackages_12_9")
    assert (x86["cudnn"]["version"], x86["libcusparse_lt"]["version"],
            x86["tensorrt"]["version"]) == ("9.27.0.42", "0.8.1.1", "11.3.0.99")
    assert x86["tensorrt"]["url"].startswith(
        "https://developer.download.nvidia.com/compute/machine-learning/tensorrt/11.3.0/")
    assert "-x86_64-cuda-12.9-" in x86["tensorrt"]["url"]  # the cuda12 variant on CUDA 12
    assert x86["cudnn"]["url"].startswith("https://developer.download.nvidia.com/compute/"
                                          "cudnn/redist/cudnn/linux-x86_64/")
    assert x86["libcusparse_lt"]["propagated"] == ["cuda_cudart", "libcusparse"]
    # Other aarch64 on CUDA 12 takes TensorRT 10.13.0, which was not given: broken, said why.
    arm = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux")
    assert arm["tensorrt"]["unavailable"] and "tensorrt 10.13.0" in arm["tensorrt"]["problems"][0]
    assert arm["cudnn"]["version"] == "9.27.0.42" and "linux-sbsa" in arm["cudnn"]["url"]
    # Orin on CUDA 12: the L4T (linux-aarch64) builds; cuDNN 9.20.0 was not given.
    orin = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux", caps=("8.7",))
    assert orin["tensorrt"]["version"] == "10.7.0.23" and ".l4t." in orin["tensorrt"]["url"]
    assert "/linux-aarch64/" in orin["libcusparse_lt"]["url"]
    assert orin["cudnn"]["unavailable"] and "cudnn 9.20.0" in orin["cudnn"]["problems"][0]
    assert orin["cuda_cudart"]["url"].endswith(".tar.xz") and "linux-aarch64" in orin[
        "cuda_cudart"]["url"]
    # CUDA 13: Orin is sbsa; TensorRT 10.16.1 for Jetsons on 13.0, 11.1.0 from 13.2.
    s130 = _eval(sets_dir, "cudaPackages_13_0", "aarch64-linux", caps=("8.7",))
    assert s130["tensorrt"]["version"] == "10.16.1.11" and "aarch64-gnu.cuda-13" in s130[
        "tensorrt"]["url"]
    assert _eval(sets_dir, "cudaPackages_13_0", "aarch64-linux")["tensorrt"]["version"] == \
        "11.3.0.99"
    s134 = _eval(sets_dir, "cudaPackages_13_4", "aarch64-linux", caps=("11.0",))
    assert s134["tensorrt"]["version"] == "11.1.0.106"
    assert s134["libcusparse_lt"]["version"] == "0.10.0.12"
    # Xavier on CUDA 13 asks for linux-aarch64, which TensorRT 10.16.1 does not have.
    xavier = _eval(sets_dir, "cudaPackages_13_0", "aarch64-linux", caps=("7.2",))
    assert any(p.startswith("hostRedistSystem (linux-aarch64) is supported (")
               for p in xavier["tensorrt"]["problems"])


def test_pins_warn_about_missing_manifests() -> None:
    sets = plan_sets([load_manifest(m) for m in [*MANIFESTS, *EXTRA]])
    assert [s.name for s in sets] == ["cudaPackages_12_9", "cudaPackages_13_0",
                                      "cudaPackages_13_3", "cudaPackages_13_4"]
    s129 = sets[0]
    assert dict(s129.pins)["tensorrt"] == Pin("10.7.0", "10.13.0", "11.3.0")
    assert s129.warnings == (
        "cudaPackages_12_9 takes cudnn 9.20.0 for Jetson builds (Nixpkgs' pin); its manifest "
        "was not given: cudnn, cudnn_jit, cudnn_samples broken there",
        "cudaPackages_12_9 takes tensorrt 10.13.0 for other aarch64-linux builds (Nixpkgs' "
        "pin); its manifest was not given: tensorrt broken there")
    assert s129.package("tensorrt", "jetson").version == "10.7.0.23"
    assert s129.package("cudnn", "x86_64").version == "9.27.0.42"
    assert all(s.warnings == () for s in sets[1:])
    assert "cudnn_redistrib_9.8.0.json" not in {m for s in sets for m in s.manifests}
    # The order manifests come in does not matter.
    again = plan_sets([load_manifest(m) for m in reversed([*MANIFESTS, *EXTRA])])
    assert [render_set(s) for s in again] == [render_set(s) for s in sets]
    # A set Nixpkgs has no pin for takes the newest given, and says so.
    cuda122 = parse_manifest({"release_label": "12.2.2", "cuda_cudart": {
        "version": "12.2.140", "linux-x86_64": {"relative_path": "cuda_cudart/x.tar.xz",
                                                "sha256": "0" * 64, "size": "1"}}})
    alone = plan_sets([cuda122, load_manifest(EXTRA[0]), load_manifest(MANIFESTS[-1])])
    assert alone[0].warnings == ("cudaPackages_12_2: Nixpkgs pins no cudnn for CUDA 12.2; "
                                 "took the newest given, 9.27.0",)
    # A pinned manifest without a build for the set's CUDA major: the package is there, with no
    # archive for any system (as buildRedist's supportedReleases), not broken, no warning.
    cuda12_only = parse_manifest({"release_label": "9.27.0", "release_product": "cudnn",
                                  "cudnn": {"version": "9.27.0.1", "cuda_variant": ["12"],
                                            "linux-x86_64": {"cuda12": {
                                                "relative_path": "cudnn/x.tar.xz",
                                                "sha256": "0" * 64, "size": "1"}}}})
    (s134,) = plan_sets([load_manifest(MANIFESTS[3]), cuda12_only])
    assert s134.warnings == ()
    cudnn = s134.package("cudnn")
    assert (cudnn.version, cudnn.broken, cudnn.sources) == ("9.27.0.1", (), ())


def test_tensorrt_capability_assertions_and_vulnerabilities(sets_dir: Path) -> None:
    """Nixpkgs' tensorrt.nix platformAssertions (>= 7.0 from 10.0.0, >= 7.5 from 10.5.0, pre-Thor
    Jetson only 8.7 and CUDA >= 12.4, no Jetson from 11.2.1) and knownVulnerabilities."""
    old = _eval(sets_dir, "cudaPackages_12_9", caps=("6.1",))["tensorrt"]
    assert old["unavailable"] and len(old["problems"]) == 2  # 11.3.0: below 7.0 and below 7.5
    assert old["problems"][0] == ("tensorrt releases since 10.0.0 support CUDA compute "
                                  'capabilities 7.0 and newer (found ["6.1"])')
    turing_less = _eval(sets_dir, "cudaPackages_12_9", caps=("7.0",))["tensorrt"]
    assert turing_less["problems"] == ["tensorrt releases since 10.5.0 support CUDA compute "
                                       'capabilities 7.5 and newer (found ["7.0"])']
    ada = _eval(sets_dir, "cudaPackages_12_9", caps=("8.9",))["tensorrt"]
    assert not ada["unavailable"] and ada["knownVulnerabilities"] == []
    orin = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux", caps=("8.7",))["tensorrt"]
    assert orin["version"] == "10.7.0.23" and not orin["unavailable"]
    assert orin["knownVulnerabilities"] == ["CVE-2026-24188: OOB write"]  # below 10.16.1
    xavier = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux", caps=("7.2",))["tensorrt"]
    assert xavier["unavailable"] and any("only CUDA compute capability 8.7" in p
                                    for p in xavier["problems"])
    both = _eval(sets_dir, "cudaPackages_12_9", "aarch64-linux", caps=("7.2", "8.7"))
    assert both["tensorrt"]["unavailable"]
    thor = _eval(sets_dir, "cudaPackages_13_0", "aarch64-linux", caps=("11.0",))["tensorrt"]
    assert thor["version"] == "10.16.1.11" and not thor["unavailable"]
    assert thor["knownVulnerabilities"] == []
    # The 11.2.1 assertion is on 11.3.0 (never a Jetson pin) and not on 11.1.0.
    s134 = plan_sets([load_manifest(m) for m in [*MANIFESTS, *EXTRA]])[-1]
    since = {p.version: [a.since for a in p.capabilities] for p in s134.packages
             if p.pname == "tensorrt"}
    assert since == {"11.1.0.106": ["10.0.0", "10.0.0", "10.0.0", "10.5.0"],
                     "11.3.0.99": ["10.0.0", "10.0.0", "10.0.0", "10.5.0", "11.2.1"]}
