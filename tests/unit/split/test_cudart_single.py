"""cuda_cudart is single-output as in Nixpkgs, and a stub is never reachable from ``lib``
(NixOS/nixpkgs#293320) in any output layout; ``closure`` and ``ldd`` flag one that is
(issue 27, item 2). Built from tests/data/trees/packages/cuda_cudart.txt (real layout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit.outputs import closure_of, ldd
from tests.support.builders import have_compiler, tree_from_reference
from tests.support.paths import DATA

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")

LIST = DATA / "trees" / "packages" / "cuda_cudart.txt"
SIX = ("out", "dev", "include", "lib", "static", "stubs")


def _split(tmp_path: Path, options: SplitOptions) -> tuple[Path, object]:
    top = tree_from_reference(LIST, tmp_path / "tree")
    report = split_to_dir(top, tmp_path / "split", options)
    return tmp_path / "split", report


def _driver_stub_links(root: Path) -> list[str]:
    """Links named like a driver library, outside a stubs dir, that resolve into one."""
    found = []
    for path in root.rglob("libcuda.so*"):
        rel = path.relative_to(root)
        if path.is_symlink() and "stubs" not in rel.parts[1:-1] \
                and "stubs" in Path(os.path.realpath(path)).parts:
            found.append(str(rel))
    return found


def test_single_output_like_nixpkgs(tmp_path: Path) -> None:
    split, _ = _split(tmp_path, SplitOptions(jobs=1))
    assert sorted(p.name for p in split.iterdir()) == ["out"]
    out = split / "out"
    assert (out / "lib/libcudart_static.a").is_file()  # CMake: static next to shared
    assert os.readlink(out / "lib/stubs/libcuda.so.1") == "libcuda.so"  # Nixpkgs' only link
    assert not (out / "lib/libcuda.so").exists() and not (out / "lib/libcuda.so").is_symlink()
    assert _driver_stub_links(split) == []
    pc = (out / "share/pkgconfig/cuda-12.9.pc").read_text()
    assert f"libdir={out}/lib/stubs" in pc and "cudaroot" not in pc
    closure = closure_of(split)
    assert not [w for w in closure.warnings if w.category == "stub-link"]
    for one in ldd(out / "lib", system=False):
        assert "stub-reachable" not in one.flags, one.path


@pytest.mark.parametrize("outputs", [SIX, ("out", "lib"), ("out", "lib", "stubs"), ("out",)])
def test_no_layout_puts_a_stub_next_to_lib(tmp_path: Path, outputs: tuple[str, ...]) -> None:
    split, _ = _split(tmp_path, SplitOptions(jobs=1, outputs=outputs))
    assert _driver_stub_links(split) == []
    lib = split / ("lib" if "lib" in outputs else "out") / "lib"
    assert [p.name for p in lib.glob("libcuda.so*")] == []
    for one in ldd(lib, system=False):
        assert "stub-reachable" not in one.flags and "stub-shadows-driver" not in one.flags


def test_a_rules_file_asking_for_the_293320_link_is_refused(tmp_path: Path) -> None:
    """Even when a rules file asks for lib/libcuda.so -> stubs/libcuda.so, it is created only
    in a dedicated stubs output; elsewhere the report says why it is missing."""
    extra = tmp_path / "extra.toml"
    extra.write_text('schema = 1\n[package]\nstub_links = { "lib/libcuda.so" = '
                     '"stubs/libcuda.so" }\n')
    split, report = _split(tmp_path / "a", SplitOptions(jobs=1, rules_files=(str(extra),)))
    assert _driver_stub_links(split) == []
    assert [w.code for w in report.warnings if w.code == "stub-link-skipped"]  # type: ignore[attr-defined]
    split, report = _split(tmp_path / "b", SplitOptions(jobs=1, rules_files=(str(extra),),
                                                        outputs=SIX))
    assert os.readlink(split / "stubs/lib/libcuda.so") == "stubs/libcuda.so"
    assert not (split / "lib/lib/libcuda.so").is_symlink()


def test_closure_and_ldd_flag_a_stub_reachable_from_lib(tmp_path: Path) -> None:
    """What a path-based single-output split leaves (#293320): flagged by both."""
    split, _ = _split(tmp_path, SplitOptions(jobs=1))
    lib = split / "out" / "lib"
    os.symlink("stubs/libcuda.so", lib / "libcuda.so")
    warnings = [w for w in closure_of(split).warnings if w.category == "stub-link"]
    assert [(w.output, w.holder, w.example) for w in warnings] == [
        ("out", "out", "lib/libcuda.so")]
    cudart = next(lib.glob("libcudart.so.12.*"))
    [view] = ldd(cudart, system=False)
    assert "stub-reachable" in view.flags  # its RUNPATH ($ORIGIN) holds the stub by name


def test_ldd_cli_prints_and_fails_on_a_reachable_stub(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cudasplit.cli import main

    split, _ = _split(tmp_path, SplitOptions(jobs=1))
    os.symlink("stubs/libcuda.so", split / "out/lib/libcuda.so")
    done = CliRunner().invoke(main, ["ldd", str(split / "out/lib"), "--no-system"])
    assert done.exit_code == 1 and "!stub-reachable" in done.output
    closure = CliRunner().invoke(main, ["closure", str(split)])
    assert "out reaches stub-link (out:lib/libcuda.so)" in closure.output


@pytest.mark.parametrize("stub_link", [False, True], ids=["as-shipped", "with-293320-link"])
def test_closure_and_split_closure_agree_under_strict(tmp_path: Path, stub_link: bool) -> None:
    """A single-output package reaching its own static archives and stubs is what it is
    (Nixpkgs: expected): no warning, exit 0 from both commands. A stub link is a warning, and
    ``--strict`` exits 1 from both (``split --closure --strict`` used to exit 0)."""
    from click.testing import CliRunner

    from cudasplit.cli import main

    top = tree_from_reference(LIST, tmp_path / "tree")
    if stub_link:  # what a path-based split leaves, shipped inside the archive
        os.symlink("stubs/libcuda.so", top / "lib/libcuda.so")
    split = CliRunner().invoke(main, ["split", str(top), "-o", str(tmp_path / "s"), "-q",
                                      "--closure", "--strict"])
    closure = CliRunner().invoke(main, ["closure", str(tmp_path / "s"), "--strict"])
    warned = [line for line in closure.stderr.splitlines() if "[closure-reach]" in line]
    assert warned == (["cudasplit: warning: out reaches stub-link (out:lib/libcuda.so) via out "
                       "[closure-reach]"] if stub_link else [])
    assert [line for line in split.stderr.splitlines() if "[closure-reach]" in line] == warned
    assert "warning" not in closure.stdout + split.stdout  # the tables alone
    assert closure.exit_code == split.exit_code == (1 if stub_link else 0), split.output
    report = closure_of(tmp_path / "s")
    assert report.sizes["out"].holds.keys() >= {"static", "stubs"}  # held, not warned about
