"""The public API: ``__all__`` is honest, nothing prints, errors stay inside the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

import cudasplit
from tests.support.tarutil import write_archive


def test_all_names_exist_once() -> None:
    for name in cudasplit.__all__:
        assert hasattr(cudasplit, name), name
    assert len(set(cudasplit.__all__)) == len(cudasplit.__all__)


def test_public_errors_share_one_root() -> None:
    errors = [getattr(cudasplit, n) for n in cudasplit.__all__ if n.endswith(("Error", "Found"))]
    assert errors and all(issubclass(e, cudasplit.CudasplitError) for e in errors)


def test_api_never_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libx.so.1", b"x"),
                                                     ("symlink", "dangling", "nowhere")])
    cudasplit.inspect(archive)
    cudasplit.split_to_dir(archive, tmp_path / "o", cudasplit.SplitOptions())
    with pytest.raises(cudasplit.CudasplitError):
        cudasplit.split_to_dir(tmp_path / "missing.tar.xz", tmp_path / "o2")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_every_entry_point_applies_the_bomb_limits(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/big.bin", b"\0" * 4096)])
    tight = cudasplit.SplitOptions(max_total_bytes=1024)
    calls = [
        lambda: cudasplit.split_to_dir(archive, tmp_path / "o", tight),
        lambda: cudasplit.inspect(archive, tight),
        lambda: cudasplit.explain(archive, "lib/big.bin", tight),
        lambda: cudasplit.repack_to_dir(archive, tmp_path / "r", tight),
    ]
    for call in calls:
        with pytest.raises(cudasplit.LimitExceededError):
            call()
    assert not (tmp_path / "o").exists()
