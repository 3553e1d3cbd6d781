"""``nix/package.nix`` and ``flake.nix``: they parse, and evaluate against stubs (no nixpkgs, no
flakes offline) to what the project says: pyproject's dependencies, the shipped setup hook, the
overlay's attribute."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import cudasplit
from tests.nix.nixtools import MODERN, need_nix

ROOT = Path(cudasplit.__file__).resolve().parent.parent
PACKAGE = ROOT / "nix" / "package.nix"
FLAKE = ROOT / "flake.nix"
STANDIN_FLAKE = ROOT / "tests" / "data" / "nix" / "flake-standin"

# buildPythonApplication returns its arguments; callPackage passes lib and python3Packages.
STUBS = r"""
let
  lib = {
    fileset = { toSource = a: a.fileset; unions = l: l; };
    licenses.mit = "mit";
    platforms.linux = [ "x86_64-linux" ];
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  };
  python3Packages = {
    buildPythonApplication = a: a;
    hatchling = "hatchling"; click = "click"; lief = "lief"; pyelftools = "pyelftools";
    zstandard = "zstandard";
  };
  xz = "/nix/store/xz"; zstd = "/nix/store/zstd";
  callPackage = f: extra: import f ({ inherit lib python3Packages xz zstd; } // extra);
  pkgs = { inherit callPackage; };
in
"""


def _need_nix() -> None:
    need_nix()


def _eval(expr: str, tmp_path: Path) -> object:
    path = tmp_path / "eval.nix"
    path.write_text(STUBS + expr)
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("path", [PACKAGE, FLAKE], ids=["package.nix", "flake.nix"])
def test_parses(path: Path) -> None:
    _need_nix()
    done = subprocess.run(["nix-instantiate", "--parse", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_package_matches_pyproject_and_ships_the_hook(tmp_path: Path) -> None:
    _need_nix()
    got = _eval(f"""
      let p = callPackage {PACKAGE} {{ }};
      in {{ inherit (p) pname version dependencies build-system pyproject makeWrapperArgs;
           hook = toString p.setupHook; src = map toString p.src; main = p.meta.mainProgram; }}
    """, tmp_path)
    assert isinstance(got, dict)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = sorted(d.split(">")[0].split("=")[0].strip() for d in project["dependencies"])
    assert sorted(got["dependencies"]) == names
    assert got["version"] == project["version"] and got["pname"] == project["name"]
    assert got["build-system"] == ["hatchling"] and got["pyproject"] is True
    assert Path(got["hook"]).samefile(ROOT / "cudasplit" / "nix" / "setup-hook.sh")
    # The wheel needs the package, its rules and what pyproject reads (readme).
    assert {Path(p).name for p in got["src"]} >= {"pyproject.toml", "README.md", "cudasplit",
                                                  "rules"}
    assert got["main"] == "cudasplit"
    # The decoder binaries, after the builder's own on PATH.
    assert got["makeWrapperArgs"] == ["--suffix", "PATH", ":",
                                      "/nix/store/xz/bin:/nix/store/zstd/bin"]


def test_flake_overlay_and_packages(tmp_path: Path) -> None:
    _need_nix()
    got = _eval(f"""
      let
        flake = import {FLAKE};
        nixpkgs = {{ inherit lib; legacyPackages = {{ x86_64-linux = pkgs;
                                                      aarch64-linux = pkgs; }}; }};
        out = flake.outputs {{ self = out; inherit nixpkgs; }};
        overlaid = out.overlays.default pkgs {{ }};
      in {{
        overlay = overlaid.cudasplit.pname;
        systems = builtins.attrNames out.packages;
        default = out.packages.x86_64-linux.default.pname;
        input = flake.inputs.nixpkgs.url;
      }}
    """, tmp_path)
    assert got == {"overlay": "cudasplit", "systems": ["aarch64-linux", "x86_64-linux"],
                   "default": "cudasplit", "input": "github:NixOS/nixpkgs/nixos-unstable"}


FLAKE_FILES = ("flake.nix", "nix", "cudasplit", "rules", "pyproject.toml", "README.md")


def _flake_check(tmp_path: Path, real_lib: Path | None) -> subprocess.CompletedProcess[str]:
    """``nix flake check`` of a copy of our flake (path:, no git), its nixpkgs input the
    stand-in flake, whose lib is ours or (real_lib) nixpkgs.lib's."""
    need_nix(MODERN, "flakes and lib.fileset")
    copy = tmp_path / "flake"
    copy.mkdir()
    for name in FLAKE_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, copy / name)
    standin = tmp_path / "nixpkgs"
    shutil.copytree(STANDIN_FLAKE, standin)
    for target in (standin / "lib-flake",):
        shutil.copy(STANDIN_FLAKE / "lib.nix", target / "lib.nix")
        shutil.copy(STANDIN_FLAKE.parent / "lib-standin.nix", target / "lib-standin.nix")
    (standin / "lib-flake" / "lib.nix").write_text(
        (STANDIN_FLAKE / "lib.nix").read_text())
    cmd = ["nix", "--extra-experimental-features", "nix-command flakes", "flake", "check",
           "--no-write-lock-file", "--override-input", "nixpkgs", f"path:{standin}",
           "--override-input", "nixpkgs/lib", f"path:{real_lib or standin / 'lib-flake'}",
           f"path:{copy}"]
    env = {**os.environ, "NIX_CONF_DIR": str(tmp_path), "HOME": str(tmp_path)}
    (tmp_path / "nix.conf").write_text("substituters =\nflake-registry =\n")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                          check=False)


def test_flake_check_with_a_stand_in_nixpkgs(tmp_path: Path) -> None:
    done = _flake_check(tmp_path, None)
    assert done.returncode == 0, done.stderr[-3000:]


def test_flake_check_with_the_real_lib(tmp_path: Path) -> None:
    """With nixpkgs.lib's own lib (its lib.fileset, genAttrs, callPackageWith)."""
    real = os.environ.get("CUDASPLIT_NIXPKGS_LIB", "")
    if not real or not (Path(real).parent / "flake.nix").is_file():
        pytest.skip("the real Nixpkgs lib is not here (CUDASPLIT_NIXPKGS_LIB=DIR/lib of a "
                    "nixpkgs.lib checkout)")
    done = _flake_check(tmp_path, Path(real).parent)
    assert done.returncode == 0, done.stderr[-3000:]
