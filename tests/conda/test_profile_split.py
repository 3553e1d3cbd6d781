"""The conda-forge profile on a small gcc-built cuda_cudart archive: what the split places
where, the DT_RPATH it writes, the file lists against our model of the feedstock, and the
declared-edge rule for links across packages."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._release.conda import conda_profile, outputs_for
from cudasplit._rulebook import default_rules_dir
from tests.conda.feedstock import Member, install_prefix, select
from tests.conda.synthetic import VERSION, cudart_tarball
from tests.support.builders import dynamic_entries

T = "targets/x86_64-linux"
CONDA = SplitOptions(profile="conda-forge")


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cudart")
    out = base / "out"
    report = split_to_dir(cudart_tarball(base), out, CONDA)
    problems = [p.code for p in report.problems]
    assert problems == [], report.problems
    return out


def _tree(root: Path) -> dict[str, str | None]:
    """path -> link text (None: a file), below ``root``, info/ left out."""
    found: dict[str, str | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if rel.startswith("info"):
                continue
            if path.is_symlink():
                found[rel] = os.readlink(path)
            elif path.is_file():
                found[rel] = None
    return found


def test_files_live_below_targets_and_lib_links_to_them(split: Path) -> None:
    assert _tree(split / "cuda-cudart_linux-64") == {
        f"{T}/lib/libcudart.so.{VERSION}": None,
        f"{T}/lib/libcudart.so.13": f"libcudart.so.{VERSION}"}
    # conda-build makes $PREFIX/lib links relative to the fully resolved file
    resolved = f"../{T}/lib/libcudart.so.{VERSION}"
    assert _tree(split / "cuda-cudart") == {"lib/libcudart.so.13": resolved,
                                            f"lib/libcudart.so.{VERSION}": resolved}
    dev = _tree(split / "cuda-cudart-dev")
    assert dev["lib/libcudart.so"] == resolved
    assert {"lib/pkgconfig/cuda-13.0.pc", "lib/pkgconfig/cudart-13.0.pc"} <= set(dev)
    assert _tree(split / "cuda-cudart-static") == {
        "lib/libcudadevrt.a": f"../{T}/lib/libcudadevrt.a",
        "lib/libcudart_static.a": f"../{T}/lib/libcudart_static.a"}
    assert _tree(split / "cuda-driver-dev") == {
        "lib/stubs/libcuda.so": f"../../{T}/lib/stubs/libcuda.so"}
    target_dev = _tree(split / "cuda-cudart-dev_linux-64")
    # an archive symlink in another package than its target: the declared edge
    assert target_dev[f"{T}/lib/libcudart.so"] == "libcudart.so.13"
    assert f"{T}/include/cooperative_groups/details.h" in target_dev


def test_nothing_unclaimed_is_packaged_and_every_package_has_the_license(split: Path) -> None:
    every = {name: _tree(split / name) for name in os.listdir(split)}
    assert not any("extras" in path for tree in every.values() for path in tree)
    for name in every:
        assert (split / name / "info/licenses/LICENSE").read_text().startswith("stand-in")


def test_libraries_get_dt_rpath_origin_exactly_and_stubs_are_untouched(split: Path) -> None:
    lib = split / "cuda-cudart_linux-64" / T / "lib" / f"libcudart.so.{VERSION}"
    entries = dynamic_entries(lib)
    assert entries.get("RPATH") == ["$ORIGIN"] and "RUNPATH" not in entries
    stub = split / "cuda-driver-dev_linux-64" / T / "lib/stubs/libcuda.so"
    assert "RPATH" not in dynamic_entries(stub) and "RUNPATH" not in dynamic_entries(stub)


def test_the_rpath_survives_strip(split: Path, tmp_path: Path) -> None:
    if shutil.which("strip") is None:
        pytest.skip("strip not installed (binutils)")
    copy = tmp_path / "libcudart.so"
    shutil.copy(split / "cuda-cudart_linux-64" / T / "lib" / f"libcudart.so.{VERSION}", copy)
    subprocess.run(["strip", str(copy)], check=True)
    assert dynamic_entries(copy).get("RPATH") == ["$ORIGIN"]


def test_pkgconfig_names_the_install_prefix(split: Path) -> None:
    placeholder = conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64").placeholder
    text = (split / "cuda-cudart-dev/lib/pkgconfig/cudart-13.0.pc").read_text()
    assert f"cudaroot={placeholder}\n" in text
    assert "libdir=${cudaroot}/targets/x86_64-linux/lib" in text  # NVIDIA's, kept


def test_file_lists_equal_what_the_recipe_selects(split: Path, tmp_path: Path) -> None:
    members = []
    tree = tmp_path / "again"
    cudart_tarball(tree)  # the same archive, read back as members
    top = next((tree / "tree").iterdir())
    for dirpath, _dirs, files in os.walk(top):
        for name in files + [d for d in _dirs if Path(dirpath, d).is_symlink()]:
            path = Path(dirpath, name)
            rel = path.relative_to(top).as_posix()
            members.append(Member(rel, os.readlink(path) if path.is_symlink() else None))
    prefix = tmp_path / "prefix"
    install_prefix("cuda_cudart", members, "linux-x86_64", prefix)
    profile = conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64")
    for output in outputs_for(profile.recipes, "cuda_cudart", "linux-x86_64"):
        if output.redist == ("*",):
            continue
        assert set(_tree(split / output.name)) == select(prefix, output.files), output.name


def test_a_link_into_a_package_without_a_declared_edge_is_skipped(tmp_path: Path) -> None:
    rules = tmp_path / "no-edges.toml"
    rules.write_text("schema = 1\n[package]\nlink_edges = {}\n")
    options = SplitOptions(profile="conda-forge", rules_files=(str(rules),))
    report = split_to_dir(cudart_tarball(tmp_path), tmp_path / "out", options)
    skipped = {p.path for p in report.problems if p.code == "link-edge-undeclared"}
    assert "lib/libcudart.so" in skipped  # its target lies in cuda-cudart_linux-64
    assert not (tmp_path / "out/cuda-cudart-dev_linux-64" / T / "lib/libcudart.so").exists()
    # the rule's own link_in edge needs no declaration
    assert (tmp_path / "out/cuda-cudart/lib/libcudart.so.13").is_symlink()


def test_a_hard_link_is_relocated_like_its_rule_says(tmp_path: Path) -> None:
    from tests.support.tarutil import write_archive

    top = "cuda_cudart-linux-x86_64-13.0.96-archive"
    archive = write_archive(tmp_path / f"{top}.tar.xz", [
        ("file", "include/cuda_runtime.h", b"/* a */\n"),
        ("hardlink", "include/cuda_runtime_api.h", "include/cuda_runtime.h")], top=top)
    split_to_dir(archive, tmp_path / "out", CONDA)
    headers = tmp_path / "out/cuda-cudart-dev_linux-64" / T / "include"
    assert (headers / "cuda_runtime_api.h").read_bytes() == b"/* a */\n"
    assert (headers / "cuda_runtime.h").stat().st_ino == (headers / "cuda_runtime_api.h").stat().st_ino
