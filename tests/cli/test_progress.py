"""Progress on long work (issue 26): the status line moves within a large member, and every
long command draws it on a real terminal (a pty) and never into a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from cudasplit import Progress, SplitOptions, split_to_dir
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive

BIG = 24 << 20


@pytest.fixture(scope="module")
def big_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("progress")
    return write_archive(root / f"{TOP}.tar.zst", [
        ("file", "lib/libbig.so.1", os.urandom(BIG)), ("file", "include/x.h", b"x")], codec="zst")


def test_bytes_move_within_a_member(big_archive: Path, tmp_path: Path) -> None:
    seen: list[Progress] = []
    split_to_dir(big_archive, tmp_path / "o", SplitOptions(progress=seen.append))
    inside = [p for p in seen if p.current == "lib/libbig.so.1" and p.members == 0]
    assert len(inside) >= 3
    assert [p.bytes for p in inside] == sorted(p.bytes for p in inside)
    assert 0 < inside[0].bytes < BIG


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small archive, its split, and a manifest naming it."""
    from tests.unit.release.test_manifest import artifact_entry, write_manifest

    root = tmp_path_factory.mktemp("commands")
    name = "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz"
    (root / "t").mkdir()
    archive = write_archive(root / "t" / name, [
        ("file", "lib/libdemo.so.1", b"x" * 4096), ("file", "include/demo.h", b"#pragma once\n")])
    rel = f"cuda_demo/linux-x86_64/{name}"
    manifest = write_manifest(root / "redistrib_12.9.79.json", {
        "release_date": "2026-01-01", "release_label": "12.9.79", "release_product": "cuda",
        "cuda_demo": {"name": "demo", "license": "x", "version": "12.9.79",
                      "linux-x86_64": artifact_entry(rel, archive.read_bytes())}})
    split = root / "split"
    subprocess.run([sys.executable, "-m", "cudasplit", "split", str(archive), "-o", str(split)],
                   env=_env(), check=True, capture_output=True)
    return {"archive": archive, "manifest": manifest, "tarballs": root / "t", "split": split,
            "root": root}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NIX_BUILD_TOP", "TERM")}
    return {**env, "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "200"}


def _commands(w: dict[str, Path]) -> dict[str, list[str]]:
    return {
        "split": ["split", str(w["archive"]), "-o", str(w["root"] / "again"), "--overwrite"],
        "inspect": ["inspect", str(w["archive"])],
        "explain": ["explain", str(w["archive"]), "lib/libdemo.so.1"],
        "repack": ["repack", str(w["archive"]), "-o", str(w["root"] / "packed"), "--overwrite"],
        "closure": ["closure", str(w["split"])],
        "verify": ["verify", str(w["manifest"]), "--tarballs", str(w["tarballs"])],
        "features": ["features", str(w["manifest"]), "--tarballs", str(w["tarballs"]),
                     "-o", str(w["root"] / "features.json")],
        "diff": ["diff", str(w["archive"]), str(w["archive"])],
        "nixify": ["nixify", str(w["manifest"]), "--tarballs", str(w["tarballs"]),
                   "-o", str(w["root"] / "nix")],
    }


def _stderr_on_a_pty(args: list[str]) -> tuple[int, bytes]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cudasplit", *args], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return proc.wait(timeout=60), seen


COMMANDS = ["split", "inspect", "explain", "repack", "closure", "verify", "features", "nixify",
            "diff"]


@pytest.mark.parametrize("command", COMMANDS)
def test_status_line_on_a_terminal_only(command: str, workspace: dict[str, Path]) -> None:
    args = _commands(workspace)[command]
    code, on_tty = _stderr_on_a_pty(args)
    assert code == 0, on_tty[-2000:]
    assert b"\r" in on_tty and b"MB/s" in on_tty  # drawn, then cleared with \r
    piped = subprocess.run([sys.executable, "-m", "cudasplit", *args], env=_env(),
                           capture_output=True, timeout=60)
    assert piped.returncode == 0
    assert b"\r" not in piped.stderr and b"MB/s" not in piped.stderr
    in_nix = subprocess.run([sys.executable, "-m", "cudasplit", *args],
                            env={**_env(), "NIX_BUILD_TOP": "/build"}, capture_output=True,
                            timeout=60)
    assert b"MB/s" not in in_nix.stderr
