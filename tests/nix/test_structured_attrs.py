"""A hand-written ``__structuredAttrs`` derivation whose libstdc++ and libgcc_s come only from
``buildInputs`` (``stdenvNoCC``: no compiler wrapper, no ``NIX_LDFLAGS``; Nix exports no
``buildInputs`` variable either, it is a bash array of ``.attrs.sh``): the strict ``--nix``
split must find them in ``$NIX_ATTRS_JSON_FILE`` and split cleanly, with the RUNPATH naming
gcc's lib. Built by the stand-in's ``stdenv`` (tests/data/nix/build-standin.nix) and, where
``CUDASPLIT_NIXPKGS_STDENV`` names a directory holding Nixpkgs' own
``pkgs/stdenv/generic/setup.sh`` and the setup hooks of its default inputs, by Nixpkgs' real
``genericBuild`` (tests/data/nix/build-standin.nix's ``realStdenv`` says how)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudasplit._elf.read import read_elf_info
from tests.nix import test_nix
from tests.nix.standin import build, write_params
from tests.nix.test_nix import Nix
from tests.support.builders import compile_shared, write_tarball

nix = test_nix.nix

pytestmark = pytest.mark.nix

TOP = "libcurand-linux-x86_64-10.3.10.19-archive"
# The derivation a user writes: gcc's lib in buildInputs and nowhere else.
EXPR = r"""
{ lib, stdenv, stdenvNoCC, fetchurl, cudasplit, ... }:
stdenvNoCC.mkDerivation {
  pname = "libcurand";
  version = "10.3.10.19";
  src = fetchurl { url = "https://example.invalid/TOP.tar.xz"; sha256 = ""; };
  dontUnpack = true;
  __structuredAttrs = true;
  strictDeps = true;
  outputs = [ "out" "dev" "include" "lib" ];
  nativeBuildInputs = [ cudasplit ];
  buildInputs = [ (lib.getLib stdenv.cc.cc) ];
  cudasplitStrict = true;
  cudasplitCudaVersion = "12.9";
}
""".replace("TOP", TOP)


@pytest.fixture(scope="module")
def params(nix: Nix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("structured")
    top = root / "tree" / TOP
    (top / "include").mkdir(parents=True)
    (top / "include" / "curand.h").write_text("int curand_demo(void);\n")
    (top / "LICENSE").write_text("demo\n")
    lib = compile_shared(top / "lib", "libcurand.so.10.3.10.19",
                         "int curand_demo(void) { return 1; }\n", soname="libcurand.so.10",
                         needed_libs=["libstdc++.so.6", "libgcc_s.so.1"])
    (top / "lib" / "libcurand.so.10").symlink_to(lib.name)
    (top / "lib" / "libcurand.so").symlink_to("libcurand.so.10")
    (root / "dist").mkdir()
    tarball = write_tarball(top, root / "dist", "xz")
    (root / "structured.nix").write_text(EXPR)
    return write_params(root / "params.json", nix, {tarball.name: str(tarball)})


def _outputs(nix: Nix, params: Path, real_stdenv: str | None) -> dict[str, Path]:
    args = {"expr": str(params.parent / "structured.nix")}
    if real_stdenv is not None:
        args["realStdenv"] = real_stdenv
    done = build(nix, params, ["all"], args=args)
    assert done.returncode == 0, done.stderr[-4000:]
    if real_stdenv is not None:  # Nixpkgs' setup.sh ran the phases, structured
        assert "structuredAttrs is enabled" in done.stderr, done.stderr[-2000:]
        assert "Running phase: installPhase" in done.stderr
        assert "Running phase: fixupPhase" in done.stderr
    paths = [Path(p) for p in done.stdout.split()]
    return {p.name.rsplit("-", 1)[1] if p.name.count("-") > 2 else "out": p for p in paths}


def _check(outputs: dict[str, Path]) -> None:
    assert set(outputs) == {"out", "dev", "include", "lib"}
    assert (outputs["include"] / "include" / "curand.h").is_file()
    library = outputs["lib"] / "lib" / "libcurand.so.10.3.10.19"
    info = read_elf_info(library)
    assert info is not None
    runpath = str(info.runpath or info.rpath or "")
    assert "gcc-lib-host-copy/lib" in runpath, runpath  # libstdc++ and libgcc_s found there


def test_structured_derivation_splits_under_the_stand_in(nix: Nix, params: Path) -> None:
    _check(_outputs(nix, params, None))


def test_structured_derivation_splits_under_nixpkgs_genericbuild(nix: Nix, params: Path) -> None:
    real = os.environ.get("CUDASPLIT_NIXPKGS_STDENV", "")
    if not real or not (Path(real) / "pkgs/stdenv/generic/setup.sh").is_file():
        pytest.skip("Nixpkgs' setup.sh is not here (set CUDASPLIT_NIXPKGS_STDENV=DIR: "
                    "tests/data/nix/build-standin.nix says what it holds)")
    _check(_outputs(nix, params, real))
