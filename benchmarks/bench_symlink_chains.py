#!/usr/bin/env python3
"""Symlink chains (issue 24): N links ``lib/l0 -> l1 -> ... -> l{N-1} -> real.so`` in one
small ``.tar.zst``; time and peak RSS of ``cudasplit split`` against ``tar --zstd -xf`` of
the same file (the baseline, same run), with and without ``--report``.

    python benchmarks/bench_symlink_chains.py                 # N = 10,000 and 90,000
    python benchmarks/bench_symlink_chains.py --links 90000 --repeat 3

Each command runs in a fresh child process; wall time is the minimum over ``--repeat`` runs,
peak RSS (``ru_maxrss`` from ``os.wait4``) that of the fastest run (the archive is built in
another child, so the forked children do not start with the builder's memory). Linear means
the per-link cost (µs/link) stays flat as N grows. Only the standard library, zstandard and
cudasplit.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOP = "cuda_demo-linux-x86_64-12.9.79-archive"


def build(links: int, path: Path) -> None:
    import zstandard

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        top = tarfile.TarInfo(TOP)
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(top)
        real = tarfile.TarInfo(f"{TOP}/lib/real.so")
        real.size = 1
        tar.addfile(real, io.BytesIO(b"x"))
        for k in range(links):
            info = tarfile.TarInfo(f"{TOP}/lib/l{k}")
            info.type = tarfile.SYMTYPE
            info.linkname = f"l{k + 1}" if k < links - 1 else "real.so"
            tar.addfile(info)
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(buf.getvalue()))


def run(cmd: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return wall, usage.ru_maxrss


def best(cmd: list[str], work: Path, repeat: int) -> tuple[float, int]:
    results = []
    for _ in range(repeat):
        out = work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        results.append(run([c.replace("@OUT@", str(out)) for c in cmd], work))
        shutil.rmtree(out, ignore_errors=True)
    return min(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, nargs="*", default=[10_000, 90_000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--build", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:  # in a child: the parent stays small, or every fork would inherit its RSS
        build(args.links[0], Path(args.build))
        return
    print(f"{'links':>7} {'archive':>9} {'method':<22} {'wall s':>7} {'µs/link':>8} "
          f"{'RSS MB':>7} {'/ tar':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for links in args.links:
            archive = work / f"{TOP}.tar.zst"
            subprocess.run([sys.executable, __file__, "--links", str(links), "--build",
                            str(archive)], check=True)
            split = [sys.executable, "-m", "cudasplit", "split", str(archive), "-o",
                     "@OUT@/split", "-q", "--no-patch", "-j", "1"]
            methods = {
                "tar --zstd -xf": ["tar", "--zstd", "-xf", str(archive), "-C", "@OUT@"],
                "cudasplit": split,
                "cudasplit --report": [*split, "--report", "@OUT@/report.json"],
            }
            floor = None
            for name, cmd in methods.items():
                wall, rss = best(cmd, work, args.repeat)
                floor = floor or wall
                print(f"{links:>7} {archive.stat().st_size:>9} {name:<22} {wall:>7.2f} "
                      f"{wall / links * 1e6:>8.1f} {rss / 1024:>7.0f} {wall / floor:>6.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
