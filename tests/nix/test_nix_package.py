"""``nix/package.nix`` and ``flake.nix``: they parse, and evaluate against stubs (no nixpkgs, no
flakes offline) to what the project says: pyproject's dependencies, the shipped setup hook, the
overlay's attribute."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

import cudasplit
from tests.nix.nixtools import need_nix

ROOT = Path(cudasplit.__file__).resolve().parent.parent
PACKAGE = ROOT / "nix" / "package.nix"
FLAKE = ROOT / "flake.nix"

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
  callPackage = f: extra: import f ({ inherit lib python3Packages; } // extra);
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
      in {{ inherit (p) pname version dependencies build-system pyproject;
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
