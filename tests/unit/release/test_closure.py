"""Closure report: references between outputs, sizes, and what lib/out drag along.

On a split directory (gcc-built fixtures), on hand-made trees for each kind of reference, and in
a real ``nix-build`` where it must agree with ``nix-store -q --references``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, split_to_dir
from cudasplit._release.closure import Reference, closure_of_dir, closure_of_roots
from cudasplit.cli import main
from tests.nix.test_nix import (  # noqa: F401  (fixtures)
    OUTPUTS,
    Nix,
    _direct_script,
    _outputs,
    nix,
    nix_tarball,
)
from tests.support.builders import build_redist_tree


@pytest.fixture(scope="module")
def default_split(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("closure")
    top = build_redist_tree(root / "tree", with_cross_symlinks=True)
    split_to_dir(top, root / "split", SplitOptions(nix_markers=True))
    return root / "split"


def _targets(refs: tuple[Reference, ...], source: str) -> set[str]:
    return {r.target for r in refs if r.source == source}


def test_default_split_lib_reaches_no_static_or_stubs(default_split: Path) -> None:
    report = closure_of_dir(default_split)
    assert "static" not in report.referenced("lib") and "stubs" not in report.referenced("lib")
    assert report.warnings == ()
    # What does reference what, and how: RUNPATH from bin, pkg-config from dev, and out's
    # propagation list (which names every other output).
    assert {(r.via, r.target) for r in report.references if r.source == "bin"} == \
        {("runpath", "lib")}
    dev = {(r.via, r.target) for r in report.references if r.source == "dev"}
    assert {("pkgconfig", "lib"), ("pkgconfig", "include")} <= dev
    # dev may propagate outputs too (Nixpkgs' propagatedBuildOutputs), never out.
    assert all(via in ("pkgconfig", "nix-support") and target != "out" for via, target in dev)
    # out propagates the others (all of them, or the propagated ones where a package table
    # narrows it): at least lib and include.
    assert {"lib", "include"} <= report.referenced("out") <= set(report.roots) - {"out"}
    assert all(not report.referenced(n) for n in ("lib", "static", "stubs", "include"))
    sizes = report.sizes
    assert sizes["lib"].bytes == sum(
        (p.lstat().st_size if not p.is_symlink() else len(os.readlink(p)))
        for p in (default_split / "lib").rglob("*") if not p.is_dir() or p.is_symlink())
    assert report.closure_bytes("bin") == sizes["bin"].bytes + sizes["lib"].bytes


def _naive_split(default_split: Path, tmp_path: Path, absolute: bool) -> Path:
    """The default split plus what a path-based split leaves: a ``.a`` link in lib."""
    copy = tmp_path / "split"
    shutil.copytree(default_split, copy, symlinks=True)
    target = (f"{copy}/static/lib/libdemo_static.a" if absolute
              else "../../static/lib/libdemo_static.a")
    os.symlink(target, copy / "lib/lib/libdemo_static.a")
    return copy


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_static_link_in_lib_is_flagged(default_split: Path, tmp_path: Path,
                                       absolute: bool) -> None:
    report = closure_of_dir(_naive_split(default_split, tmp_path, absolute))
    assert Reference("lib", "static", "symlink", "lib/libdemo_static.a") in report.references
    flagged = {(w.output, w.category, w.holder) for w in report.warnings}
    assert ("lib", "static", "static") in flagged  # lib's closure holds the static output
    assert ("lib", "static", "lib") in flagged     # and lib itself holds a .a name
    result = CliRunner().invoke(main, ["closure", str(tmp_path / "split"), "--strict"])
    assert result.exit_code == 1
    assert "cudasplit: warning: lib reaches static (static:lib/libdemo_static.a) via lib -> " \
        "static [closure-reach]" in result.stderr.splitlines()
    assert "warning" not in result.stdout


def test_each_kind_of_reference(tmp_path: Path) -> None:
    roots = {n: tmp_path / n for n in ("out", "lib", "libextra", "stubs", "doc", "bin")}
    for path in roots.values():
        path.mkdir()
    (roots["lib"] / "notes.txt").write_text(f"see {roots['doc']}/share/doc/x.html\n")
    # A longer name that starts with another root's path is not a reference to it.
    (roots["out"] / "x.txt").write_text(f"{roots['libextra']}/y and {roots['out']}/self\n")
    (roots["bin"] / "nvcc").write_text("#!/bin/sh\n")
    (roots["lib"] / "x.pc").write_text(f"libdir={roots['stubs']}/lib\n")
    os.symlink(f"{roots['bin']}/nvcc", roots["stubs"] / "tool")
    (roots["doc"] / "share").mkdir()
    os.symlink("../../bin", roots["doc"] / "share/bin")  # a directory link, not followed
    report = closure_of_roots({k: str(v) for k, v in roots.items()})
    got = {(r.source, r.target, r.via, r.path) for r in report.references}
    assert got == {
        ("lib", "doc", "text", "notes.txt"),
        ("lib", "stubs", "pkgconfig", "x.pc"),
        ("out", "libextra", "text", "x.txt"),
        ("stubs", "bin", "symlink", "tool"),
        ("doc", "bin", "symlink", "share/bin"),
    }
    warned = {(w.output, w.category, w.chain) for w in report.warnings}
    assert ("lib", "doc", ("lib", "doc")) in warned
    # Two chains of length 3 reach bin's nvcc; the report names one of them.
    assert ("lib", "compiler", ("lib", "doc", "bin")) in warned


def test_cli_json(default_split: Path) -> None:
    result = CliRunner().invoke(main, ["closure", str(default_split), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outputs"]["bin"]["references"] == ["lib"]
    assert data["outputs"]["lib"]["references"] == []
    assert data["warnings"] == []


@pytest.mark.nix
def test_agrees_with_nix_store_references(nix: Nix, nix_tarball: Path) -> None:  # noqa: F811
    result = nix.build("cudasplit-test-closure", _direct_script(), src=nix_tarball)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = _outputs(result.stdout)
    report = closure_of_roots({name: str(path) for name, path in outputs.items()})
    for name, path in outputs.items():
        from_nix = set(nix.references(str(path))) - {str(path)}
        ours = {str(outputs[t]) for t in report.referenced(name)} | set(report.external[name])
        assert ours == from_nix, name
    assert not {"static", "stubs"} & report.referenced("lib")
    assert report.warnings == ()
    cli = CliRunner().invoke(main, ["closure", "/", "--json",
                                    *[f"--root={n}={p}" for n, p in outputs.items()]])
    assert cli.exit_code == 0, cli.output
    assert set(json.loads(cli.stdout)["outputs"]) == set(OUTPUTS)


def test_split_closure_option(redist_tree: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["split", str(redist_tree), "-o", str(tmp_path / "s"),
                                       "-q", "--nix-support", "--closure"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.startswith("bin ") and line.endswith("-> lib (runpath)") for line in lines)
    assert not any(line.startswith("warning:") for line in lines)
    assert "[closure-reach]" not in result.stderr
    batch = CliRunner().invoke(main, ["split", str(redist_tree), str(redist_tree), "-o",
                                      str(tmp_path / "b"), "--closure"])
    assert batch.exit_code == 2 and "--closure takes exactly one source" in batch.output


def test_not_a_split_directory(default_split: Path, tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    shutil.copytree(default_split, batch / "cuda_demo-linux-x86_64-12.9.79", symlinks=True)
    result = CliRunner().invoke(main, ["closure", str(batch)])
    assert result.exit_code == 2
    assert "not a split directory" in result.output
    assert "cuda_demo-linux-x86_64-12.9.79 is not an output name" in result.output
    ok = CliRunner().invoke(main, ["closure", str(batch / "cuda_demo-linux-x86_64-12.9.79")])
    assert ok.exit_code == 0, ok.output


def test_closure_columns_fit_long_names_and_count_one_file(tmp_path: Path) -> None:
    """``1 file``, not ``1 files``; a conda package's long name does not push the columns
    out of line (issue 43)."""
    for name, files in (("out", 1), ("lib", 2)):
        for n in range(files):
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / f"f{n}").write_text("x")
    roots = {"out": str(tmp_path / "out"), "cuda-cudart-dev_linux-64": str(tmp_path / "lib")}
    lines = closure_of_roots(roots).text_lines()
    assert [line.split()[0] for line in lines] == ["out", "cuda-cudart-dev_linux-64"]
    assert "      1 file " in lines[0] and "2 files" in lines[1]
    assert len({line.index(" bytes") for line in lines}) == 1  # one column, whatever the name
