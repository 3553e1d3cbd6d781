"""nixify (per manifest, with tarballs) writes Nixpkgs' library.nix edges as
propagatedBuildInputs, keeping cudasplit's own nix-support propagation (issue 27)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cudasplit._release.nixify import PROPAGATES, PackagePlan, PlatformPlan, render_package
from tests.nix.nixtools import need_nix


def _plan(propagated: tuple[str, ...]) -> PackagePlan:
    return PackagePlan(
        pname="libcublas", version="13.0.2.14", description="CUBLAS", license="CUDA Toolkit",
        platforms=(PlatformPlan(platform="linux-x86_64", url="https://x/libcublas.tar.xz",
                                sha256="0" * 64, outputs=("out", "dev", "lib")),),
        build_inputs=(), resolves={}, unresolved=(), dlopened=(), package_roots=(),
        cuda_version="13.0", propagated=propagated)


def test_library_nix_edges() -> None:
    assert PROPAGATES["libcublas"] == ("cuda_cudart",)
    assert PROPAGATES["cuda_cudart"] == ("cuda_crt", "cuda_cccl")


def test_rendered_propagation_parses_and_keeps_cudasplits_own(tmp_path: Path) -> None:
    text = render_package(_plan(("cuda_cudart",)), "redistrib_13.0.2.json")
    assert "  propagatedBuildInputs = [ cuda_cudart ];" in text
    assert "  cuda_cudart,\n" in text.split("}:")[0]  # a callPackage argument
    # cudasplit's own propagation survives stdenv's fixup through the setup hook (its
    # postFixup; tests/nix/test_stdenv_fixup.py), not through pre/postFixup in the expression.
    assert "preFixup" not in text and "postFixup" not in text
    assert "propagatedBuildInputs" not in render_package(_plan(()), "r.json")
    need_nix()
    path = tmp_path / "libcublas.nix"
    path.write_text(text)
    done = subprocess.run(["nix-instantiate", "--parse", str(path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
