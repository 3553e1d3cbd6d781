"""Issue 24: errors that were tracebacks or named the wrong thing.

* ``split -`` with a full ``$TMPDIR`` (the standard-input spool): one line, exit 2.
* A rules file that is not UTF-8: ``RulesError`` naming the file (``split --rules``,
  ``rules check``, ``load_ruleset``, ``check_rule_file``).
* Disk full while a RUNPATH is written: the message names the archive and the member (and the
  final path), never the staging directory that is about to be removed.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cudasplit._elf.patch.backends as elfbackends
from cudasplit import OutputError, RulesError, SplitOptions, split_to_dir
from cudasplit.cli import main
from cudasplit.rules import check_rule_file, load_ruleset
from tests.support.builders import compile_shared
from tests.support.paths import REPO
from tests.support.tarutil import TOP, tar_bytes, write_archive

NOT_UTF8 = b'[package]\nnote = "caf\xe9"\n'


# -- rules files that are not UTF-8 ----------------------------------------------------------


@pytest.fixture
def latin1_rules(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.toml"
    path.write_bytes(NOT_UTF8)
    return path


def test_check_rule_file_not_utf8(latin1_rules: Path) -> None:
    with pytest.raises(RulesError) as info:
        check_rule_file(latin1_rules)
    assert str(latin1_rules) in str(info.value) and "not UTF-8" in str(info.value)
    assert "0xe9" in str(info.value)


def test_load_ruleset_not_utf8(latin1_rules: Path) -> None:
    with pytest.raises(RulesError, match="not UTF-8"):
        load_ruleset(None, [latin1_rules])


def test_rules_dir_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    (tmp_path / "default.toml").write_bytes(NOT_UTF8)
    with pytest.raises(RulesError, match=r"default\.toml: not UTF-8"):
        load_ruleset(None, rules_dir=tmp_path)


@pytest.mark.parametrize("args", [["rules", "check"], ["split", "--rules"],
                                  ["inspect", "--rules"]])
def test_cli_rules_not_utf8(latin1_rules: Path, tmp_path: Path, args: list[str]) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x")])
    argv = [*args, str(latin1_rules)]
    if args[0] != "rules":
        argv.insert(1, str(archive))
    if args[0] == "split":
        argv += ["-o", str(tmp_path / "out")]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# -- split - with a full $TMPDIR ---------------------------------------------------------------


_REAL_TEMPFILE = tempfile.TemporaryFile


def _full_tempfile(*args: Any, **kwargs: Any) -> Any:
    spool = _REAL_TEMPFILE()

    def write(data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    spool.write = write  # type: ignore[method-assign]
    return spool


def test_stdin_spool_disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cudasplit._source as _sources

    monkeypatch.setattr(_sources.tempfile, "TemporaryFile", _full_tempfile)
    data = tar_bytes([("file", "lib/libx.so.1", b"x" * 4096)])
    result = CliRunner().invoke(main, ["split", "-", "-o", str(tmp_path / "out")], input=data)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cudasplit: error: <stdin>: cannot spool standard input")
    assert "disk full" in lines[0] and "TMPDIR" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Any:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_stdin_spool_real_full_tmpdir(tiny_tmpfs: Path, tmp_path: Path) -> None:
    data = tar_bytes([("file", "lib/libx.so.1", bytes(range(256)) * 1024)])  # 256 KiB
    env = {"PYTHONPATH": str(REPO), "TMPDIR": str(tiny_tmpfs), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "cudasplit", "split", "-", "-o",
                             str(tmp_path / "out"), "-q"], input=data, env=env,
                            capture_output=True, timeout=60)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert stderr.count("\n") == 1 and "disk full" in stderr and "<stdin>" in stderr, stderr
    assert list(tiny_tmpfs.iterdir()) == []
    assert not (tmp_path / "out").exists()


# -- disk full while a RUNPATH is written --------------------------------------------------


class _DiskFullBackend:
    name = "disk-full"

    def apply(self, path: str, edit: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", path)


def test_runpath_write_disk_full_names_archive_and_member(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    lib = compile_shared(tmp_path / "build", "libx.so.1", "int x(void) { return 1; }",
                         soname="libx.so.1", runpath="/usr/lib/old")
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/libx.so.1", lib.read_bytes()), ("symlink", "lib/libx.so", "libx.so.1")])
    monkeypatch.setattr(elfbackends, "backend_for", lambda patcher: _DiskFullBackend())
    out = tmp_path / "out"
    with pytest.raises(OutputError) as info:
        split_to_dir(archive, out, SplitOptions(jobs=1))
    message = str(info.value)
    assert str(archive) in message and "member 'lib/libx.so.1'" in message, message
    assert ".cudasplit-staging" not in message and "No space left" in message, message
    assert str(out / "lib") in message  # the final path, where the file would have been
    assert not out.exists() or list(out.iterdir()) == []
