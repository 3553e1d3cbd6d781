#!/usr/bin/env python3
"""What fsync before the final renames costs (issue 15.10): split with and without it.

    python benchmarks/bench_fsync.py [--repeat 5] [WHEEL_DIR ...]

Each WHEEL_DIR (default: the cached cccl, nvcc and cublas 12.9 wheels of tests/realwheels.py,
i.e. ``~/.cache/cudasplit/unpacked/...``) is laid out as a redist tree
``<pname>-linux-x86_64-<version>-archive/`` (the wheel's ``nvidia/<x>/`` content) and
packed as ``.tar.zst`` (level 3) into a temporary directory. Then ``cudasplit split -q
--no-patch`` runs in a fresh child process, with fsync (the default) and with ``--no-fsync``,
interleaved round by round, ``sync`` before each run; the minimum wall time is reported.
The output dir is deleted after each run (not timed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import zstandard

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("CUDASPLIT_CACHE", "~/.cache/cudasplit")).expanduser() / "unpacked"
DEFAULTS = ("nvidia_cuda_cccl_cu12-12.9.27", "nvidia_cuda_nvcc_cu12-12.9.86",
            "nvidia_cublas_cu12-12.9.1.4")


def pack(wheel: Path, work: Path) -> tuple[Path, int, int]:
    """The wheel's nvidia/<x>/ tree as <x>-linux-x86_64-<ver>-archive.tar.zst."""
    content = next(d for d in sorted((wheel / "nvidia").iterdir())
                   if d.is_dir() and d.name != "__pycache__")
    version = wheel.name.split("-")[1]
    top = f"bench_{content.name}-linux-x86_64-{version}-archive"
    path = work / f"{top}.tar.zst"
    files = size = 0
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as zst, \
            tarfile.open(fileobj=zst, mode="w|") as tar:
        for item in sorted(content.rglob("*")):
            if item.name == "__init__.py" or "__pycache__" in item.parts:
                continue
            tar.add(item, arcname=f"{top}/{item.relative_to(content)}", recursive=False)
            if item.is_file():
                files, size = files + 1, size + item.stat().st_size
    return path, files, size


def run(tarball: Path, out: Path, fsync: bool) -> float:
    subprocess.run(["sync"], check=True)
    cmd = [sys.executable, "-m", "cudasplit", "split", str(tarball), "-o", str(out), "-q",
           "--no-patch", "--default-rules", "--package", tarball.name.split("-")[0]]
    if not fsync:
        cmd.append("--no-fsync")
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.perf_counter() - start
    shutil.rmtree(out)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    wheels = args.wheels or [next(CACHE.glob(name + "-*")) for name in DEFAULTS]
    with tempfile.TemporaryDirectory(dir=REPO) as tmp:
        work = Path(tmp)
        print("| tarball | files | bytes | fsync | --no-fsync | cost |")
        print("|---|---:|---:|---:|---:|---:|")
        for wheel in wheels:
            tarball, files, size = pack(wheel, work)
            best = {True: float("inf"), False: float("inf")}
            for _ in range(args.repeat):
                for fsync in (True, False):
                    best[fsync] = min(best[fsync], run(tarball, work / "out", fsync))
            cost = best[True] - best[False]
            print(f"| {tarball.name} | {files} | {size / 1e6:,.0f} MB | {best[True]:.2f} s | "
                  f"{best[False]:.2f} s | {cost:+.2f} s ({cost / best[False]:+.0%}) |")


if __name__ == "__main__":
    main()
