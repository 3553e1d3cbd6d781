#!/usr/bin/env python3
"""Peak RSS of a whole ``cudasplit split`` process tree (the ``xz`` child included) against
``--memory-limit``, on a synthetic many-block .xz archive.

    python benchmarks/bench_memory.py                       # this tree
    python benchmarks/bench_memory.py --tree /tmp/a         # another source tree (A/B)
    python benchmarks/bench_memory.py --size 2G --block 64M --jobs 8 16

The archive is one member of zeros (``--size``, default 1 GiB) in ``--block`` xz blocks
(default 32 MiB), a few hundred KB compressed; it is built once into ``.bench-cache/memory/``.
Each run splits it with ``--max-ratio`` out of the way and ``--no-patch``, while a sampler
sums the RSS of the process and all its descendants from ``/proc`` every 10 ms. Printed per
run: the peak, and the peak less the limit (the constant the documentation states: about
150 MB). No timing is measured here; ``bench_ab.py`` compares speed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TOP = "cuda_demo-linux-x86_64-12.9.79-archive"
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_of(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1].upper()] if text[-1].isalpha() else int(text)


def build(size: int, block: int) -> Path:
    """The synthetic archive (cached): one member of ``size`` zeros, ``block``-sized blocks."""
    cache = HERE / ".bench-cache" / "memory"
    path = cache / f"zeros-{size >> 20}M-blocks-{block >> 20}M.tar.xz"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        member = Path(tmp) / TOP / "lib" / "big.bin"
        member.parent.mkdir(parents=True)
        with open(member, "wb") as fh:
            fh.truncate(size)
        tar = subprocess.Popen(["tar", "-C", tmp, "-cf", "-", TOP], stdout=subprocess.PIPE)
        with open(path.with_suffix(".part"), "wb") as out:
            subprocess.run(["xz", "-6", "-T2", f"--block-size={block}"], stdin=tar.stdout,
                           stdout=out, check=True)
        tar.wait()
    path.with_suffix(".part").rename(path)
    return path


def _children(pid: int) -> list[int]:
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            for child in fh.read().split():
                found += [int(child), *_children(int(child))]
    except OSError:
        pass
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def peak_tree_rss(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """(peak summed RSS of the process tree in bytes, exit status)."""
    # cwd: ``python -m`` puts the current directory first on sys.path, before PYTHONPATH.
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(_rss(p) for p in [proc.pid, *_children(proc.pid)]))
        time.sleep(0.01)
    if proc.returncode != 0:
        assert proc.stderr is not None
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    return peak, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE, help="source tree to run")
    parser.add_argument("--size", default="1G")
    parser.add_argument("--block", default="32M")
    parser.add_argument("--jobs", nargs="+", default=["2", "8", "16"])
    parser.add_argument("--limits", nargs="+", default=["none", "64M", "128M", "512M"])
    args = parser.parse_args()
    archive = build(size_of(args.size), size_of(args.block))
    env = dict(os.environ, PYTHONPATH=str(args.tree.resolve()))
    print(f"{archive.name}: {archive.stat().st_size:,} bytes; tree {args.tree}")
    print(f"{'jobs':>4}  {'limit':>6}  {'peak MB':>8}  {'peak - limit MB':>15}")
    for jobs in args.jobs:
        for limit in args.limits:
            out = Path(tempfile.mkdtemp(prefix="bench-memory-"))
            argv = [sys.executable, "-m", "cudasplit", "split", str(archive), "-o",
                    str(out / "o"), "-q", "--no-patch", "--max-ratio", "1000000000", "-j", jobs]
            if limit != "none":
                argv += ["--memory-limit", limit]
            peak, status = peak_tree_rss(argv, env, args.tree.resolve())
            shutil.rmtree(out, ignore_errors=True)
            over = "" if limit == "none" else f"{(peak - size_of(limit)) / 1e6:15,.0f}"
            print(f"{jobs:>4}  {limit:>6}  {peak / 1e6:8,.0f}  {over:>15}"
                  + ("" if status == 0 else f"  (exit {status})"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
