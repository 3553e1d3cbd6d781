"""Issue 24: runs killed while cleaning up leave nothing that later runs do not remove.

* Removing a staging dir is crash-safe: it is renamed to ``.cudasplit-trash-*`` first, so a
  kill during the deletion (after the owner file went, before the directory did) leaves trash,
  never a staging dir without owner that made ``-o DIR`` look unfinished forever; every later
  run deletes trash.
* A killed ``repack`` leaves its stage (``.cudasplit-repack-*``, with an owner file now) and
  its temporary archives (``.<archive>.<stage token>-<hex>.tmp``): the next repack into the
  same directory removes both.

The kills are real (SIGKILL of a child process at the exact point), not simulated.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cudasplit import SplitOptions, repack_to_dir, split_to_dir
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive

ENTRIES = [("file", "lib/libx.so.1", b"x" * 5000), ("file", "include/x.h", b"h"),
           ("file", "bin/tool", b"#!/bin/sh\n")]


def _run_killed(script: str) -> None:
    """Run ``script`` in a child that SIGKILLs itself where the script says."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == -9, (result.returncode, result.stderr)


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_kill_while_removing_the_staging_dir_leaves_only_trash(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)
    (tmp_path / "bad").mkdir()
    bad = write_archive(tmp_path / "bad" / f"{TOP}.tar.xz",
                        [*ENTRIES, ("symlink", "lib/evil", "/etc")])
    out = tmp_path / "out"
    # A failing split (the escaping symlink) aborts; kill it halfway through deleting its
    # staging dir, once the owner file is gone (what SIGTERM then SIGKILL 0-60 ms later did).
    _run_killed(f"""
        import os, shutil, signal
        from pathlib import Path
        from cudasplit import split_to_dir
        from cudasplit._sinks import staging

        def rmtree(path, ignore_errors=False):
            for victim in Path(path).rglob("*"):
                if victim.is_file():
                    victim.unlink()   # the owner file and the members go first ...
                    break
            os.kill(os.getpid(), signal.SIGKILL)   # ... then the kill

        staging.shutil.rmtree = rmtree
        try:
            split_to_dir({str(bad)!r}, {str(out)!r})
        except Exception:
            pass
    """)
    left = _names(out)
    assert left and all(name.startswith(".cudasplit-trash-") for name in left), left
    # The next run into the same DIR finishes and leaves nothing but its outputs.
    split_to_dir(archive, out, SplitOptions(patch=False))
    assert _names(out) == ["bin", "include", "lib"]


def test_trash_left_by_any_run_is_removed(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)
    out = tmp_path / "out"
    (out / ".cudasplit-trash-x1y2z3/lib").mkdir(parents=True)
    (out / ".cudasplit-trash-x1y2z3/lib/half-deleted.so").write_bytes(b"x")
    split_to_dir(archive, out, SplitOptions(patch=False))
    assert _names(out) == ["bin", "include", "lib"]


def test_killed_repack_leftovers_are_removed_by_the_next_repack(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)
    out = tmp_path / "packed"
    # Kill the repack after its first temporary archive was written in full.
    _run_killed(f"""
        import os, signal
        from cudasplit import repack_to_dir, SplitOptions
        from cudasplit._sinks import TarballSink

        original = TarballSink._pack
        def pack(self, root, dest):
            original(self, root, dest)
            os.kill(os.getpid(), signal.SIGKILL)

        TarballSink._pack = pack
        repack_to_dir({str(archive)!r}, {str(out)!r}, SplitOptions(patch=False))
    """)
    left = _names(out)
    assert [n for n in left if n.startswith(".cudasplit-repack-")], left
    assert [n for n in left if n.endswith(".tmp")], left
    result = repack_to_dir(archive, out, SplitOptions(patch=False))
    assert sorted(p.name for p in result.archives) == _names(out)
    assert not [n for n in _names(out) if n.startswith(".")], _names(out)


def test_a_live_repack_stage_is_left_alone(tmp_path: Path) -> None:
    """A stage whose owner is alive (this process) and its temp archive are not touched."""
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)
    out = tmp_path / "packed"
    out.mkdir()
    stage = out / ".cudasplit-repack-abcd1234"
    stage.mkdir()
    from cudasplit._sinks import staging

    staging.record_owner(stage)  # owned by this (live) process
    temp = out / ".other.tar.zst.abcd1234-0a1b2c.tmp"
    temp.write_bytes(b"in progress")
    orphan = out / ".other.tar.zst.zzzz9999-0a1b2c.tmp"
    orphan.write_bytes(b"killed")
    repack_to_dir(archive, out, SplitOptions(patch=False))
    assert stage.is_dir() and temp.exists() and not orphan.exists()
