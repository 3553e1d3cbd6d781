"""What reading the insides (GPU code, glibc floors) costs a split, and its check on a GPU host.

Steps:

* ``run [TARBALL] [--runs N] [-j J]`` (here): the libcublas redistributable (built from the
  cached wheel unless given) split into a fresh directory with ``inside`` on and off, runs
  interleaved; prints each time, the medians and their ratio, and the time of reading the
  insides of the split's files alone (the share the split pays, on the worker thread).
* ``prepare``: wheels of cudasplit and its dependencies into ``.whl/`` for the GPU host.
* ``toolkit DIR OUT`` (on the GPU host, from ``gpu_inside.sh``): every ELF file and static
  archive under DIR (``/usr/local/cuda``) read by cudasplit and by ``DIR/bin/cuobjdump``;
  the SASS and PTX lists compared file by file into ``OUT/inventory.json``.
* ``time-host DIR OUT -j J``: a libcublas tarball made from DIR's installed files (xz, as
  NVIDIA ships them), split
  with ``inside`` on and off at ``-j J``; the times into ``OUT/timing.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cudasplit import SplitOptions, split_to_dir  # noqa: E402
from cudasplit._elf.read import fatbin_entries, read_inside  # noqa: E402


def _split_once(tarball: Path, inside: bool, jobs: int) -> float:
    out = Path(tempfile.mkdtemp(prefix="bench-inside-", dir=tarball.parent))
    try:
        start = time.perf_counter()
        split_to_dir(tarball, out / "o", SplitOptions(inside=inside, jobs=jobs, fsync=False))
        return time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _read_all(root: Path) -> float:
    start = time.perf_counter()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            read_inside(path)
    return time.perf_counter() - start


def run(tarball: Path, runs: int, jobs: int) -> dict[str, object]:
    times: dict[bool, list[float]] = {True: [], False: []}
    _split_once(tarball, True, jobs)              # warm the page cache once
    for _ in range(runs):
        for inside in (False, True):
            times[inside].append(_split_once(tarball, inside, jobs))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    out = Path(tempfile.mkdtemp(prefix="bench-inside-", dir=tarball.parent))
    try:
        split_to_dir(tarball, out / "o", SplitOptions(inside=False, jobs=jobs, fsync=False))
        alone = min(_read_all(out / "o") for _ in range(3))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"tarball": str(tarball), "bytes": tarball.stat().st_size, "jobs": jobs,
            "inside_off_s": times[False], "inside_on_s": times[True],
            "median_off_s": off, "median_on_s": on, "ratio": on / off,
            "read_insides_alone_s": alone, "share_of_split": alone / off}


def _default_tarball() -> Path:
    from tests.support.wheeltrees import WHEELS, redist_tarball  # type: ignore[attr-defined]
    return Path(redist_tarball("libcublas", WHEELS["libcublas"]))


# -- on the GPU host --------------------------------------------------------------------------

def _theirs(tool: str, path: Path) -> tuple[list[str], list[str]]:
    lists = []
    for flag, ext in (("--list-elf", "cubin"), ("--list-ptx", "ptx")):
        out = subprocess.run([tool, flag, str(path)], capture_output=True, text=True,
                             timeout=300).stdout
        lists.append(re.findall(r"\.(sm_\w+)\." + ext + "$", out, re.M))
    return lists[0], lists[1]


def _ours(path: Path) -> tuple[list[str], list[str], list[str]]:
    problems: list[str] = []
    by_object: dict[str, list[object]] = {}
    for obj, entry in fatbin_entries(path, problems):
        by_object.setdefault(obj, []).append(entry)
    sass, ptx = [], []
    for entries in by_object.values():
        chosen = [e for e in entries if e.section == ".nv_fatbin"] or entries  # type: ignore[attr-defined]
        for e in chosen:
            arch = e.arch  # type: ignore[attr-defined]
            if e.kind == "sass":  # type: ignore[attr-defined]
                sass.append(arch[:-1] if arch.endswith("f") else arch)
            elif e.kind == "ptx":  # type: ignore[attr-defined]
                ptx.append(arch)
    return sass, ptx, problems


def _binaries(root: Path) -> list[Path]:
    seen, found = set(), []
    for dirpath, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            with open(path, "rb") as fh:
                head = fh.read(8)
            if head[:4] == b"\x7fELF" or head == b"!<arch>\n":
                found.append(path)
    return sorted(found)


def toolkit(root: Path, out: Path, jobs: int) -> int:
    tool = str(root / "bin" / "cuobjdump")
    files = _binaries(root)

    def one(path: Path) -> dict[str, object]:
        start = time.perf_counter()
        sass, ptx, problems = _ours(path)
        mine = time.perf_counter() - start
        start = time.perf_counter()
        their_sass, their_ptx = _theirs(tool, path)
        theirs = time.perf_counter() - start
        return {"path": str(path), "sass": len(sass), "ptx": len(ptx), "problems": problems,
                "equal": sass == their_sass and ptx == their_ptx, "ours_s": mine,
                "cuobjdump_s": theirs}
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, files))
    bad = [r for r in results if not r["equal"]]
    summary = {"root": str(root), "files": len(results),
               "with_gpu_code": sum(1 for r in results if r["sass"] or r["ptx"]),
               "mismatches": len(bad), "ours_s": sum(r["ours_s"] for r in results),  # type: ignore[misc]
               "cuobjdump_s": sum(r["cuobjdump_s"] for r in results)}  # type: ignore[misc]
    (out / "inventory.json").write_text(json.dumps({"summary": summary, "files": results},
                                                   indent=1) + "\n")
    print(json.dumps(summary))
    for r in bad:
        print("MISMATCH", r["path"])
    return 1 if bad else 0


def time_host(root: Path, out: Path, jobs: int, runs: int) -> None:
    lib = root / "lib64"
    files = sorted(p for p in lib.iterdir() if p.name.startswith(("libcublas", "libcublasLt")))
    version = next((m[1] for p in files if (m := re.search(r"\.so\.(\d+\.\d+\.\d+)", p.name))),
                   "13.0.0")
    top = f"libcublas-linux-x86_64-{version}-archive"
    work = Path(tempfile.mkdtemp(prefix="cublas-"))
    plain = work / f"{top}.tar"
    with tarfile.open(plain, "w") as tar:
        for path in files:
            tar.add(path, f"{top}/lib/{path.name}", recursive=False)
    subprocess.run(["xz", f"-T{jobs}", "-3", "-q", str(plain)], check=True)
    result = run(Path(f"{plain}.xz"), runs, jobs)
    text = json.dumps(result, indent=1)
    (out / "timing.txt").write_text(text + "\n")
    print(text)
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    one = sub.add_parser("run")
    one.add_argument("tarball", nargs="?", type=Path)
    one.add_argument("--runs", type=int, default=3)
    one.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    sub.add_parser("prepare")
    kit = sub.add_parser("toolkit")
    kit.add_argument("root", type=Path)
    kit.add_argument("out", type=Path)
    kit.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    host = sub.add_parser("time-host")
    host.add_argument("root", type=Path)
    host.add_argument("out", type=Path)
    host.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    host.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.step == "run":
        print(json.dumps(run(args.tarball or _default_tarball(), args.runs, args.jobs),
                         indent=1))
    elif args.step == "prepare":
        from benchmarks.gpu_driver_link import build_wheels
        build_wheels()
        print(sorted(p.name for p in (REPO / ".whl").iterdir()))
    elif args.step == "toolkit":
        sys.exit(toolkit(args.root, args.out, args.jobs))
    else:
        time_host(args.root, args.out, args.jobs, args.runs)


if __name__ == "__main__":
    main()
