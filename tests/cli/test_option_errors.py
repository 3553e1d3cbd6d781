"""Option errors look like every other error: ``cudasplit: error: ...``, one line, exit 2,
through click's test runner and through the real entry point alike (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


# Issue 33 (asked for in 36): an option error names the option as typed, not the API's
# parameter behind it (``--jobs must be ...``, never ``jobs must be ...``).
FLAG_CASES = [
    (["split", "{archive}", "-o", "{out}", "--jobs", "-1"], "--jobs"),
    (["split", "{archive}", "-o", "{out}", "--memory-limit", "5"], "--memory-limit"),
    (["split", "{archive}", "-o", "{out}", "--cuda-major", "x"], "--cuda-major"),
    (["split", "{archive}", "-o", "{out}", "--python-version", "3"], "--python-version"),
    (["inspect", "{archive}", "--max-size", "0"], "--max-size"),
    (["inspect", "{archive}", "--platform", "linux-x86-64"], "--platform"),
    (["repack", "{archive}", "-o", "{out}", "--level", "99"], "--level"),
    (["repack", "{archive}", "-o", "{out}", "--format", "xz", "--level", "10"], "--level"),
    (["repack", "{archive}", "-o", "{out}", "--threads", "-5"], "--threads"),
    (["repack", "{archive}", "-o", "{out}", "--prefix", "relative"], "--prefix"),
    (["verify", "{manifest}", "--tarballs", "{root}", "-j", "-3"], "--jobs"),
    (["nixify", "{manifest}", "--tarballs", "{root}", "-o", "{out}", "-j", "-1"], "--jobs"),
    (["diff", "{manifest}", "{manifest}", "-j", "-1"], "--jobs"),
    (["diff", "{manifest}", "{manifest}", "--platform", "linux-x86-64"], "--platform"),
]


@pytest.mark.parametrize(("args", "flag"), FLAG_CASES, ids=[" ".join(a[:1] + a[-2:])
                                                            for a, _ in FLAG_CASES])
def test_option_errors_name_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    from tests.support.tarutil import TOP, write_archive

    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x")])
    manifest = tmp_path / "redistrib_12.9.1.json"
    manifest.write_text('{"release_label": "12.9.1"}')
    values = {"archive": str(archive), "out": str(tmp_path / "out"), "root": str(tmp_path),
              "manifest": str(manifest)}
    result = CliRunner().invoke(main, [a.format(**values) for a in args])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("cudasplit: error: ")
    assert flag in result.stderr, result.stderr
    field = flag.removeprefix("--").replace("-", "_")
    assert f" {field} " not in result.stderr and not result.stderr.startswith(
        f"cudasplit: error: {field}"), result.stderr
    assert not (tmp_path / "out").exists()
