"""Every package of the manifests Nixpkgs' CUDA 13.4 sets use has rules (or a documented reason
not to), and a package without rules is never split silently (issue 27, item 1).

Manifests: tests/data/manifests/ (NVIDIA's redistrib 12.9.2, 13.0.3, 13.3.1, 13.4.2, cuDNN 9.27.0).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_nix, split_to_dir
from cudasplit._split.prepare import no_rules_reason
from cudasplit.errors import ProblemsFound, RulesError
from cudasplit.releases import load_manifest
from tests.support.builders import tree_from_reference
from tests.support.paths import REPO

ROOT = REPO
MANIFESTS = ROOT / "tests" / "data" / "manifests"
COVERED = ("redistrib_12.9.2.json", "redistrib_13.0.3.json", "redistrib_13.3.1.json",
           "redistrib_13.4.2.json", "cudnn_redistrib_9.27.0.json")
RULES = {p.stem for p in (ROOT / "rules" / "packages").glob("*.toml")}
NO_RULES = tomllib.loads((ROOT / "rules" / "no-rules.toml").read_text())["packages"]


@pytest.mark.parametrize("name", COVERED)
def test_every_manifest_package_has_rules_or_a_reason(name: str) -> None:
    manifest = load_manifest(MANIFESTS / name)
    missing = [p.pname for p in manifest.packages
               if p.pname not in RULES and p.pname not in NO_RULES]
    assert missing == [], f"{name}: no rules/packages/<pname>.toml and no rules/no-rules.toml entry"


def test_no_rules_entries_are_real_and_explained() -> None:
    """An entry of no-rules.toml has a reason, names a package of a covered manifest, and is
    not also a rules file (one or the other)."""
    seen = {p.pname for n in COVERED for p in load_manifest(MANIFESTS / n).packages}
    for pname, entry in NO_RULES.items():
        assert pname not in RULES, pname
        assert pname in seen, pname
        assert no_rules_reason(pname) == entry["reason"] and len(entry["reason"]) > 20


def test_the_new_names_of_13_3_and_cudnn_9_27_have_rules() -> None:
    assert {"cccl", "cudnn_jit"} <= RULES
    assert "cccl" in {p.pname for p in load_manifest(MANIFESTS / "redistrib_13.4.2.json").packages}


def _tree(tmp_path: Path, top: str, paths: list[str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{kind} {top}/{path}\n" for kind, path in
                               (p.split(" ", 1) for p in paths)))
    return tree_from_reference(listing, tmp_path / "tree")


CCCL = ["text LICENSE", "header include/nv/target", "header include/cccl/nv/target",
        "header include/cccl/thrust/version.h", "text lib/cmake/cccl/cccl-config.cmake"]


def test_cccl_13_3_gets_cccl_rules_without_a_warning(tmp_path: Path) -> None:
    """The nixpkgs#528773 layout: include/nv dropped, include/cccl/* un-nested with a
    include/cccl -> . link, CMake files next to the headers in out."""
    top = _tree(tmp_path, "cccl-linux-x86_64-13.3.4.3.1-archive", CCCL)
    (top / "include/nv/target").write_text("// stale\n")
    report = split_to_dir(top, tmp_path / "split", SplitOptions(strict=True))
    out = tmp_path / "split/out"
    assert not [w for w in report.warnings if w.code == "no-package-rules"]
    assert "stale" not in (out / "include/nv/target").read_text()
    assert (out / "include/thrust/version.h").is_file()
    assert os.readlink(out / "include/cccl") == "."
    assert (out / "lib/cmake/cccl/cccl-config.cmake").is_file()
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == ["out"]


def _unknown(tmp_path: Path) -> Path:
    return _tree(tmp_path, "cuda_newthing-linux-x86_64-13.4.1-archive",
                 ["text LICENSE", "header include/newthing.h"])


def test_a_pname_without_rules_warns(tmp_path: Path) -> None:
    report = split_to_dir(_unknown(tmp_path), tmp_path / "split", SplitOptions())
    warned = [w for w in report.warnings if w.code == "no-package-rules"]
    assert len(warned) == 1 and "cuda_newthing.toml" in warned[0].message
    # Chosen on purpose: no warning.
    chosen = split_to_dir(_unknown(tmp_path / "b"), tmp_path / "b/split",
                          SplitOptions(default_rules=True))
    assert not [w for w in chosen.warnings if w.code == "no-package-rules"]


def test_a_pname_without_rules_fails_strict_and_nix(tmp_path: Path) -> None:
    with pytest.raises(ProblemsFound, match=r"no rules/packages/cuda_newthing\.toml"):
        split_to_dir(_unknown(tmp_path), tmp_path / "split", SplitOptions(strict=True))
    top = _unknown(tmp_path / "n")
    env = {"outputs": "out dev", "out": str(tmp_path / "n/out"), "dev": str(tmp_path / "n/dev")}
    with pytest.raises(RulesError, match=r"cuda_newthing.*no rules/packages/cuda_newthing.toml"):
        split_nix(top, env, SplitOptions(patch=False))
    assert not (tmp_path / "n/out").exists() and not (tmp_path / "n/dev").exists()


def test_a_documented_pname_says_why(tmp_path: Path) -> None:
    top = _tree(tmp_path, "driver_assistant-linux-x86_64-13.3.1-archive", ["text LICENSE"])
    report = split_to_dir(top, tmp_path / "split", SplitOptions())
    [warned] = [w for w in report.warnings if w.code == "no-package-rules"]
    assert "no-rules.toml" in warned.message and "installer" in warned.message
