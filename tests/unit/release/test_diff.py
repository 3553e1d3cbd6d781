"""``cudasplit diff``: 12.9 against 13.0 from real NVIDIA wheels, split directories, tarballs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, inspect, split_to_dir
from cudasplit._release.diff import Snapshot, diff_snapshots, snapshot
from cudasplit._release.sonames import ElfNames
from cudasplit.cli import main
from cudasplit.rules import load_ruleset
from tests.support.releases import release


@pytest.fixture(scope="module")
def release_diff() -> dict[str, object]:
    old, new = release("12.9.1"), release("13.0.2")
    result = CliRunner().invoke(main, [
        "diff", str(old.manifest), str(new.manifest), "--old-tarballs", str(old.tarballs),
        "--new-tarballs", str(new.tarballs), "--json"])
    assert result.exit_code == 1, result.output  # 1: something changed
    data: dict[str, object] = json.loads(result.stdout)
    return data


def _table_or(pname: str, output: str) -> str:
    """``output``, or ``out`` where the package table makes the package single-output."""
    declared = load_ruleset(pname).package.outputs
    return "out" if declared is not None and set(declared) <= {"out"} else output


def _changes(data: dict[str, object], what: str) -> list[dict[str, str]]:
    changes = data["changes"]
    assert isinstance(changes, list)
    return [c for c in changes if c["what"] == what]


@pytest.mark.slow
def test_13_0_moves_crt_headers_out_of_nvcc(release_diff: dict[str, object]) -> None:
    moved = {c["path"]: (c["old"], c["new"]) for c in _changes(release_diff, "package-moved")}
    crt = {p: v for p, v in moved.items() if p.startswith("include/crt/")}
    assert len(crt) >= 20
    # The output inside cuda_crt is the package table's choice (include, or out when the
    # table makes it single-output); the package move is the fact.
    crt_output = _table_or("cuda_crt", "include")
    assert set(crt.values()) == {("cuda_nvcc:out", f"cuda_crt:{crt_output}")}
    assert moved["include/crt/host_defines.h"] == ("cuda_nvcc:out", f"cuda_crt:{crt_output}")
    # NVVM's libdevice left the compiler package for libnvvm (at the same path, or lifted out
    # of nvvm/ by libnvvm's table: then a relocation).
    relocated = {c["path"]: (c["old"], c["new"]) for c in _changes(release_diff, "relocated")}
    libdevice = "nvvm/libdevice/libdevice.10.bc"
    assert moved.get(libdevice) == ("cuda_nvcc:out", "libnvvm:out") or \
        relocated.get(libdevice) == ("cuda_nvcc:out", "libnvvm:out:libdevice/libdevice.10.bc")


@pytest.mark.slow
def test_13_0_cccl_headers_move_under_include_cccl(release_diff: dict[str, object]) -> None:
    """13.0's tarball has include/cccl/thrust/...; 12.9's include/thrust/... . Either the rules
    place both alike (no change reported for the file) or the diff shows one relocation."""
    changes = release_diff["changes"]
    assert isinstance(changes, list)
    about = [c for c in changes if "include/thrust/version.h" in (c["path"], c["new"])]
    if not about:
        # The package rules un-nest include/cccl/: the 13.0 member lands where 12.9's was.
        record = inspect(release("13.0.2").tarball("cuda_cccl")).member(
            "include/cccl/thrust/version.h")
        assert record.dest == "include/thrust/version.h"
        return
    output = _table_or("cuda_cccl", "include")
    assert about == [{"what": "relocated", "package": "cuda_cccl",
                      "path": "include/thrust/version.h", "old": f"cuda_cccl:{output}",
                      "new": f"cuda_cccl:{output}:include/cccl/thrust/version.h"}]
    by_top = {c["path"].split("/")[1] for c in _changes(release_diff, "relocated")}
    assert {"cub", "thrust", "cuda"} <= by_top


@pytest.mark.slow
def test_13_0_packages_outputs_and_sonames(release_diff: dict[str, object]) -> None:
    added = {c["package"] for c in _changes(release_diff, "package-added")}
    assert {"cuda_crt", "libnvvm"} <= added
    outputs = {(c["package"], c["path"]) for c in _changes(release_diff, "output-added")}
    assert ("cuda_crt", _table_or("cuda_crt", "include")) in outputs
    assert ("libnvvm", _table_or("libnvvm", "lib")) in outputs
    assert {(c["path"], c["old"], c["new"]) for c in _changes(release_diff, "soname-moved")} \
        == {("libnvvm.so.4", "cuda_nvcc", "libnvvm")}
    sonames = {(c["package"], c["old"] or c["new"]) for c in
               _changes(release_diff, "soname-removed") + _changes(release_diff, "soname-added")}
    assert {("cuda_cudart", "libcudart.so.12"), ("cuda_cudart", "libcudart.so.13")} <= sonames
    sizes = release_diff["sizes"]
    assert isinstance(sizes, dict)
    crt = sizes["cuda_crt"][_table_or("cuda_crt", "include")]
    assert crt["old"] == 0 < crt["new"]


@pytest.mark.slow
def test_two_tarballs_text(tmp_path: Path) -> None:
    old, new = release("12.9.1"), release("13.0.2")
    result = CliRunner().invoke(main, ["diff", str(old.tarball("cuda_nvcc")),
                                       str(new.tarball("cuda_nvcc"))])
    assert result.exit_code == 1, result.output
    assert "~ package cuda_nvcc 12.9.86 -> 13.0.88" in result.stdout
    assert "member-removed include/crt/ (24 files): cuda_nvcc:out -> -" in result.stdout
    assert "- soname cuda_nvcc: libnvvm.so.4" in result.stdout


def test_split_directories(redist_tree: Path, tmp_path: Path) -> None:
    """The same tree split twice, once with fewer outputs: members moved between outputs."""
    split_to_dir(redist_tree, tmp_path / "a")
    split_to_dir(redist_tree, tmp_path / "b", SplitOptions(outputs=("out", "lib", "dev")))
    same = CliRunner().invoke(main, ["diff", str(tmp_path / "a"), str(tmp_path / "a")])
    assert same.exit_code == 0 and "member" not in same.stdout
    result = CliRunner().invoke(main, ["diff", str(tmp_path / "a"), str(tmp_path / "b"),
                                       "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    moves = {c["path"]: (c["old"], c["new"]) for c in data["changes"]
             if c["what"] == "member-moved"}
    assert moves["include/cuda_demo.h"] == ("split:include", "split:dev")
    assert all(old.split(":")[1] in ("include", "static", "stubs", "bin", "doc", "samples",
                                     "python") for old, _ in moves.values())
    removed = {c["path"] for c in data["changes"] if c["what"] == "output-removed"}
    assert {"include", "static", "stubs"} <= removed


def test_a_tarball_against_its_own_split(redist_tarballs: dict[str, Path],
                                         tmp_path: Path) -> None:
    """One package either way: no package "moved" to ``split``, no version lost; unpatched
    outputs the same size (a symlink counts 0 bytes on both sides); a note says why what a
    split makes (links, rewritten .pc files, patched ELF files) still differs."""
    archive = redist_tarballs["xz"]
    split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    result = CliRunner().invoke(main, ["diff", str(archive), str(tmp_path / "out"), "--json"])
    data = json.loads(result.stdout)
    whats = {c["what"] for c in data["changes"]}
    assert not whats & {"package-added", "package-removed", "package-moved", "version",
                        "output-added", "output-removed", "member-removed", "member-moved"}
    assert set(data["sizes"]) == {"cuda_demo"}
    assert data["notes"] and "one side is a split directory" in data["notes"][0]
    assert "cudasplit: note: one side is a split directory" in result.stderr
    same = {o for o, sizes in data["sizes"]["cuda_demo"].items()
            if sizes["old"] == sizes["new"]}
    assert {"include", "static"} <= same, data["sizes"]
    both = CliRunner().invoke(main, ["diff", str(archive), str(archive), "--json"])
    assert "notes" not in json.loads(both.stdout)


def test_relocation_and_needed_changes_in_memory() -> None:
    old, new = Snapshot("old", {"p": "1"}), Snapshot("new", {"p": "2", "q": "1"})
    old.add("p", "include/cub/a.h", "include", 10)
    old.add("p", "include/gone.h", "include", 1)
    new.add("p", "include/cccl/cub/a.h", "include", 10)
    new.add("q", "include/gone.h", "dev", 1)
    old.elf[("p", "lib/libp.so.1")] = ElfNames("lib/libp.so.1", "libp.so.1", ("libc.so.6",))
    new.elf[("p", "lib/libp.so.2")] = ElfNames("lib/libp.so.2", "libp.so.2",
                                               ("libc.so.6", "libq.so.1"))
    result = diff_snapshots(old, new)
    whats = {(c.what, c.path or c.old or c.new) for c in result.changes}
    assert ("relocated", "include/cub/a.h") in whats
    assert ("package-moved", "include/gone.h") in whats
    assert ("needed-added", "libq.so.1") in whats
    assert _lifted() == ("relocated", "libnvvm", "nvvm/libdevice/x.bc", "nvcc:out",
                         "libnvvm:out:libdevice/x.bc")
    assert ("soname-removed", "libp.so.1") in whats and ("soname-added", "libp.so.2") in whats
    packages = {(c.what, c.package) for c in result.changes}
    assert ("package-added", "q") in packages and ("version", "p") in packages
    assert not any(c.what in ("member-added", "member-removed") for c in result.changes)
    lines = result.text_lines()
    assert "relocated include/cub/ (1 file): p:include -> p:include include/cccl/cub/" in lines


def test_manifest_without_tarballs_is_a_manifest_level_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "redistrib_1.json"
    path.write_text("{}")
    snap = snapshot(path)  # tests/test_diff_manifests.py: the real manifests
    assert snap.versions == {} and not snap.members


def test_dlopen_changes() -> None:
    old, new = Snapshot("old", {"p": "1"}), Snapshot("new", {"p": "2"})
    old.elf[("p", "lib/libp.so")] = ElfNames("lib/libp.so", "libp.so", (), ("libnvrtc.so.12",))
    new.elf[("p", "lib/libp.so")] = ElfNames("lib/libp.so", "libp.so", (), ("libnvrtc.so.13",))
    result = diff_snapshots(old, new)
    assert {(c.what, c.old or c.new) for c in result.of("dlopen-removed") +
            result.of("dlopen-added")} == {("dlopen-removed", "libnvrtc.so.12"),
                                           ("dlopen-added", "libnvrtc.so.13")}
    assert "+ dlopen p: libnvrtc.so.13" in result.text_lines()


def _lifted() -> tuple[str, str, str, str, str]:
    old, new = Snapshot("old", {"nvcc": "1"}), Snapshot("new", {"nvcc": "2", "libnvvm": "1"})
    old.add("nvcc", "nvvm/libdevice/x.bc", "out", 1)
    old.add("nvcc", "LICENSE", "out", 1)
    new.add("libnvvm", "libdevice/x.bc", "out", 1)
    new.add("libnvvm", "doc/LICENSE", "out", 1)  # a lone file name is never a relocation
    changes = diff_snapshots(old, new).changes
    assert {c.what for c in changes if "LICENSE" in c.path} == {"member-removed", "member-added"}
    (c,) = [c for c in changes if c.what == "relocated"]
    return (c.what, c.package, c.path, c.old, c.new)
