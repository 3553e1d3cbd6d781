"""The closure scan against reading the same bytes once, and against ``grep -r -c``.

    python benchmarks/bench_closure_scan.py [--repeat 5] [--packages libcusparse,cuda_nvrtc]

Splits real NVIDIA bytes (the 12.9 release the tests build from PyPI wheels, see
``tests/releases.py``; cached outside the clone) with ``--nix-support`` into
``.bench-cache/closure/<pname>/``, then times, interleaved, with a warm page cache:

* ``read``:    every file read once in 1 MiB chunks (the floor: the scan must see every byte);
* ``grep``:    ``grep -r -c -F <common root prefix> <dir>`` (a C byte scanner, one needle);
* ``closure``: :func:`cudasplit._release.closure.closure_of_dir` (all needles, symlinks, ELF
RUNPATHs).

Prints a markdown table with medians and the ratio closure / read.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudasplit._api.entry import split_to_dir  # noqa: E402
from cudasplit._release.closure import closure_of_dir  # noqa: E402
from cudasplit._split.pipeline import SplitOptions  # noqa: E402
from tests.support.releases import release  # noqa: E402

CACHE = ROOT / ".bench-cache" / "closure"


def prepare(packages: list[str]) -> list[Path]:
    rel = release("12.9.1")
    dirs = []
    for pname in packages:
        dest = CACHE / pname
        if not dest.exists():
            split_to_dir(rel.tarball(pname), dest, SplitOptions(nix_markers=True))
        dirs.append(dest)
    return dirs


def read_all(directory: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                continue
            with open(full, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    return total


def grep(directory: Path) -> int:
    # The same needle prefix the closure scan looks for (character-wise, like the scan).
    prefix = os.path.commonprefix([str(p.resolve()) for p in directory.iterdir()])  # noqa: RUF071
    done = subprocess.run(["grep", "-r", "-c", "-F", "-a", prefix, str(directory)],
                          capture_output=True, text=True)
    return len(done.stdout.splitlines())


def scan(directory: Path) -> int:
    return len(closure_of_dir(directory).references)


def timed(func: Callable[[Path], int], dirs: list[Path]) -> float:
    start = time.perf_counter()
    for directory in dirs:
        func(directory)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--packages", default="libcusparse,cuda_nvrtc,libcurand")
    args = parser.parse_args()
    dirs = prepare(args.packages.split(","))
    size = sum(read_all(d) for d in dirs)  # also warms the page cache
    methods: dict[str, Callable[[Path], int]] = {"read": read_all, "closure": scan}
    if shutil.which("grep"):
        methods["grep"] = grep
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(args.repeat):
        for name, func in methods.items():
            samples[name].append(timed(func, dirs))
    base = statistics.median(samples["read"])
    print(f"{len(dirs)} split packages ({', '.join(d.name for d in dirs)}), "
          f"{size / 1e6:,.0f} MB, median of {args.repeat}\n")
    print("| method | median s | MB/s | / read |\n|---|---|---|---|")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {size / 1e6 / median:,.0f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
