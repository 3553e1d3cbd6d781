"""Issue 24: a manifest is read with a cap (4 MiB; NVIDIA's are under 1 MB), so
``cudasplit verify /dev/zero`` fails at once instead of filling memory; JSON nested too deeply
is a ManifestError, not a RecursionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import ManifestError
from cudasplit._release.manifest import MAX_MANIFEST_BYTES
from cudasplit.cli import main
from cudasplit.releases import load_manifest


def test_verify_dev_zero_fails_fast(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", "/dev/zero", "--tarballs", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("cudasplit: error: /dev/zero: larger than 4 MiB; not an "
                                     "NVIDIA manifest (those are under 1 MB)")


@pytest.mark.parametrize("command", ["nixify", "features"])
def test_other_manifest_commands_are_capped(tmp_path: Path, command: str) -> None:
    (tmp_path / "tarballs").mkdir()
    args = [command, "/dev/zero", "--tarballs", str(tmp_path / "tarballs")]
    if command == "nixify":
        args += ["-o", str(tmp_path / "nix")]
    else:
        args += ["-o", str(tmp_path / "features.json")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "larger than 4 MiB" in result.stderr and result.stderr.count("\n") == 1


def test_just_over_the_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * (MAX_MANIFEST_BYTES - 1))
    with pytest.raises(ManifestError, match="larger than 4 MiB"):
        load_manifest(big)
    big.write_bytes(b"{}" + b" " * (MAX_MANIFEST_BYTES - 2))  # at the cap: read and parsed
    assert load_manifest(big).packages == ()


def test_deeply_nested_json(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ManifestError, match="nested too deeply"):
        load_manifest(deep)
