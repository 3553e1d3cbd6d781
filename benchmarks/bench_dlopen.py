"""Cost of the dlopen-target scan (cudasplit/_dlopen.py) against copying the same bytes.

    python benchmarks/bench_dlopen.py [--repeat N] [--cold]

Uses the real NVIDIA wheels cached by the tests (``tests/realwheels.py``: ``$CUDASPLIT_CACHE`` or
``~/.cache/cudasplit``; run the test suite once, or this script downloads the pinned set). For
each shared object: the scan's time (median of N), the time to copy the file to a temporary file
in 1 MiB chunks (what the split does with every member), and the ratio. Page cache warm unless
``--cold`` (then each measurement follows ``posix_fadvise(DONTNEED)`` on the file). Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudasplit._elf.read.dlopen import scan_dlopen  # noqa: E402
from cudasplit._elf.read.info import read_elf_info  # noqa: E402
from tests.support.realwheels import CU12, cu12  # noqa: E402


def libraries() -> list[Path]:
    found: list[Path] = []
    for name in CU12:
        root = cu12(name)
        found += [p for p in root.rglob("*.so*") if p.is_file() and not p.is_symlink()]
    return sorted(found, key=lambda p: p.stat().st_size, reverse=True)


def drop(path: Path, cold: bool) -> None:
    if cold:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def timed(function, path: Path, repeat: int, cold: bool) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        drop(path, cold)
        start = time.perf_counter()
        function(path)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def copy(path: Path) -> None:
    with open(path, "rb") as src, tempfile.NamedTemporaryFile(dir=ROOT / ".bench-cache") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    (ROOT / ".bench-cache").mkdir(exist_ok=True)
    total_scan = total_copy = total_bytes = 0.0
    print("| file | MB | scan ms | copy ms | scan/copy | found |")
    print("|---|---:|---:|---:|---:|---|")
    for path in libraries():
        info = read_elf_info(path)
        if info is None or not info.has_dynamic:
            continue
        found = scan_dlopen(path, info)
        scan = timed(lambda p, i=info: scan_dlopen(p, i), path, args.repeat, args.cold)
        copied = timed(copy, path, args.repeat, args.cold)
        size = path.stat().st_size
        total_scan, total_copy, total_bytes = total_scan + scan, total_copy + copied, \
            total_bytes + size
        names = ", ".join(t.name for t in found if t.package != "driver") or "-"
        print(f"| {path.name} | {size / 1e6:,.1f} | {scan * 1e3:,.1f} | {copied * 1e3:,.1f} | "
              f"{scan / copied:.3f} | {names} |")
    print(f"| **all** | {total_bytes / 1e6:,.0f} | {total_scan * 1e3:,.0f} | "
          f"{total_copy * 1e3:,.0f} | {total_scan / total_copy:.3f} | |")


if __name__ == "__main__":
    main()
