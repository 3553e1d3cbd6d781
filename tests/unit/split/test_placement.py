"""The sinks' placement guards (cudasplit/sinks/_placement.py) and the all-or-nothing renames
(cudasplit/sinks/_promote.py), each on its own, without a split around them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from cudasplit._sinks import placement, promote
from cudasplit._sinks import staging as sinks_staging
from cudasplit.errors import OutputError


def _guard(*, check_parents: bool = True) -> placement.PlacementGuard:
    return placement.PlacementGuard(lambda path: path, check_parents=check_parents)


@pytest.mark.parametrize("dest", ["", "/etc/passwd", "a/../../x", "a//b", "./a", "a\x00b"])
def test_new_refuses_paths_outside_the_root(tmp_path: Path, dest: str) -> None:
    with pytest.raises(OutputError, match="outside the output root"):
        _guard().new(tmp_path, dest)


def test_new_makes_parents_and_replaces_an_earlier_member(tmp_path: Path) -> None:
    path = _guard().new(tmp_path, "lib/libx.so")
    assert path == tmp_path / "lib/libx.so" and path.parent.is_dir()
    path.write_text("first")
    os.symlink("/etc/passwd", tmp_path / "lib/link")
    assert not (again := _guard().new(tmp_path, "lib/libx.so")).exists() and again == path
    assert not os.path.lexists(_guard().new(tmp_path, "lib/link"))  # unlinked, not followed


def test_new_refuses_file_and_directory_of_one_name(tmp_path: Path) -> None:
    _guard().new(tmp_path, "lib/a").write_text("a file")
    with pytest.raises(OutputError, match="parent directory is a file"):
        _guard().new(tmp_path, "lib/a/b")
    _guard().new(tmp_path, "inc/dir/x").write_text("x")
    with pytest.raises(OutputError, match="is a directory holding earlier members"):
        _guard().new(tmp_path, "inc/dir")


def test_symlinked_parents_are_refused_once_checked(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "lib")
    guard = _guard(check_parents=False)
    assert guard.existing(root, "lib/x") == root / "lib/x"  # a fresh stage: not checked yet
    guard.saw_symlink()
    for place in (guard.existing, guard.new):
        with pytest.raises(OutputError, match="refusing to write through the symlink"):
            place(root, "lib/x")
    assert not any(outside.iterdir())


def test_check_roots(tmp_path: Path) -> None:
    final = {"lib": tmp_path / "lib", "dev": tmp_path / "dev"}
    placement.check_roots(final, [], staged=True, overwrite=False)  # nothing there yet
    (tmp_path / "lib").mkdir()
    placement.check_roots(final, [], staged=True, overwrite=False)  # an empty directory is fine
    (tmp_path / "lib/old").write_text("old")
    with pytest.raises(OutputError, match="already exists"):
        placement.check_roots(final, [], staged=True, overwrite=False)
    with pytest.raises(OutputError, match="already contains files"):
        placement.check_roots(final, [], staged=False, overwrite=False)
    placement.check_roots(final, ["lib"], staged=False, overwrite=False)  # written by this run
    placement.check_roots(final, [], staged=True, overwrite=True)


def test_translate_names_the_path_and_the_reason(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"/x: cannot write \(disk full\)"), \
            placement.translate(tmp_path / "x"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _staged(tmp_path: Path, outputs: dict[str, str]) -> tuple[Path, dict[str, Path]]:
    staging = tmp_path / ".cudasplit-staging-test"
    staging.mkdir()
    for output, text in outputs.items():
        (staging / output).mkdir(parents=True)
        (staging / output / "new").write_text(text)
    return staging, {name: tmp_path / "out" / name for name in ("lib", "dev", "doc")}


def test_promotion_moves_old_aside_new_in_and_discards(tmp_path: Path) -> None:
    staging, final = _staged(tmp_path, {"lib": "new lib"})
    (final["doc"]).mkdir(parents=True)
    (final["doc"] / "old").write_text("old doc")
    promotion = promote.Promotion(staging, final)
    promotion.move_aside()
    assert (staging / sinks_staging.PREVIOUS_DIR / "doc" / "old").exists() and not final["doc"].exists()
    promotion.move_in("lib")
    promotion.discard()
    assert (final["lib"] / "new").read_text() == "new lib"
    assert not staging.exists() and not final["doc"].exists()


def test_promotion_rolls_back_to_the_old_outputs(tmp_path: Path) -> None:
    staging, final = _staged(tmp_path, {"lib": "new lib"})
    final["lib"].mkdir(parents=True)
    (final["lib"] / "old").write_text("old lib")
    promotion = promote.Promotion(staging, final)
    promotion.move_aside()
    promotion.move_in("lib")
    assert promotion.roll_back()
    assert sorted(p.name for p in final["lib"].iterdir()) == ["old"]
    assert (staging / "lib" / "new").exists()


def test_promotion_says_when_an_old_output_cannot_go_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging, final = _staged(tmp_path, {})
    final["dev"].mkdir(parents=True)
    promotion = promote.Promotion(staging, final)
    promotion.move_aside()
    real = os.rename

    def rename(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == final["dev"]:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real(src, dst)
    monkeypatch.setattr(os, "rename", rename)
    assert not promotion.roll_back()
    assert (staging / sinks_staging.PREVIOUS_DIR / "dev").is_dir()
