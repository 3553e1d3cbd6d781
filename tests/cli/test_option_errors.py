"""Option errors look like every other error: ``cudasplit: error: ...``, one line, exit 2,
through click's test runner and through the real entry point alike (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.paths import REPO

CASES = [
    (["split"], "Missing argument"),
    (["split", "x.tar.xz", "-o", "o", "--bogus"], "No such option '--bogus'"),
    (["split", "x.tar.xz", "-o", "o", "--jobs", "abc"], "'abc' is not a valid integer"),
    (["ldd", "/nonexistent/path"], "does not exist"),
    (["ldd", ".", "--map", "bad"], "expected /FROM=DIR"),
    (["split", "x.tar.xz"], "give exactly one of --output-dir DIR or --nix"),
    (["nosuch"], "No such command 'nosuch'"),
]


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_one_line_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("cudasplit: error: ") and says in result.stderr
    assert "Usage:" not in result.stderr and result.stdout == ""


def test_real_entry_point_too() -> None:
    done = subprocess.run([sys.executable, "-m", "cudasplit", "split", "--bogus"],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("cudasplit: error: No such option '--bogus'")
    assert done.stderr.count("\n") == 1


def test_help_and_version_still_exit_0() -> None:
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0
    assert CliRunner().invoke(main, ["split", "--help"]).exit_code == 0
