"""The generated sets evaluated with the real Nixpkgs ``lib`` (nix-community/nixpkgs.lib, a copy
of Nixpkgs' ``lib/``): real ``callPackageWith``/``makeScopeWithSplicing'``/``lib.systems``
in an x86_64-linux -> aarch64-linux cross build (tests/data/nix/cross-standin.nix), and the
facts of Nixpkgs' ``cudaPackages_13_4`` (licences, provenance, ``cudaSupport``, nvcc's
target-platform cudart). Where the real lib is absent (CI has no copy of it) these tests skip
with the reason; the same checks of what the stand-in lib can do run in test_nixify_sets.py.

``CUDASPLIT_NIXPKGS_LIB=DIR`` names the lib (a ``lib/`` directory with ``default.nix``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudasplit.nixify import nixify_sets
from tests.nix.nixtools import MODERN, need_nix
from tests.support.paths import DATA

pytestmark = pytest.mark.nix

MANIFESTS = [DATA / "manifests" / n for n in ("redistrib_13.4.2.json",
                                              "cudnn_redistrib_9.27.0.json")]


def _real_lib() -> Path:
    found = os.environ.get("CUDASPLIT_NIXPKGS_LIB", "")
    path = Path(found) if found else None
    if path is None or not (path / "default.nix").is_file():
        pytest.skip("the real Nixpkgs lib is not here (set CUDASPLIT_NIXPKGS_LIB=DIR to a copy "
                    "of nixpkgs.lib's lib/)")
    return path


@pytest.fixture(scope="module")
def sets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("realsets")
    nixify_sets(MANIFESTS, out)
    return out


def _eval(expr: str) -> Any:
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_cross_build_splices_with_the_real_lib(sets_dir: Path) -> None:
    lib = _real_lib()
    need_nix(MODERN, "the real lib needs a modern Nix")
    cross = f"import {DATA}/nix/cross-standin.nix {{ lib = import {lib}; dir = {sets_dir}; }}"
    got = _eval(f"""
      let
        p = {cross};
        cp = p.host.cudaPackages_13_4;
        consumer = p.host.callPackage ({{ stdenv, cudaPackages_13_4 }}: stdenv.mkDerivation {{
          name = "consumer";
          nativeBuildInputs = [ cudaPackages_13_4.cuda_nvcc ];
          buildInputs = [ cudaPackages_13_4.cuda_cudart ];
        }}) {{ }};
        nvcc = builtins.head consumer.nativeBuildInputs;
        off = import {DATA}/nix/cross-standin.nix {{
          lib = import {lib}; dir = {sets_dir}; config = {{ }}; }};
      in {{
        nvccSystem = nvcc.system;
        nvccUrl = nvcc.src.url;
        cudartUrl = (builtins.head consumer.buildInputs).src.url;
        nvccTargetCudart = map (d: d.src.url) nvcc.depsTargetTargetPropagated;
        spliced = builtins.attrNames (p.host.callPackage ({{ cudaPackages_13_4 }}:
          cudaPackages_13_4.cuda_nvcc) {{ }}).__spliced;
        license = cp.cuda_cudart.meta.license;
        cudnnLicense = cp.cudnn.meta.license;
        passthru = builtins.attrNames cp.libcublas.passthru;
        provenance = map (s: s.shortName or s) cp.cuda_cudart.meta.sourceProvenance;
        brokenWithoutCudaSupport = off.host.cudaPackages_13_4.cuda_cudart.meta.broken;
        brokenWithIt = cp.cuda_cudart.meta.broken;
        outputs = cp.libcublas.outputs;
        outputInclude = cp.libcublas.outputInclude;
        propagated = map (d: d.pname) cp.libcublas.propagatedBuildInputs;
        derivations = builtins.attrNames (p.host.lib.filterAttrs (_: p.host.lib.isDerivation) cp);
        overridable = cp.cuda_cudart ? override;
      }}""")
    # nvcc in nativeBuildInputs: the build platform's (x86_64 archive); it propagates the
    # target's (sbsa) cudart; the consumer links the host's (sbsa) cudart.
    assert got["nvccSystem"] == "x86_64-linux" and "/linux-x86_64/" in got["nvccUrl"]
    assert "/linux-sbsa/" in got["cudartUrl"]
    assert [("/linux-sbsa/" in u) for u in got["nvccTargetCudart"]] == [True]
    assert got["spliced"] == ["buildBuild", "buildHost", "buildTarget", "hostHost",
                              "hostTarget", "targetTarget"]
    # Nixpkgs' buildRedist: a list, nvidiaCudaRedist for the CUDA redists; cuDNN's own licence
    # (_cuda.lib.licenses.cudnn), as cudnn.nix names it.
    (license,) = got["license"]
    assert license["shortName"] == "CUDA EULA" and license["redistributable"]
    assert license["free"] is False
    (cudnn,) = got["cudnnLicense"]
    assert cudnn["shortName"] == "cuDNN EULA" and cudnn["redistributable"] is False
    assert got["passthru"] == ["brokenAssertions", "expectedOutputs", "outputNameVarFallbacks",
                               "outputToPatterns", "platformAssertions", "redistName", "release",
                               "supportedNixSystems", "supportedRedistSystems",
                               "supportedReleases", "tests"]
    assert got["provenance"] == ["binaryNativeCode"]
    assert got["brokenWithoutCudaSupport"] is True and got["brokenWithIt"] is False
    assert got["outputs"] == ["out", "dev", "include", "lib", "static", "stubs"]
    assert got["outputInclude"] == "include" and got["propagated"] == ["cuda_cudart"]
    # callPackage makes results overridable; the scope's jobs are its derivations only.
    assert got["overridable"] is True
    assert "override" not in got["derivations"] and "mkRedist" not in got["derivations"]
    assert {"cuda_cudart", "cuda_nvcc", "libcublas", "cudnn"} <= set(got["derivations"])
