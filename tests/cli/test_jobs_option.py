"""``-j/--jobs`` means one thing for every command (issue 34): at most N workers at once, 0 or
unset every CPU the process may use; a negative N is one line naming ``--jobs``, exit 2."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cudasplit import OptionsError
from cudasplit.cli import main
from cudasplit.cli._optgroups import JOBS_HELP
from cudasplit.releases import manifest_features, verify_manifest
from tests.support.tarutil import TOP, write_archive

WITH_JOBS = ["diff", "explain", "features", "gpu-plan", "inspect", "nixify", "repack", "sbom", "split",
             "verify"]


def _jobs(command: click.Command) -> click.Option | None:
    return next((p for p in command.params
                 if isinstance(p, click.Option) and "--jobs" in p.opts), None)


def test_every_command_with_jobs_has_the_same_option() -> None:
    have = sorted(name for name, command in main.commands.items()
                  if not isinstance(command, click.Group) and _jobs(command) is not None)
    assert have == WITH_JOBS
    for name in have:
        option = _jobs(main.commands[name])
        assert option is not None and option.opts == ["-j", "--jobs"]
        assert option.default is None
        assert isinstance(option.type, click.IntRange) and option.type.min == 0
        assert option.help is not None and option.help.endswith(JOBS_HELP), name


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, Path]:
    from tests.unit.release.test_manifest import artifact_entry, write_manifest

    (tmp_path / "t").mkdir()
    archive = write_archive(tmp_path / "t" / f"{TOP}.tar.xz",
                            [("file", "lib/libdemo.so.1", b"x" * 64)])
    manifest = write_manifest(tmp_path / "redistrib_12.9.79.json", {
        "release_label": "12.9.79", "release_product": "cuda",
        "cuda_demo": {"name": "demo", "license": "x", "version": "12.9.79", "linux-x86_64":
                      artifact_entry(f"cuda_demo/linux-x86_64/{archive.name}",
                                     archive.read_bytes())}})
    return {"archive": archive, "manifest": manifest, "tarballs": tmp_path / "t",
            "root": tmp_path}


def _args(command: str, w: dict[str, Path]) -> list[str]:
    archive, root = str(w["archive"]), w["root"]
    return {
        "split": ["split", archive, "-o", str(root / "split")],
        "inspect": ["inspect", archive],
        "explain": ["explain", archive, "lib/libdemo.so.1"],
        "repack": ["repack", archive, "-o", str(root / "packed")],
        "verify": ["verify", str(w["manifest"]), "--tarballs", str(w["tarballs"])],
        "features": ["features", str(w["manifest"]), "--tarballs", str(w["tarballs"]), "-o",
                     str(root / "f.json")],
        "nixify": ["nixify", str(w["manifest"]), "--tarballs", str(w["tarballs"]), "-o",
                   str(root / "nix")],
        "diff": ["diff", archive, archive],
        "gpu-plan": ["gpu-plan", archive, "--gpu-archs", "9.0"],
        "sbom": ["sbom", archive, "-o", str(root / "sbom.json")],
    }[command]


@pytest.mark.parametrize("command", WITH_JOBS)
def test_zero_is_every_cpu_and_a_negative_count_is_refused(command: str,
                                                           workspace: dict[str, Path]) -> None:
    args = _args(command, workspace)
    refused = CliRunner().invoke(main, [*args, "--jobs", "-1"])
    assert refused.exit_code == 2
    lines = refused.stderr.strip().splitlines()
    assert lines[-1].startswith("cudasplit: error: ") and "--jobs" in lines[-1], refused.stderr
    accepted = CliRunner().invoke(main, [*args, "-j", "0"])
    assert accepted.exit_code == 0, accepted.stderr


def test_the_api_takes_the_same_jobs(workspace: dict[str, Path]) -> None:
    manifest, tarballs = workspace["manifest"], workspace["tarballs"]
    assert verify_manifest(manifest, tarballs, jobs=0).ok
    assert manifest_features(manifest, tarballs, jobs=None).complete
    with pytest.raises(OptionsError, match="jobs"):
        verify_manifest(manifest, tarballs, jobs=-1)
