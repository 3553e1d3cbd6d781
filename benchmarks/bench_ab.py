#!/usr/bin/env python3
"""A/B of ``cudasplit split`` between two source trees on one tarball, runs interleaved.

    git archive main | tar -x -C /tmp/a        # the baseline
    git archive HEAD | tar -x -C /tmp/b        # the change
    python benchmarks/bench_ab.py /tmp/a /tmp/b .bench-cache/split/small/zst/*.tar.zst \\
        --rounds 9 --jobs 1 2

Same command as ``bench_split.py``'s cudasplit method (driver link, a cuda_compat path,
``-q``), each run in a fresh child with ``PYTHONPATH`` set to its tree, ``sync`` before each,
output deleted after. Rounds alternate A and B, so background load hits both alike; prints
min and median wall and CPU (user+sys of the child, ``os.wait4``) and the largest peak RSS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMPAT = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.9/compat"


def one(tree: Path, tarball: Path, jobs: str) -> tuple[float, float, float]:
    out = Path(tempfile.mkdtemp(prefix="bench-ab-")) / "out"
    subprocess.run(["sync"], check=True)
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "cudasplit", "split", str(tarball), "-o",
                              str(out), "-q", "--cuda-compat", COMPAT, "-j", jobs],
                             env=env, cwd=tree)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    shutil.rmtree(out.parent, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"{tree}: cudasplit failed ({status})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("tarball", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", nargs="+", default=["1", "2"])
    args = parser.parse_args()
    args.tarball = args.tarball.resolve()  # the children run in their trees
    samples: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(args.rounds):
        for jobs in args.jobs:
            for label, tree in (("A", args.a), ("B", args.b)):
                samples.setdefault(f"{label} -j{jobs}", []).append(
                    one(tree, args.tarball, jobs))
    print(f"{args.tarball.name}, {args.rounds} rounds (A: {args.a}, B: {args.b})")
    for key, runs in samples.items():
        walls, cpus, rss = zip(*runs, strict=True)
        print(f"{key:6} wall min {min(walls):6.2f} s median {statistics.median(walls):6.2f} s"
              f" | CPU min {min(cpus):6.2f} s median {statistics.median(cpus):6.2f} s"
              f" | peak RSS {max(rss):4.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
