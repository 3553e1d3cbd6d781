"""Packaging conventions (issue 26): a LICENSE, shell completion, a man page generated from
the commands, and a report inside a Nix output that names no other output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive


def test_license_is_mit_by_the_contributors() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "cudasplit contributors" in text
    assert 'license = "MIT"' in (REPO / "pyproject.toml").read_text()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(shell: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0 and "_CUDASPLIT_COMPLETE" in result.stdout


def test_completion_completes_commands() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "_CUDASPLIT_COMPLETE": "bash_complete",
           "COMP_WORDS": "cudasplit spl", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "cudasplit"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "plain,split" in done.stdout.splitlines(), done.stdout + done.stderr


def test_man_page_is_current() -> None:
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_manpage.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    page = (REPO / "docs" / "cudasplit.1").read_text()
    assert page.startswith(".TH CUDASPLIT 1") and ".SS cudasplit split" in page


@pytest.mark.slow
def test_the_wheel_installs_the_man_page(tmp_path: Path) -> None:
    """``pip install .`` puts it in <prefix>/share/man/man1, where ``man cudasplit`` looks
    once <prefix>/bin is on PATH."""
    import zipfile

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--disable-pip-version-check", "-w", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:  # no build backend to be had: offline
        pytest.skip(f"cannot build the wheel: {(done.stderr.strip().splitlines() or [''])[-1]}")
    [wheel] = tmp_path.glob("cudasplit-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        page = zf.read(next(n for n in zf.namelist()
                            if n.endswith(".data/data/share/man/man1/cudasplit.1")))
    assert page == (REPO / "docs" / "cudasplit.1").read_bytes()


def test_nix_report_inside_an_output_names_no_store_path(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/libdemo.so.1", b"x"), ("file", "include/demo.h", b"#pragma once\n")])
    roots = _nix_outputs(tmp_path / "a", monkeypatch)
    inside = roots["out"] / "report.json"
    result = CliRunner().invoke(main, ["split", str(archive), "--nix", "--default-rules", "--report", str(inside)])
    assert result.exit_code == 0, result.output
    text = inside.read_text()
    assert str(roots["dev"]) not in text and str(roots["lib"]) not in text  # no dev -> out cycle
    assert json.loads(text)["outputs"]["lib"]["directory"] == "$lib"
    outside = tmp_path / "report.json"  # outside the outputs: the plain report
    roots = _nix_outputs(tmp_path / "b", monkeypatch)
    result = CliRunner().invoke(main, ["split", str(archive), "--nix", "--default-rules", "--report", str(outside)])
    assert result.exit_code == 0, result.output
    assert json.loads(outside.read_text())["outputs"]["lib"]["directory"] == str(roots["lib"])


def _nix_outputs(base: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    roots = {name: base / f"store-{name}" for name in ("out", "lib", "dev")}
    monkeypatch.setenv("outputs", " ".join(roots))
    for name, path in roots.items():
        monkeypatch.setenv(name, str(path))
    return roots
