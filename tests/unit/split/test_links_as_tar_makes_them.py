"""Issue 24: links as GNU tar makes them, and never placed dangling.

* Of two symlinks with one name the later wins (tar semantics); a symlink is never resolved
  through a symlink that will not be created (a later duplicate, one displaced by a file or a
  directory holding files), so it is never placed dangling.
* A hard link to a member that a later member replaces keeps the earlier bytes; a hard link to
  a hard link is linked (to the same file), not skipped.
* Resolution is linear: every path's result is remembered (chains of any length, no
  recursion); more than 40 links in a row resolve to nothing, as the kernel's ELOOP.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudasplit import Kind, SplitOptions, split_to_dir
from cudasplit._split.linkresolve import MAX_HOPS, LinkResolver
from cudasplit._split.placements import Placed, Placements
from tests.support.tarutil import TOP, write_archive

LIB = "lib/lib"


def _split(tmp_path: Path, entries: list) -> tuple[Path, set[tuple[str, str | None]]]:  # type: ignore[type-arg]
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", entries)
    out = tmp_path / "out"
    report = split_to_dir(archive, out, SplitOptions(patch=False))
    return out, {(p.code, p.path) for p in [*report.problems, *report.warnings]}


def _no_dangling(out: Path) -> None:
    for path in out.rglob("*"):
        if path.is_symlink():
            assert path.exists(), f"{path} -> {os.readlink(path)} dangles"


def test_later_symlink_of_the_same_name_wins(tmp_path: Path) -> None:
    out, codes = _split(tmp_path, [("file", "lib/real.so", b"r"),
                                   ("symlink", "lib/y", "nothere"),
                                   ("symlink", "lib/y", "real.so"),
                                   ("symlink", "lib/x", "y")])
    assert os.readlink(out / LIB / "y") == "real.so"
    assert (out / LIB / "x").read_bytes() == b"r"
    assert ("duplicate-member", "lib/y") in codes
    _no_dangling(out)


def test_later_dangling_duplicate_takes_its_dependents_with_it(tmp_path: Path) -> None:
    out, codes = _split(tmp_path, [("file", "lib/real.so", b"r"),
                                   ("symlink", "lib/y", "real.so"),
                                   ("symlink", "lib/y", "nothere"),
                                   ("symlink", "lib/x", "y")])
    assert not (out / LIB / "y").is_symlink() and not (out / LIB / "x").is_symlink()
    assert {("dangling-symlink", "lib/y"), ("dangling-symlink", "lib/x")} <= codes
    _no_dangling(out)


def test_no_resolution_through_a_displaced_directory_symlink(tmp_path: Path) -> None:
    out, codes = _split(tmp_path, [("file", "lib/d/x.so", b"x"), ("file", "lib/e/y.so", b"y"),
                                   ("symlink", "lib/d", "e"), ("symlink", "lib/l", "d/y.so")])
    assert ("duplicate-member", "lib/d") in codes and ("dangling-symlink", "lib/l") in codes
    assert not (out / LIB / "l").is_symlink()
    _no_dangling(out)


def test_no_resolution_through_a_displaced_file_symlink(tmp_path: Path) -> None:
    out, _ = _split(tmp_path, [("file", "lib/y", b"file wins"), ("file", "lib/z", b"z"),
                                   ("symlink", "lib/y", "z"), ("symlink", "lib/x", "y")])
    assert (out / LIB / "x").read_bytes() == b"file wins"
    _no_dangling(out)


def test_hard_link_keeps_the_bytes_of_the_member_it_named(tmp_path: Path) -> None:
    out, _ = _split(tmp_path, [("file", "lib/a.so", b"first"),
                               ("hardlink", "lib/h.so", "lib/a.so"),
                               ("hardlink", "lib/h2.so", "lib/h.so"),
                               ("file", "lib/a.so", b"second")])
    assert (out / LIB / "a.so").read_bytes() == b"second"
    assert (out / LIB / "h.so").read_bytes() == b"first"
    assert (out / LIB / "h2.so").read_bytes() == b"first"
    assert os.stat(out / LIB / "h.so").st_ino == os.stat(out / LIB / "h2.so").st_ino


def test_hard_link_to_a_hard_link_is_linked(tmp_path: Path) -> None:
    out, codes = _split(tmp_path, [("file", "lib/a.so", b"a"),
                                   ("hardlink", "lib/h.so", "lib/a.so"),
                                   ("hardlink", "lib/h2.so", "lib/h.so"),
                                   ("hardlink", "lib/h3.so", "lib/h2.so")])
    inodes = {os.stat(out / LIB / name).st_ino for name in ("a.so", "h.so", "h2.so", "h3.so")}
    assert len(inodes) == 1
    assert not [c for c in codes if c[0] == "dangling-hardlink"]


def test_hard_link_to_a_later_hard_link_is_still_refused(tmp_path: Path) -> None:
    out, codes = _split(tmp_path, [("hardlink", "lib/h2.so", "lib/h.so"),
                                   ("file", "lib/a.so", b"a"),
                                   ("hardlink", "lib/h.so", "lib/a.so")])
    assert ("dangling-hardlink", "lib/h2.so") in codes
    assert not (out / LIB / "h2.so").exists()


# -- the resolver ------------------------------------------------------------------------------


def _chain(length: int) -> LinkResolver:
    placements = Placements()
    placements.placed["lib/real.so"] = Placed("lib", "lib/real.so", Kind.FILE)
    index = {f"lib/l{k}": (f"l{k + 1}" if k < length - 1 else "real.so")
             for k in range(length)}
    return LinkResolver(placements, index)


@pytest.mark.parametrize(("length", "resolves"), [(1, True), (MAX_HOPS, True),
                                                  (MAX_HOPS + 1, False), (50_000, False)])
def test_chain_length_limit(length: int, resolves: bool) -> None:
    """``l0`` needs ``length`` links (the kernel follows at most 40)."""
    resolver = _chain(length)
    assert (resolver.resolve("lib/l0") is not None) is resolves
    # every link within 40 of the file resolves, whatever was asked first
    assert resolver.resolve(f"lib/l{length - 1}") is not None
    assert resolver.resolve(f"lib/l{max(0, length - MAX_HOPS)}") is not None


def test_loops_resolve_to_nothing() -> None:
    resolver = LinkResolver(Placements(), {"a": "b", "b": "c", "c": "a", "d": "a"})
    assert [resolver.resolve(p) for p in "abcd"] == [None, None, None, None]
