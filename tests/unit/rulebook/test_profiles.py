"""Profiles as data: the default profile is today's rules; another profile is a directory of its
own with its outputs, variables and the rule keys it needs, all checked when loaded."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from cudasplit import OptionsError, RulesError, SplitOptions
from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.conda import conda_profile, outputs_for
from cudasplit._rulebook import (
    Profile,
    Where,
    available_profiles,
    build_ruleset,
    default_rules_dir,
    load_ruleset,
    ruleset_toml,
)


def test_the_default_profile_is_nixpkgs_outputs_unchanged() -> None:
    ruleset = load_ruleset("cuda_cudart")
    assert ruleset.profile.outputs == OUTPUT_NAMES
    assert ruleset.profile.base_output == "out" and ruleset.profile.follows_targets
    assert ruleset.profile.variables == ()
    assert all(r.relocate == "" and r.link_in is None and r.runpath is None
               for r in ruleset.rules)
    assert "conda-forge" in available_profiles(default_rules_dir())


def test_conda_forge_fills_its_platform_variables() -> None:
    x86 = load_ruleset("cuda_cudart", profile="conda-forge", platform="linux-x86_64")
    assert x86.package.outputs is not None and "cuda-cudart_linux-64" in x86.package.outputs
    rule = next(r for r in x86.rules if r.ref.name == "runtime-libraries")
    assert rule.relocate == "targets/x86_64-linux/" and rule.link_in == "cuda-cudart"
    assert rule.runpath == ("$ORIGIN",) and rule.runpath_tag == "RPATH"
    sbsa = load_ruleset("cuda_cudart", profile="conda-forge", platform="linux-sbsa")
    assert "cuda-cudart_linux-aarch64" in (sbsa.package.outputs or ())
    assert dict(sbsa.profile.variables)["targets_dir"] == "sbsa-linux"
    assert sbsa.profile.base_output is None and not sbsa.profile.follows_targets


def test_tegra_archives_use_their_own_targets_directory() -> None:
    tegra = load_ruleset("cuda_cudart", profile="conda-forge", platform="linux-aarch64")
    assert dict(tegra.profile.variables) == {"target_platform": "linux-aarch64",
                                             "targets_dir": "aarch64-linux"}


@pytest.mark.parametrize(("platform", "message"), [
    (None, "needs the platform"), ("linux-ppc64le", "has no platform 'linux-ppc64le'")])
def test_a_profile_with_platforms_needs_one_of_them(platform: str | None, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        load_ruleset("cuda_cudart", profile="conda-forge", platform=platform)


def test_an_unknown_profile_is_refused_where_options_are_made() -> None:
    with pytest.raises(OptionsError, match="profile must be one of default, conda-forge"):
        SplitOptions(profile="debian")
    with pytest.raises(RulesError, match="unknown profile 'debian'"):
        load_ruleset(profile="debian")


def _conda(rule: str = "", package: str = "") -> list[tuple[str, dict[str, object]]]:
    base = default_rules_dir() / "profiles/conda-forge/default.toml"
    own = tomllib.loads(f'schema = 1\n[package]\noutputs = ["a", "b"]\n{package}\n'
                        f'[[rule]]\nname = "r"\nmatch = ["lib/**"]\noutput = "a"\n{rule}')
    return [("pkg.toml", own), (str(base), tomllib.loads(base.read_text()))]


@pytest.mark.parametrize(("rule", "message"), [
    ('relocate = "../up"', "relocate must be a relative directory"),
    ('relocate = "/abs"', "relocate must be a relative directory"),
    ('link_in = "c"', "link_in names an unknown output 'c'"),
    ('link_under = "targets/"', "link_under needs link_in"),
    ('runpath = ["lib"]', "runpath entry 'lib' must be"),
    ('runpath = ["$ORIGIN:/x"]', "runpath entry"),
    ('runpath = ["$ORIGIN/stubs"]', "stubs directory"),
    ("runpath = []", "at least one entry"),
    ('runpath_tag = "dtrpath"', "runpath_tag must be rpath or runpath"),
    ('every_output = "yes"', "'every_output' must be true or false"),
])
def test_rule_keys_are_checked(rule: str, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        build_ruleset(_conda(rule))


@pytest.mark.parametrize(("package", "message"), [
    ('link_edges = { "a" = ["z"] }', "unknown output 'z'"),
    ('links = [{ output = "a", path = "x", target = "../y" }]', "'target' must be a relative"),
    ('links = [{ output = "q", path = "x", target = "y" }]', "unknown output 'q'"),
])
def test_package_link_keys_are_checked(package: str, message: str) -> None:
    with pytest.raises(RulesError, match=message):
        build_ruleset(_conda(package=package))


def test_outputs_a_package_names_are_known_to_its_rules_only() -> None:
    ruleset = build_ruleset(_conda('link_in = "b"\nrelocate = "targets/t/"'))
    assert ruleset.rules[0].placed_at("lib/x.so") == "targets/t/lib/x.so"
    with pytest.raises(RulesError, match="unknown or missing output 'a'"):
        build_ruleset([_conda()[0]])  # without the profile: Nixpkgs' ten outputs


def test_rules_show_of_a_profile_reads_back_into_the_same_rules() -> None:
    ruleset = load_ruleset("cuda_nvcc", profile="conda-forge", platform="linux-sbsa")
    text = ruleset_toml(ruleset)
    body = text.split("\n", 2)[2]  # after the comments naming the files and variables
    assert "@target" not in body and "cuda-nvcc-dev_linux-aarch64" in body
    again = build_ruleset([("shown.toml", tomllib.loads(text))])
    assert [r.ref.name for r in again.rules] == [r.ref.name for r in ruleset.rules]
    assert again.package.outputs == ruleset.package.outputs
    assert again.profile.name == "conda-forge"


@pytest.mark.parametrize("platform", ["linux-x86_64", "linux-sbsa"])
def test_every_package_file_declares_exactly_its_recipes_outputs(platform: str) -> None:
    """The rules' outputs and the recipes' (the conda metadata) are two views of one list."""
    rules = default_rules_dir()
    profile = conda_profile(rules, "conda-forge", platform)
    for path in sorted((rules / "profiles/conda-forge/packages").glob("*.toml")):
        ruleset = load_ruleset(path.stem, profile="conda-forge", platform=platform)
        declared = ruleset.package.outputs_for(Where("1.0", "13.0", platform, None, None)) or ()
        recipe = {o.name for o in outputs_for(profile.recipes, path.stem, platform)
                  if o.redist != ("*",)}
        assert set(declared) == recipe, path.stem
        for source, targets in ruleset.package.link_edges.items():
            assert {source, *targets} <= set(declared), path.stem


def test_every_recipe_names_the_commit_its_facts_come_from() -> None:
    profile = conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64")
    assert {r.feedstock for r in profile.recipes} >= {
        "conda-forge/cuda-cudart-feedstock", "conda-forge/cuda-nvcc-impl-feedstock",
        "conda-forge/libcublas-feedstock", "conda-forge/cuda-nvrtc-feedstock",
        "conda-forge/cuda-cccl-feedstock", "conda-forge/cuda-cupti-feedstock",
        "conda-forge/cuda-compat-feedstock", "conda-forge/cuda-nvcc-feedstock"}
    assert all(len(r.commit) == 40 for r in profile.recipes)


def test_a_profile_of_ones_own_in_a_rules_dir(tmp_path: Path) -> None:
    """--rules-dir with profiles/<name>/: any distribution's layout is data."""
    rules = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), rules)
    mine = rules / "profiles/flat"
    (mine / "packages").mkdir(parents=True)
    (mine / "default.toml").write_text(
        'schema = 1\n[profile]\nname = "flat"\noutputs = ["all"]\nbase_output = "all"\n'
        '[[rule]]\nname = "everything"\nmatch = ["**"]\noutput = "all"\n')
    ruleset = load_ruleset("cuda_cudart", rules_dir=rules, profile="flat")
    assert ruleset.profile == Profile(name="flat", outputs=("all",), base_output="all")
    assert ruleset.classify("lib/x.so", "file").output == "all"
