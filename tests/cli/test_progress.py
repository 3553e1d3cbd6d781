"""Progress on long work (issues 26, 34): the status line moves by bytes in every phase (within
a large member, while a dry run skips it, while ``verify`` hashes, ``features``, ``nixify``
and ``diff`` read, ``repack`` compresses), and every long command draws it on a real terminal
(a pty) and never into a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudasplit import Progress, RepackOptions, SplitOptions, inspect, repack_to_dir, split_to_dir
from cudasplit._run import STEP, ByteGrid, Tally
from cudasplit.nixify import nixify_manifest
from cudasplit.releases import diff_releases, manifest_features, verify_manifest
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


def _within(seen: list[Progress]) -> list[Progress]:
    """The calls made before the first item was done: bytes moving inside it."""
    return [p for p in seen if p.members == 0 and not p.done]


def test_a_dry_run_moves_by_bytes_while_it_skips_a_member(big_archive: Path) -> None:
    seen: list[Progress] = []
    inspect(big_archive, SplitOptions(progress=seen.append))
    # Nothing reads the member in a dry run: its bytes move as the next header skips them.
    inside = [p for p in seen if p.current == "lib/libbig.so.1" and 0 < p.bytes < BIG]
    assert len(inside) >= 2, seen
    assert [p.bytes for p in seen] == sorted(p.bytes for p in seen)  # never backwards


@pytest.fixture(scope="module")
def big_release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two large tarballs (zstd, 24 MiB members) and the manifest naming them."""
    from tests.unit.release.test_manifest import artifact_entry, write_manifest

    root = tmp_path_factory.mktemp("big-release")
    (root / "t").mkdir()
    entries = {}
    for pname in ("cuda_demo", "cuda_other"):
        name = f"{pname}-linux-x86_64-12.9.79-archive.tar.zst"
        archive = write_archive(root / "t" / name, [
            ("file", "lib/libbig.so.1", os.urandom(BIG)), ("file", "include/x.h", b"x")],
            codec="zst", top=name.removesuffix(".tar.zst"))
        entries[pname] = {"name": pname, "license": "x", "version": "12.9.79",
                          "linux-x86_64": artifact_entry(f"{pname}/linux-x86_64/{name}",
                                                         archive.read_bytes())}
    manifest = write_manifest(root / "redistrib_12.9.79.json", {
        "release_date": "2026-01-01", "release_label": "12.9.79", "release_product": "cuda",
        **entries})
    return {"manifest": manifest, "tarballs": root / "t", "root": root,
            "archive": root / "t" / "cuda_demo-linux-x86_64-12.9.79-archive.tar.zst"}


def test_verify_moves_by_the_bytes_it_hashes(big_release: dict[str, Path]) -> None:
    seen: list[Progress] = []
    report = verify_manifest(big_release["manifest"], big_release["tarballs"], jobs=1,
                             progress=seen.append)
    assert report.ok
    size = big_release["archive"].stat().st_size
    assert any(0 < p.bytes < size for p in _within(seen)), seen
    assert seen[-1].done and seen[-1].members == 2


@pytest.mark.parametrize("jobs", [1, 2], ids=["threads", "processes"])
def test_features_move_by_the_bytes_they_read(big_release: dict[str, Path], jobs: int) -> None:
    seen: list[Progress] = []
    report = manifest_features(big_release["manifest"], big_release["tarballs"], jobs=jobs,
                               progress=seen.append)
    assert report.complete
    assert any(p.bytes > 0 for p in _within(seen)), seen  # before a tarball was done
    assert seen[-1].done and seen[-1].members == 2 and seen[-1].bytes >= 2 * BIG


def test_nixify_moves_by_bytes_through_both_passes(big_release: dict[str, Path]) -> None:
    seen: list[Progress] = []
    nixify_manifest(big_release["manifest"], big_release["tarballs"],
                    big_release["root"] / "nix", progress=seen.append)
    assert any(p.bytes > 0 for p in _within(seen)), seen
    # Each tarball is read twice (the plan, the ELF members): both count.
    assert seen[-1].done and seen[-1].bytes >= 2 * 2 * BIG


def test_diff_moves_by_bytes_through_both_passes(big_release: dict[str, Path]) -> None:
    """Each pass over a tarball is its own series, named in ``source``: members counted as
    members, bytes never past the tarball's (one series adding both passes showed "0
    members", then "1 member", and twice the archive's bytes)."""
    seen: list[Progress] = []
    archive = big_release["archive"]
    assert diff_releases(archive, archive, progress=seen.append).changes == ()
    ends = [i for i, p in enumerate(seen) if p.done]
    assert len(ends) == 2 and ends[1] == len(seen) - 1  # the end of each side
    series: dict[str, list[Progress]] = {}
    for update in seen[:ends[0] + 1]:  # the old side; the new side reads the same tarball
        series.setdefault(update.source, []).append(update)
    assert list(series) == [f"{archive} (pass 1 of 2: placing members)",
                            f"{archive} (pass 2 of 2: ELF names)"]
    tar_bytes = BIG + 10 * 1024  # the member, headers and padding: less than this
    for updates in series.values():
        assert any(0 < p.bytes < BIG and p.current == "lib/libbig.so.1" for p in updates)
        assert all(p.bytes < tar_bytes for p in updates)
        assert [(p.members, p.bytes) for p in updates] == sorted(
            (p.members, p.bytes) for p in updates)
    assert max(p.members for p in series[f"{archive} (pass 1 of 2: placing members)"]) == 2


def test_diff_of_a_manifest_says_which_tarball(big_release: dict[str, Path]) -> None:
    seen: list[Progress] = []
    manifest = big_release["manifest"]
    diff_releases(manifest, manifest, tarball_dir=big_release["tarballs"], progress=seen.append)
    assert {p.source.split(", ", 1)[1] for p in seen} == {
        f"tarball {n} of 2 (pass {k} of 2: {what})" for n in (1, 2)
        for k, what in ((1, "placing members"), (2, "ELF names"))}
    assert sum(p.done for p in seen) == 2  # the end of each side


def test_repack_moves_by_bytes_while_it_compresses(big_release: dict[str, Path],
                                                   tmp_path: Path) -> None:
    seen: list[Progress] = []
    result = repack_to_dir(big_release["archive"], tmp_path / "packed",
                           SplitOptions(progress=seen.append, patch=False),
                           RepackOptions(level=1))
    assert result.archives
    packing = [p for p in seen if p.current.startswith("compressing ")]
    assert packing and all(p.unit == "archive" for p in packing)
    assert any(0 < p.bytes < BIG for p in packing if p.members == 0), packing


def test_bytes_are_reported_on_a_fixed_grid() -> None:
    heard: list[int] = []
    grid = ByteGrid(heard.append)
    for size in (STEP - 1, 1, 3 * STEP + 5, 10):  # reads of any size
        grid.add(size)
    assert heard == [STEP, 4 * STEP + 5]  # once per crossing, never past what was read


def test_a_tally_counts_items_and_bytes_without_counting_twice() -> None:
    seen: list[Progress] = []
    tally = Tally("manifest", seen.append)
    meter = tally.meter("a.tar.xz")
    meter(10)
    meter(25)
    again = meter.again()  # a second pass over the same tarball counts on
    again(5)
    meter.finish(40)  # 30 reported: 10 more
    tally.meter("b.tar.xz").finish(7)
    tally.done()
    assert [(p.members, p.bytes, p.current) for p in seen] == [
        (0, 10, "a.tar.xz"), (0, 25, "a.tar.xz"), (0, 30, "a.tar.xz"), (1, 40, "a.tar.xz"),
        (2, 47, "b.tar.xz"), (2, 47, "")]
    assert seen[-1].done


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
        "gpu-plan": ["gpu-plan", str(w["archive"]), "--gpu-archs", "8.0"],
        "sbom": ["sbom", "--manifest", str(w["manifest"]), str(w["tarballs"]),
                 "-o", str(w["root"] / "sbom.cdx.json")],
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
            "diff", "gpu-plan", "sbom"]


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


def test_a_silent_phase_still_moves_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``sbom`` writes its documents in library calls that report nothing for seconds: the
    line is drawn again on a clock meanwhile, with the seconds since the last update."""
    from cudasplit.cli._terminal import ProgressLine, beating

    line = ProgressLine("package")
    line(Progress("redistrib.json", 3, 50_000_000, "writing cyclonedx"))
    with beating(line, every=0.05):
        time.sleep(0.5)
    drawn = capsys.readouterr().err.split("\r")
    beats = [d for d in drawn if "writing cyclonedx (" in d]
    assert len(beats) >= 3, drawn
    assert all("3 packages, 50 MB" in d for d in beats)
    line.clear()
