"""What stdenv does after cudasplit's install phase: the README's installPhase example built by
the stand-in's ``stdenv.mkDerivation`` (tests/data/nix/build-standin.nix), which sources
stdenv's default setup hooks as Nixpkgs does (after the derivation's own, or before with
``stdenvHooksFirst``) and runs their fixup: multiple-outputs' output variables and moves
(``_multioutDevs`` puts every ``include/`` into ``outputInclude``, which defaults to
``$outputDev``), move-docs, move-lib64, strip, patchELF, audit-tmpdir, no-broken-symlinks.

Every output must keep what cudasplit put there, and the ``.pc`` files' directories exist.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.nix import test_nix
from tests.nix.standin import build, write_params
from tests.nix.test_nix import CHECKOUT as ROOT
from tests.nix.test_nix import Nix
from tests.support.builders import build_redist_tree, write_tarball

nix = test_nix.nix

pytestmark = pytest.mark.nix

README = ROOT / "README.md"
OUTPUTS = ("out", "dev", "include", "lib", "static", "stubs")


def readme_example() -> str:
    """The ```nix block of the README's installPhase section, as a function of the stand-in."""
    text = README.read_text()
    section = text.split("### In a Nix builder's installPhase", 1)[1]
    block = re.search(r"```nix\n(.*?)```", section, re.S)
    assert block is not None, "the README lost its installPhase example"
    # The libraries the example names, as the stand-in's derivations.
    # The report goes into out, so the test can hold every member to where the split put it.
    body = block.group(1).rstrip().removesuffix("}") + (
        '  cudasplitReport = builtins.placeholder "out" + "/cudasplit-report.json";\n}\n')
    return ("{ lib, stdenv, fetchurl, cudasplit, runCommand, ... }:\n"
            'let cuda_nvrtc = runCommand "cuda_nvrtc" { } "mkdir -p $out/lib"; in\n' + body)


@pytest.fixture(scope="module")
def readme_build(nix: Nix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's example and a tarball for its URL's file name (the demo layout under the
    libcublas name: headers, libraries, static archives, stubs, pkg-config, CMake, docs)."""
    root = tmp_path_factory.mktemp("readme")
    url = re.search(r'url = "[^"]*/([^"/]+)"', readme_example())
    assert url is not None
    top = build_redist_tree(
        root / "tree", pname="libcublas", version="12.9.1.4", with_bin=False,
        with_hardlink=False, with_dir_symlink=False, with_samples=False, with_python=False,
        with_host_target=False, with_src=False, with_nvvm=False, with_lib64=True, strip=True)
    (root / "dist").mkdir()
    tarball = write_tarball(top, root / "dist", "xz")
    (root / "example.nix").write_text(readme_example())
    return write_params(root / "params.json", nix, {url.group(1): str(tarball)})


def _build_outputs(nix: Nix, params: Path, hooks_first: bool | None) -> dict[str, Path]:
    """``hooks_first`` None: Nixpkgs' own genericBuild (``CUDASPLIT_NIXPKGS_STDENV``)."""
    args = {"expr": str(params.parent / "example.nix"),
            "stdenvHooksFirst": "true" if hooks_first else "false"}
    if hooks_first is None:
        real = os.environ.get("CUDASPLIT_NIXPKGS_STDENV", "")
        if not real or not (Path(real) / "pkgs/stdenv/generic/setup.sh").is_file():
            pytest.skip("Nixpkgs' setup.sh is not here (set CUDASPLIT_NIXPKGS_STDENV=DIR: "
                        "tests/data/nix/build-standin.nix says what it holds)")
        args["realStdenv"] = real
    done = build(nix, params, ["all"], args=args)
    assert done.returncode == 0, done.stderr[-4000:]
    paths = [Path(p) for p in done.stdout.split()]
    by_name = {p.name.rsplit("-", 1)[1] if p.name.count("-") > 2 else "out": p for p in paths}
    assert set(by_name) == set(OUTPUTS), paths
    return by_name


@pytest.mark.parametrize("hooks_first", [False, True, None],
                         ids=["nixpkgs-order", "stdenv-first", "nixpkgs-genericbuild"])
def test_readme_example_keeps_the_split_after_stdenvs_fixup(
        nix: Nix, readme_build: Path, hooks_first: bool | None) -> None:
    o = _build_outputs(nix, readme_build, hooks_first)
    report = json.loads((o["out"] / "cudasplit-report.json").read_text())
    placed = [m for m in report["members"] if m["output"] and m["kind"] != "dir"]
    assert placed
    for member in placed:  # every file and link is still where the report says
        where = o[member["output"]] / member["dest"]
        # Nixpkgs' compress-man-pages.sh (not modelled by the stand-in) gzips man pages in place.
        gzipped = hooks_first is None and "share/man/" in member["dest"]
        assert os.path.lexists(where) or (gzipped and os.path.lexists(f"{where}.gz")), member
    headers = sorted((o["include"] / "include").rglob("*.h"))
    assert headers, "the include output lost its headers"
    assert not (o["dev"] / "include").exists(), "headers moved into dev"
    assert (o["lib"] / "lib").is_dir() and not (o["dev"] / "lib/libcublas.so").exists()
    assert sorted((o["static"] / "lib").glob("*.a"))
    assert (o["stubs"] / "lib/stubs").is_dir()
    pcs = sorted(o["dev"].rglob("*.pc"))
    assert pcs, "no .pc file in dev"
    for pc in pcs:
        for key, value in re.findall(r"^(\w+dir)=(\S+)$", pc.read_text(), re.M):
            if value.startswith("/nix/store/"):
                assert Path(value).is_dir(), f"{pc.name}: {key}={value} does not exist"
    # dev propagates what cudasplit said (include, lib, static, stubs), and stdenv's
    # _multioutPropagateDev added nothing (no bin output here either way).
    words = (o["dev"] / "nix-support/propagated-build-inputs").read_text().split()
    assert str(o["include"]) in words and str(o["lib"]) in words
    assert len(words) == len(set(words))
