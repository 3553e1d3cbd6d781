"""Real ``nix-build`` of packages from the sets ``nixify-sets`` generates, and of their
``passthru.tests``, against a buildable stand-in for the Nixpkgs attributes they use
(tests/data/nix/build-standin.nix: ``stdenv.mkDerivation`` as a ``builtins.derivation`` running
the host's bash through the phases, ``fetchurl`` mapped onto local tarballs; its header says
what it does not do). The tarballs are NVIDIA's wheels in the redist layout, named as the
manifests name the archives (``<pname>-linux-x86_64-<version>-archive``), with the versions
of the manifests: CUDA 13.0.3 (cudart, cupti, nvrtc, nvcc, cublas, cuDNN 9.27 and what they
propagate: crt, cccl) and CUDA 12.9.2 (cudart, cupti, nvrtc, nvcc, cccl, and crt, which Nixpkgs
and the set cut from nvcc's archive; its cuBLAS 12.9.2.10 and cuDNN-cu12 wheels are not
fetched). A package whose propagation or libraries are broken
on purpose must fail its tests (issue 27, acceptance).

Uses the session ``nix`` fixture of tests/nix/test_nix.py (private nix.conf, sandbox off,
per-session nonce, store paths deleted afterwards).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cudasplit._elf.read import read_elf_info
from cudasplit.nixify import nixify_sets
from tests.nix import test_nix
from tests.nix.standin import write_params
from tests.nix.test_nix import STORE_PATH, Nix
from tests.support.paths import DATA
from tests.support.wheeltrees import Wheel, set_archive

nix = test_nix.nix

pytestmark = [pytest.mark.nix, pytest.mark.slow, pytest.mark.realbytes]

STANDIN = DATA / "nix" / "build-standin.nix"
MANIFESTS = [DATA / "manifests" / n for n in (
    "redistrib_12.9.2.json", "redistrib_13.0.3.json", "cudnn_redistrib_9.27.0.json")]
# Per set: the packages built from real wheels (versions = the manifest's) and the wheel each
# archive is made of; packages the built ones propagate are built too.
WHEELS: dict[str, dict[str, Wheel]] = {
    "cudaPackages_13_0": {
        "cuda_cudart": Wheel("nvidia-cuda-runtime", "13.0.96", "13.0"),
        "cuda_crt": Wheel("nvidia-cuda-crt", "13.0.88", "13.0"),
        "cuda_cccl": Wheel("nvidia-cuda-cccl", "13.0.85", "13.0"),
        "cuda_cupti": Wheel("nvidia-cuda-cupti", "13.0.85", "13.0"),
        "cuda_nvrtc": Wheel("nvidia-cuda-nvrtc", "13.0.88", "13.0"),
        "cuda_nvcc": Wheel("nvidia-cuda-nvcc", "13.0.88", "13.0"),
        "libnvvm": Wheel("nvidia-nvvm", "13.0.88", "13.0"),
        "libnvjitlink": Wheel("nvidia-nvjitlink", "13.0.88", "13.0"),
        "libcublas": Wheel("nvidia-cublas", "13.1.1.3", "13.0"),
        "cudnn": Wheel("nvidia-cudnn-cu13", "9.27.0.42", "13.0"),
    },
    "cudaPackages_12_9": {
        "cuda_cudart": Wheel("nvidia-cuda-runtime-cu12", "12.9.79", "12.9"),
        "cuda_cccl": Wheel("nvidia-cuda-cccl-cu12", "12.9.27", "12.9"),
        "cuda_cupti": Wheel("nvidia-cuda-cupti-cu12", "12.9.79", "12.9"),
        "cuda_nvrtc": Wheel("nvidia-cuda-nvrtc-cu12", "12.9.86", "12.9"),
        "cuda_nvcc": Wheel("nvidia-cuda-nvcc-cu12", "12.9.86", "12.9"),
    },
}
BUILT = {"cudaPackages_13_0": ("cuda_cudart", "cuda_cupti", "cuda_nvrtc", "cuda_nvcc",
                               "libcublas", "cudnn"),
         "cudaPackages_12_9": ("cuda_cudart", "cuda_cupti", "cuda_nvrtc", "cuda_nvcc")}
CASES = [(s, p) for s, ps in BUILT.items() for p in ps]
MISSING: dict[str, str] = {}  # archive file name -> why its wheel is not here


@pytest.fixture(scope="module")
def params(nix: Nix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated sets, the local tarballs their URLs map to, and the host pieces."""
    root = tmp_path_factory.mktemp("setsbuild")
    result = nixify_sets(MANIFESTS, root / "sets")
    srcs: dict[str, str] = {}
    for pset in result.sets:
        for pname, wheel in WHEELS.get(pset.name, {}).items():
            package = pset.package(pname)
            assert package.version == wheel.version, (pset.name, pname)
            source = next(s for s in package.sources if s.platform == "linux-x86_64")
            base = source.url.rsplit("/", 1)[1]
            top = base.removesuffix(".tar.xz")
            try:
                srcs[base] = str(set_archive(pname, wheel, top, source.outputs))
            except pytest.skip.Exception as exc:  # offline: the builds needing it skip
                MISSING[base] = str(exc)
    return write_params(root / "params.json", nix, srcs, root / "sets")


def _build(nix: Nix, params: Path, set_name: str, attrs: list[str],
           overrides: str = "{ }") -> subprocess.CompletedProcess[str]:
    cmd = ["nix-build", str(STANDIN), "--arg", "paramsFile", str(params), "--argstr",
           "setName", set_name, "--arg", "overrides", overrides, "--no-out-link",
           "--keep-going"]
    for attr in attrs:
        cmd += ["-A", attr]
    done = subprocess.run(cmd, env=nix.env, capture_output=True, text=True, timeout=600,
                          check=False)
    nix.created.update(STORE_PATH.findall(done.stdout + done.stderr))
    lacking = re.search(r"no local tarball for (\S+)", done.stderr)
    if lacking and lacking.group(1) in MISSING:
        pytest.skip(MISSING[lacking.group(1)])
    return done


def _tests_of(nix: Nix, params: Path, set_name: str, pname: str) -> list[str]:
    expr = (f"builtins.attrNames (import {STANDIN} {{ paramsFile = {params}; "
            f"setName = \"{set_name}\"; }}).{pname}.passthru.tests")
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                          env=nix.env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    names: list[str] = json.loads(done.stdout)
    return names


@pytest.mark.parametrize(("set_name", "pname"), CASES)
def test_package_and_its_tests_build(nix: Nix, params: Path, set_name: str,
                                     pname: str) -> None:
    tests = _tests_of(nix, params, set_name, pname)
    assert {"outputs", "propagation", "libraries"} <= set(tests)
    if pname == "cuda_cudart":
        assert "no-compiler" in tests
    done = _build(nix, params, set_name,
                  [f"{pname}.all"] + [f"{pname}.passthru.tests.{t}" for t in tests])
    assert done.returncode == 0, done.stderr[-4000:]
    _check_after_fixup(nix, params, set_name, pname)


def _check_after_fixup(nix: Nix, params: Path, set_name: str, pname: str) -> None:
    """After stdenv's fixup (the stand-in's model): headers only in the include output (or
    where the package's outputs put them), and every directory a .pc file names exists."""
    done = _build(nix, params, set_name, [f"{pname}.all"])
    assert done.returncode == 0, done.stderr[-2000:]
    outputs = {Path(p).name.rsplit("-", 1)[-1]: Path(p) for p in done.stdout.split()}
    if "include" in outputs:
        assert any((outputs["include"] / "include").iterdir())
        assert all(not (o / "include").exists() for n, o in outputs.items() if n != "include")
    for path in outputs.values():
        for pc in path.rglob("*.pc"):
            for value in re.findall(r"^\w+dir=(/nix/store/\S+)$", pc.read_text(), re.M):
                assert Path(value).is_dir(), f"{pc}: {value}"


@pytest.mark.parametrize("set_name", list(BUILT))
def test_nvcc_of_the_set_runs(nix: Nix, params: Path, set_name: str) -> None:
    """Its executables carry the loader stdenv's compiler names (``$NIX_CC``), and run
    (nvcc itself in 13.0; the 12.9 wheel has only ptxas)."""
    done = _build(nix, params, set_name, ["cuda_nvcc"])
    assert done.returncode == 0, done.stderr[-3000:]
    release = set_name.removeprefix("cudaPackages_").replace("_", ".")
    for name in ("ptxas", "nvcc") if release == "13.0" else ("ptxas",):
        program = Path(done.stdout.split()[0]) / "bin" / name
        info = read_elf_info(program)
        assert info is not None and info.interp is not None
        assert info.interp.startswith("/nix/store/") and "loader-host-copy" in info.interp
        version = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                                 timeout=60, check=False)
        assert version.returncode == 0, version.stderr
        assert f"release {release}" in version.stdout, version.stdout


def test_a_package_that_does_not_propagate_fails_its_propagation_test(
        nix: Nix, params: Path) -> None:
    """cuda_cudart built without its propagatedBuildInputs (crt, cccl): the derivation still
    builds, its ``propagation`` test must not."""
    overrides = "{ cuda_cudart = { propagatedBuildInputs = [ ]; }; }"
    done = _build(nix, params, "cudaPackages_13_0", ["cuda_cudart.passthru.tests.propagation"],
                  overrides)
    assert done.returncode != 0, done.stdout
    assert "cuda_crt not propagated" in done.stderr, done.stderr[-3000:]
    assert "cuda_cudart-13.0.96-propagation.drv' failed" in done.stderr


def test_a_library_that_does_not_load_fails_its_libraries_test(nix: Nix, params: Path) -> None:
    """cuda_nvrtc split with libstdc++/libgcc_s left unresolved on purpose (no library path,
    the names ignored, as autoPatchelfIgnoreMissingDeps would): the split passes,
    ``libraries`` must not (libnvrtc-builtins NEEDs both)."""
    overrides = ('{ cuda_nvrtc = { cudasplitLibraryPath = ""; '
                 'cudasplitIgnoreMissing = [ "libstdc++.so.6" "libgcc_s.so.1" ]; }; }')
    done = _build(nix, params, "cudaPackages_13_0", ["cuda_nvrtc.passthru.tests.libraries"],
                  overrides)
    assert done.returncode != 0, done.stdout
    assert "libstdc++.so.6 => not found" in done.stderr, done.stderr[-3000:]
    assert "cuda_nvrtc-13.0.88-libraries.drv' failed" in done.stderr
