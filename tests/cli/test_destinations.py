"""Issue 24: every destination is checked before the first byte is written. An unwritable
``--report`` used to fail after the outputs were promoted, and the retry then failed with
"already exists"; now the run fails first (exit 2, one line), nothing is split, and the retry
with a good path succeeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.tarutil import TOP, write_archive


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x"),
                                                      ("file", "include/x.h", b"h")])


def _unwritable(tmp_path: Path, how: str) -> Path:
    if how == "parent-is-a-file":
        (tmp_path / "afile").write_bytes(b"")
        return tmp_path / "afile" / "report.json"
    if how == "ancestor-is-a-file":
        (tmp_path / "afile").write_bytes(b"")
        return tmp_path / "afile" / "deeper" / "report.json"
    assert how == "proc"  # not writable, even for root
    return Path("/proc/cudasplit-test-report.json")


@pytest.mark.parametrize("how", ["parent-is-a-file", "ancestor-is-a-file", "proc"])
def test_unwritable_report_fails_before_the_split(archive: Path, tmp_path: Path,
                                                  how: str) -> None:
    report = _unwritable(tmp_path, how)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(out), "--no-patch",
                                       "--report", str(report)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the report" in lines[0], result.stderr
    assert "nothing was split" in lines[0]
    assert not out.exists()
    # the retry with a good report path is not refused with "already exists"
    good = tmp_path / "report.json"
    retry = CliRunner().invoke(main, ["split", str(archive), "-o", str(out), "--no-patch",
                                      "--report", str(good)])
    assert retry.exit_code == 0, retry.stderr
    assert good.read_text().startswith("{") and (out / "lib/lib/libx.so.1").exists()


def test_report_inside_the_output_dir_still_works(archive: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(out), "--no-patch",
                                       "--report", str(out / "report.json")])
    assert result.exit_code == 0, result.stderr
    assert (out / "report.json").read_text().startswith("{")


def test_existing_report_is_replaced_not_appended(archive: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text("old\n")
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(tmp_path / "out"),
                                       "--no-patch", "--report", str(report)])
    assert result.exit_code == 0, result.stderr
    assert report.read_text().startswith("{")


def test_failed_split_leaves_no_empty_report(tmp_path: Path) -> None:
    bad = tmp_path / f"{TOP}.tar.xz"
    bad.write_bytes(b"\xfd7zXZ\x00 not really xz")
    report = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["split", str(bad), "-o", str(tmp_path / "out"),
                                       "--report", str(report)])
    assert result.exit_code == 2
    assert not report.exists()


def test_repack_checks_its_report_first(archive: Path, tmp_path: Path) -> None:
    report = _unwritable(tmp_path, "parent-is-a-file")
    out = tmp_path / "packed"
    result = CliRunner().invoke(main, ["repack", str(archive), "-o", str(out), "--no-patch",
                                       "--report", str(report)])
    assert result.exit_code == 2, result.output
    assert "cannot write the report" in result.stderr
    assert not out.exists() or list(out.iterdir()) == []
