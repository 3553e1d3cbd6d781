"""Problems, warnings and neither (docs/explanation/problems-and-warnings.md), and the
"dropped" summary line saying why."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, split_to_dir
from cudasplit.cli import main
from tests.support.tarutil import TOP, write_archive

ENTRIES = [("file", "lib/libdemo.so.1", b"x"), ("file", "include/demo.h", b"#pragma once\n")]


def _codes(tmp_path: Path, package: str) -> tuple[list[str], list[str]]:
    rules = tmp_path / "rules.toml"
    rules.write_text(f"schema = 1\n\n[package]\n{package}\n")
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)
    report = split_to_dir(archive, tmp_path / "o", SplitOptions(rules_files=(str(rules),),
                                                                 overwrite=True))
    return [p.code for p in report.problems], [w.code for w in report.warnings]


def test_a_declared_output_left_empty_is_a_problem(tmp_path: Path) -> None:
    problems, _ = _codes(tmp_path, 'outputs = ["out", "dev", "include", "lib", "samples"]')
    assert problems == ["empty-output"]


@pytest.mark.parametrize("package", [
    'outputs = ["out", "dev", "include", "lib", "samples"]\noptional_outputs = ["samples"]',
    'outputs = ["out", "dev", "include", "lib", "samples"]\n'
    'output_when = [{ output = "samples", platforms = ["linux-sbsa"] }]',
], ids=["optional_outputs", "output_when"])
def test_an_output_the_table_may_leave_empty_is_neither(tmp_path: Path, package: str) -> None:
    assert _codes(tmp_path, package) == ([], [])


def test_dropped_line_says_why(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        *ENTRIES, ("symlink", "lib/evil", "../../../../etc/passwd"),
        ("file", "lib/11/libold.so", b"o"), ("file", "lib/12/libnew.so", b"n")])
    result = CliRunner().invoke(main, ["split", str(archive), "-o", str(tmp_path / "o"),
                                       "--cuda-major", "12", "--skip-unsafe-members"])
    assert result.exit_code == 0, result.stderr
    assert ("dropped  2 members: 1 of another CUDA major, 1 unsafe symlink (see the report)"
            in result.stdout)
    assert "[unsafe-symlink]" in result.stderr
