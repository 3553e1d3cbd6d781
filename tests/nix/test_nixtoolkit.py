"""Issue 25: ``nixify --toolkit`` writes ``cudaToolkit.nix``, one prefix over the release.

No nixpkgs here: the expression is parsed, then evaluated against a stub ``callPackage`` whose
packages are plain attribute sets, once natively and once "cross" (each package carries a
``__spliced.targetTarget`` variant), and its install command is read back. The command itself
(``cudasplit toolkit --outputs-of``) is run on real split outputs given one root at a time, as
Nix store paths would be.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit._elf.read import EM_X86_64, elf_machine
from cudasplit._release.nixify import compiler_packages, nixify
from cudasplit.cli import main
from cudasplit.releases import load_manifest
from tests.nix.nixtools import need_nix
from tests.support.paths import REPO
from tests.support.releases import release

PACKAGES = ["cuda_cccl", "cuda_crt", "cuda_cudart", "cuda_nvcc", "libnvvm"]

STUB = r"""
{ dir, cross }:
let
  pkg = name: outputs: let
    self = { pname = name; inherit outputs; } // builtins.listToAttrs
      (map (o: { name = o; value = "/store/${name}-${o}"; }) outputs);
    aarch64 = self // builtins.listToAttrs
      (map (o: { name = o; value = "/store/aarch64-${name}-${o}"; }) outputs);
  in if cross then self // { __spliced.targetTarget = aarch64; } else self;
  stubs = {
    lib = {
      licenses.nvidiaCudaRedist = "nvidiaCudaRedist";
      sourceTypes.binaryNativeCode = "binaryNativeCode";
      getOutput = o: p: p.${o};
      concatMapStringsSep = sep: f: l: builtins.concatStringsSep sep (map f l);
    };
    stdenvNoCC.mkDerivation = a: a;
    cudasplit = { pname = "cudasplit"; };
    cuda_cccl = pkg "cuda_cccl" [ "out" ];
    cuda_crt = pkg "cuda_crt" [ "out" ];
    cuda_cudart = pkg "cuda_cudart" [ "out" "include" "lib" "static" ];
    cuda_nvcc = pkg "cuda_nvcc" [ "out" ];
    libnvvm = pkg "libnvvm" [ "out" ];
  };
  callPackage = f: extra:
    let fn = import f; in fn (builtins.intersectAttrs (builtins.functionArgs fn) stubs) // extra;
  tk = (import (dir + "/default.nix") { inherit callPackage; }).cudaToolkit;
in { inherit (tk) pname version installPhase nativeBuildInputs; }
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rel = release("13.0.2")
    out = tmp_path_factory.mktemp("nixify-toolkit")
    result = nixify(load_manifest(rel.manifest), rel.tarballs, out, packages=PACKAGES,
                    toolkit=True)
    assert "cudaToolkit.nix" in result.files
    return out


def _nix() -> None:
    need_nix()


def _evaluate(directory: Path, tmp_path: Path, *, cross: bool) -> dict[str, object]:
    stub = tmp_path / "stub.nix"
    stub.write_text(STUB)
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", str(stub),
                           "--arg", "dir", str(directory), "--arg", "cross",
                           "true" if cross else "false"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    value: dict[str, object] = json.loads(done.stdout)
    return value


def test_compiler_packages_follow_the_table() -> None:
    assert compiler_packages(PACKAGES) == ("cuda_nvcc", "libnvvm")
    assert compiler_packages(["cuda_nvcc", "cuda_cudart"]) == ("cuda_nvcc",)


def test_toolkit_expression_parses_and_lists_every_output(generated: Path,
                                                          tmp_path: Path) -> None:
    _nix()
    for path in sorted(generated.glob("*.nix")):
        done = subprocess.run(["nix-instantiate", "--parse", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{path.name}: {done.stderr[-1500:]}"
    native = _evaluate(generated, tmp_path, cross=False)
    assert native["pname"] == "cuda-toolkit" and native["version"] == "13.0.2"
    install = str(native["installPhase"])
    assert 'cudasplit toolkit -o "$out"' in install
    assert ("--outputs-of /store/cuda_cudart-out:/store/cuda_cudart-include:"
            "/store/cuda_cudart-lib:/store/cuda_cudart-static") in install
    assert "--outputs-of /store/cuda_nvcc-out" in install


def test_cross_takes_runtime_packages_from_the_target_set(generated: Path,
                                                           tmp_path: Path) -> None:
    _nix()
    install = str(_evaluate(generated, tmp_path, cross=True)["installPhase"])
    # the compiler (and the libnvvm it copies) run here; the rest is the target's
    assert "--outputs-of /store/cuda_nvcc-out " in install
    assert "--outputs-of /store/libnvvm-out " in install
    for pname in ("cuda_cccl", "cuda_crt", "cuda_cudart"):
        assert f"--outputs-of /store/aarch64-{pname}-out" in install
        assert f"/store/{pname}-out" not in install


def test_outputs_of_lays_out_store_path_like_roots(tmp_path: Path) -> None:
    """The derivation's command on real split outputs, one root per output (as Nix has)."""
    from cudasplit import SplitOptions, split_to_dir
    from tests.support.wheeltrees import WHEELS_13, redist_tarball

    roots = []
    for pname in ("cuda_cudart", "cuda_crt"):
        split_to_dir(redist_tarball(pname, WHEELS_13[pname]), tmp_path / pname, SplitOptions())
        outputs = sorted(p for p in (tmp_path / pname).iterdir() if p.is_dir())
        roots.append(":".join(map(str, outputs)))
    result = CliRunner().invoke(main, ["toolkit", "-o", str(tmp_path / "cuda"),
                                       *(f"--outputs-of={r}" for r in roots)])
    assert result.exit_code == 0, result.output
    lib = tmp_path / "cuda/targets/x86_64-linux/lib"
    assert elf_machine(lib / "libcudart.so.13") == EM_X86_64
    assert (lib / "libcudart_static.a").exists()
    assert (tmp_path / "cuda/include/crt/host_config.h").is_file()
    assert (tmp_path / "cuda/include/cuda_runtime.h").is_file()


def test_setup_hook_passes_the_target_platform(tmp_path: Path) -> None:
    hook = REPO / "cudasplit" / "nix" / "setup-hook.sh"
    script = (f"set -eu; src=/x.tar; NIX_BUILD_TOP={tmp_path}; cudasplitCommand=echo; "
              f"runHook() {{ :; }}; source {hook}; cudasplitInstallPhase; "
              "cudasplitTargetPlatform=linux-sbsa; cudasplitInstallPhase")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          check=True)
    first, second = done.stdout.splitlines()
    assert "--target-platform" not in first
    assert "--target-platform linux-sbsa" in second


def test_nvcc_expression_sets_its_target_platform(generated: Path) -> None:
    text = (generated / "cuda_nvcc.nix").read_text()
    assert "cudasplitTargetPlatform =" in text
    assert 'aarch64-linux = "linux-sbsa";' in text
    assert "lib.getLib (cuda_cudart.__spliced.targetTarget or cuda_cudart)" in text
    assert "cudasplitTargetPlatform" not in (generated / "cuda_cudart.nix").read_text()
