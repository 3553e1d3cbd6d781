""".ci/nix.sh is safe to run twice at once and after a killed debootstrap.

The script is run for real, on a cache of its own, with a stand-in ``debootstrap`` (and
``patchelf``) first on ``PATH``: the stand-in lays a root holding a ``nix`` that prints its
version and mounts ``proc`` inside it while it works, as debootstrap does, so a killed or
failed one leaves ``proc`` mounted the way the real one did. Mounting needs root: elsewhere
these tests skip.

Before: a second run deleted the root a first run was still bootstrapping, and after a failed
debootstrap ``proc`` stayed mounted in ``root.new`` (every later ``rm -rf`` failed on it,
40,000 "Operation not permitted" lines).
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO

SCRIPT = REPO / ".ci" / "nix.sh"

FAKE_DEBOOTSTRAP = textwrap.dedent("""\
    #!/usr/bin/env bash
    # Stand-in for debootstrap: $STATE/mode says how this call goes.
    set -euo pipefail
    target=""
    for arg in "$@"; do
        case "$arg" in --*) ;; *) [ -n "${suite:-}" ] && [ -z "$target" ] && target="$arg"; suite=1 ;; esac
    done
    echo "$$ start" >> "$STATE/calls"
    mkdir -p "$target/usr/bin" "$target/lib64" "$target/proc"
    mount -t proc proc "$target/proc"
    printf '#!/bin/sh\\necho "nix (Nix) 2.26.0"\\n' > "$target/usr/bin/nix"
    chmod 755 "$target/usr/bin/nix"
    ln -s nix "$target/usr/bin/nix-build"
    calls=$(grep -c start "$STATE/calls")
    mode=$(cat "$STATE/mode")
    sleep "${FAKE_SLEEP:-0.5}"
    if [ "$mode" = kill-first ] && [ "$calls" = 1 ]; then kill -9 $$; fi
    if [ "$mode" = fail ]; then exit 1; fi
    umount "$target/proc"
    echo "$$ end" >> "$STATE/calls"
""")


def _mount_works(tmp: Path) -> bool:
    if os.geteuid() != 0:
        return False
    point = tmp / "probe"
    point.mkdir()
    if subprocess.run(["mount", "-t", "proc", "proc", str(point)],
                      capture_output=True).returncode != 0:
        return False
    subprocess.run(["umount", str(point)], check=True)
    point.rmdir()
    return True


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, str]]:
    if not _mount_works(tmp_path):
        pytest.skip("needs root and mount(2) (the stand-in debootstrap mounts proc)")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (fake / "patchelf").write_text("#!/bin/sh\nexit 0\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "calls").write_text("")
    (state / "mode").write_text("ok")
    yield {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "STATE": str(state),
           "CUDASPLIT_NIX_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    # Whatever a failing run left mounted goes, so nothing ever deletes through it.
    for point in reversed(_mounts_below(tmp_path)):
        subprocess.run(["umount", "-l", point], check=False)


def _mounts_below(path: Path) -> list[str]:
    text = Path("/proc/self/mounts").read_text()
    return [line.split()[1] for line in text.splitlines()
            if line.split()[1].startswith(f"{path}/")]


def _run(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(["bash", str(SCRIPT)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if ".tmp." in p.name or ".old." in p.name
                  or p.name.endswith(".new"))


def test_two_runs_at_once_both_succeed(world: dict[str, str], tmp_path: Path) -> None:
    """``bash .ci/nix.sh & bash .ci/nix.sh; wait``: the second waits for the first's lock and
    finds the cache ready; debootstrap runs once."""
    first, second = _run(world), _run(world)
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    cache = Path(world["CUDASPLIT_NIX_CACHE"])
    assert [out.strip() for out, _ in outs] == [str(cache / "bin")] * 2
    calls = (Path(world["STATE"]) / "calls").read_text().split("\n")
    assert sum("start" in line for line in calls) == 1
    assert subprocess.run([str(cache / "bin" / "nix"), "--version"], capture_output=True,
                          text=True, check=True).stdout.startswith("nix (Nix) 2.26")
    assert (cache / "bin" / "nix-build").is_symlink()
    assert _mounts_below(tmp_path) == [] and _leftovers(cache) == []


def test_a_killed_debootstrap_is_retried_and_leaves_nothing_mounted(
        world: dict[str, str], tmp_path: Path) -> None:
    (Path(world["STATE"]) / "mode").write_text("kill-first")
    done = _run(world)
    _out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert "trying once more" in err
    cache = Path(world["CUDASPLIT_NIX_CACHE"])
    assert _mounts_below(tmp_path) == [] and _leftovers(cache) == []
    assert (cache / "root" / "usr" / "bin" / "nix").exists()


def test_debootstrap_failing_twice_fails_and_leaves_nothing(world: dict[str, str],
                                                            tmp_path: Path) -> None:
    (Path(world["STATE"]) / "mode").write_text("fail")
    done = _run(world)
    _out, err = done.communicate(timeout=120)
    assert done.returncode == 1 and "failed twice" in err, err
    assert "Operation not permitted" not in err
    cache = Path(world["CUDASPLIT_NIX_CACHE"])
    assert _mounts_below(tmp_path) == [] and _leftovers(cache) == []
    assert not (cache / "root").exists() and not (cache / "bin").exists()


def test_what_a_killed_run_left_is_unmounted_before_it_is_deleted(
        world: dict[str, str], tmp_path: Path) -> None:
    """A run killed with SIGKILL (no trap runs) left its temporary root with proc mounted,
    and an older script left root.new the same way: the next run unmounts both first."""
    cache = Path(world["CUDASPLIT_NIX_CACHE"])
    for name in ("root.tmp.killed", "root.new"):
        (cache / name / "proc").mkdir(parents=True)
        (cache / name / "etc").mkdir()
        (cache / name / "etc" / "file").write_text("x")
        subprocess.run(["mount", "-t", "proc", "proc", str(cache / name / "proc")], check=True)
    done = _run(world)
    _out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert "Operation not permitted" not in err
    assert _mounts_below(tmp_path) == [] and _leftovers(cache) == []


def test_the_script_is_killed_while_debootstrap_runs(world: dict[str, str],
                                                     tmp_path: Path) -> None:
    """SIGTERM to the script mid-bootstrap: its exit trap unmounts and removes the
    temporary root; a later run succeeds."""
    import time

    world = {**world, "FAKE_SLEEP": "2"}
    done = _run(world)
    calls = Path(world["STATE"]) / "calls"
    for _ in range(200):
        if "start" in calls.read_text():
            break
        time.sleep(0.05)
    time.sleep(0.3)   # proc is mounted by now
    done.terminate()
    done.communicate(timeout=60)
    for _ in range(100):   # the stand-in, killed with its script's group or not, ends
        if not _mounts_below(tmp_path):
            break
        time.sleep(0.1)
    cache = Path(world["CUDASPLIT_NIX_CACHE"])
    world["FAKE_SLEEP"] = "0"
    again = _run(world)
    _out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert _mounts_below(tmp_path) == [] and _leftovers(cache) == []
