"""Issue 24, bad input round three: the archive never influences what runs, and a member that
tries to leave the output fails the run.

* An archive's own ``nix-support/`` (``setup-hook``, ``propagated-build-inputs``) is data: it is
  never placed in any output's ``nix-support/`` (stdenv would source it in every dependent's
  build); the run reports an ``archive-nix-support`` problem naming the member.
* A symlink whose target is absolute or climbs out of the package root fails the run (exit 2,
  nothing promoted) unless ``--skip-unsafe-members`` / ``skip_unsafe_members=True``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, UnsafeMemberError, inspect, split_nix, split_to_dir
from cudasplit.cli import main
from tests.support.tarutil import TOP, write_archive

HOOK = b"echo pwned > /tmp/pwned\n"
EVIL_INPUTS = b"/nix/store/00000000000000000000000000000000-evil\n"


def _nix_support_archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/libx.so.1", b"x"),
        ("file", "nix-support/setup-hook", HOOK),
        ("file", "nix-support/propagated-build-inputs", EVIL_INPUTS),
        ("symlink", "nix-support/propagated-native-build-inputs", "../lib/libx.so.1"),
        ("hardlink", "nix-support/setup-hook-2", "lib/libx.so.1"),
    ])


def _archive_bytes_anywhere_in_nix_support(root: Path) -> list[str]:
    """Every file under some ``nix-support/`` directory that holds the archive's bytes or is a
    link the archive made there."""
    bad = []
    for dirpath, _dirs, files in os.walk(root):
        if Path(dirpath).name != "nix-support":
            continue
        for name in files:
            path = Path(dirpath, name)
            if path.is_symlink() or path.read_bytes() in (HOOK, EVIL_INPUTS, b"x"):
                bad.append(str(path.relative_to(root)))
            if name == "propagated-native-build-inputs" or name == "setup-hook-2":
                bad.append(str(path.relative_to(root)))
    return bad


@pytest.mark.parametrize("nix_markers", [True, False])
def test_archive_nix_support_is_never_placed_in_an_output(tmp_path: Path,
                                                          nix_markers: bool) -> None:
    archive = _nix_support_archive(tmp_path)
    out = tmp_path / "out"
    report = split_to_dir(archive, out, SplitOptions(patch=False, nix_markers=nix_markers))
    assert _archive_bytes_anywhere_in_nix_support(out) == []
    flagged = sorted(p.path for p in report.problems if p.code == "archive-nix-support")
    assert flagged == ["nix-support/propagated-build-inputs",
                       "nix-support/propagated-native-build-inputs",
                       "nix-support/setup-hook", "nix-support/setup-hook-2"]
    if nix_markers:  # cudasplit's own files are still written, with cudasplit's content
        text = (out / "out/nix-support/propagated-build-inputs").read_text()
        assert "evil" not in text and str(out / "lib") in text
        assert (out / "out/nix-support/include-in-cudatoolkit-root").exists()
    # the member's record says why it went nowhere
    record = next(m for m in report.members if m.path == "nix-support/setup-hook")
    assert record.output is None and "nix-support" in (record.note or "")


def test_archive_nix_support_under_nix(tmp_path: Path) -> None:
    archive = _nix_support_archive(tmp_path)
    roots = {name: tmp_path / "store" / name for name in ("out", "lib", "dev")}
    env = {"outputs": " ".join(roots), **{k: str(v) for k, v in roots.items()}}
    report = split_nix(archive, env, SplitOptions(patch=False, nix_markers=True,
                                                  default_rules=True))
    assert _archive_bytes_anywhere_in_nix_support(tmp_path / "store") == []
    assert {p.path for p in report.problems if p.code == "archive-nix-support"} >= {
        "nix-support/setup-hook", "nix-support/propagated-build-inputs"}
    assert "evil" not in (roots["out"] / "nix-support/propagated-build-inputs").read_text()


def test_archive_nix_support_named_by_the_cli(tmp_path: Path) -> None:
    archive = _nix_support_archive(tmp_path)
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(tmp_path / "out"),
                                       "--nix-support", "--no-patch"])
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stderr.splitlines() if "'nix-support/setup-hook'" in x)
    assert archive.name in line and "[archive-nix-support]" in line
    strict = CliRunner().invoke(main, ["split", str(archive), "-o", str(tmp_path / "out2"),
                                       "--nix-support", "--no-patch", "--strict"])
    assert strict.exit_code == 1 and not (tmp_path / "out2").exists()


def test_nix_support_deeper_in_the_tree_is_ordinary_data(tmp_path: Path) -> None:
    """``lib/nix-support/x`` lands in ``<lib>/lib/nix-support/``, which nothing sources."""
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/nix-support/setup-hook", b"data")])
    report = split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    assert not [p for p in report.problems if p.code == "archive-nix-support"]
    assert (tmp_path / "out/lib/lib/nix-support/setup-hook").read_bytes() == b"data"


# -- members that try to leave the output ---------------------------------------------------

ESCAPES = {
    "relative-dir-then-write-through": [
        ("symlink", "lib/x", "../../etc"), ("file", "lib/x/passwd", b"pwned")],
    "absolute-dir-then-write-through": [
        ("symlink", "lib/x", "/etc"), ("file", "lib/x/passwd", b"pwned")],
    "absolute-file-link": [("file", "lib/libz.so.1", b"z"), ("symlink", "lib/libz.so", "/etc/passwd")],
    "climbing-file-link": [("symlink", "lib/libz.so", "../" * 12 + "etc/passwd")],
    "top-level-link-to-parent": [("symlink", "up", "..")],
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escaping_member_fails_the_run(tmp_path: Path, name: str) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz",
                            [("file", "include/a.h", b"a"), *ESCAPES[name]])
    out = tmp_path / "out"
    with pytest.raises(UnsafeMemberError) as info:
        split_to_dir(archive, out, SplitOptions(patch=False))
    message = str(info.value)
    assert str(archive) in message and "member '" in message and "\n" not in message
    assert "leaves the package root" in message and info.value.exit_code == 2
    assert not out.exists() or list(out.iterdir()) == []
    with pytest.raises(UnsafeMemberError):  # a plan refuses it too
        inspect(archive, SplitOptions(patch=False))


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escaping_member_through_the_cli(tmp_path: Path, name: str) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz",
                            [("file", "include/a.h", b"a"), *ESCAPES[name]])
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(out), "--no-patch"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cudasplit: error: "), result.stderr
    assert archive.name in lines[0] and "--skip-unsafe-members" in lines[0]
    assert not out.exists() or list(out.iterdir()) == []
    skipped = CliRunner().invoke(main, ["split", str(archive), "-o", str(out), "--no-patch",
                                        "--skip-unsafe-members"])
    assert skipped.exit_code == 0, skipped.stderr
    assert "[unsafe-symlink]" in skipped.stderr
    assert (out / "include/include/a.h").read_bytes() == b"a"


def test_skipping_leaves_nothing_outside(tmp_path: Path) -> None:
    outside = tmp_path / "etc"
    outside.mkdir()
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("symlink", "lib/x", str(outside)), ("file", "lib/x/passwd", b"pwned")])
    report = split_to_dir(archive, tmp_path / "out",
                          SplitOptions(patch=False, skip_unsafe_members=True))
    assert list(outside.iterdir()) == []
    assert "unsafe-symlink" in {p.code for p in report.problems}
    assert not (tmp_path / "out/lib/lib/x").is_symlink()


def test_inside_links_are_fine(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/libz.so.1", b"z"), ("symlink", "lib/libz.so", "libz.so.1"),
        ("symlink", "lib/alias", "../lib/libz.so.1")])
    split_to_dir(archive, tmp_path / "out", SplitOptions(patch=False))
    assert os.readlink(tmp_path / "out/lib/lib/libz.so") == "libz.so.1"
