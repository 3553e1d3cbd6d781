"""SIGTERM and SIGHUP mid-split: a message, rc 128 + signal, and nothing left behind.

The source is made slow in the child (a pause before each member, as a slow disk or network
would), so the signal lands while the staging directory is full and the decoder is running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive

SLOW_CLI = """
import sys, time
import cudasplit._source as sources
members = sources.TarSource.members
def slow(self):
    for item in members(self):
        time.sleep(0.05)
        yield item
sources.TarSource.members = slow
from cudasplit.cli import run
sys.argv[0] = "cudasplit"
run()
"""


def _default_sigint() -> None:
    """A shell's background job inherits SIGINT ignored, and Python then keeps ignoring it
    (as it should: nohup semantics). The test wants the interactive case."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum, code, name", [
    (signal.SIGTERM, 143, "SIGTERM"), (signal.SIGHUP, 129, "SIGHUP"),
    (signal.SIGINT, 130, None)])
def test_signal_mid_split_leaves_nothing(tmp_path: Path, signum: int, code: int,
                                         name: str | None) -> None:
    entries = [("file", f"include/h{i:03}.h", b"x" * 4096) for i in range(400)]
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", entries)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLI, "split", str(archive), "-o",
                             str(out), "--no-patch"], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    deadline = time.monotonic() + 30
    while not list(out.glob(".cudasplit-staging-*/include/include/h00*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().endswith(f"terminated by {name}" if name else "interrupted")
    assert not out.exists(), list(out.rglob("*"))[:5]


def test_sigterm_mid_batch_stops_every_worker_and_leaves_nothing(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for n in range(2):
        top = f"cuda_demo{n}-linux-x86_64-12.9.79-archive"
        write_archive(downloads / f"{top}.tar.xz",
                      [("file", f"include/h{i:03}.h", b"x" * 4096) for i in range(400)], top=top)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CLI, "split", str(downloads), "-o",
                             str(out), "--no-patch", "-j", "2", "--default-rules"],
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(list(out.glob("*/.cudasplit-staging-*/include/include/h00*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    # 400 members x 50 ms each would take 20 s to finish; the workers stop at the next one.
    assert time.monotonic() - started < 5
    assert proc.returncode == 143 and stderr.strip().endswith("terminated by SIGTERM"), stderr
    assert not out.exists(), list(out.rglob("*"))[:5]
