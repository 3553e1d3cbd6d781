"""Decompression benchmark: system binaries vs cudasplit's in-process decoders.

Usage (from the repository root)::

    python benchmarks/bench_decompress.py [--size-mb 500] [--repeat 3] [--only SUBSTRING]

The payload is a tar of real CUDA library bytes (``libcublas``/``libcublasLt`` from the
``nvidia-cublas-cu12`` wheel in ``.bench-cache/wheels``; get it first with
``pip download --no-deps nvidia-cublas-cu12 -d .bench-cache/wheels``) plus headers and
text, cut to ``--size-mb``.  Without the wheel, a synthetic mix of text and random-ish
binary is used.  The tar and its compressed forms (single-block xz ``xz -6 -T1``,
multi-block xz ``xz -6 -T2`` = 24 MiB blocks, ``xz -9 -T2`` = 192 MiB blocks, and
``zstd -9``) are cached under ``.bench-cache/decompress/``.

``BENCH_CUDASPLIT_PATH`` overrides where the children import ``cudasplit`` from.

Every measurement runs in its own child process (output thrown away), in ``--repeat``
interleaved rounds, and the fastest run of each is reported.  CPU time (user+sys) and peak
RSS come from ``os.wait4`` of that child: the rusage of the child and its reaped
descendants, as ``getrusage(RUSAGE_CHILDREN)`` would add them up; ``ru_maxrss`` is the
largest single process, not a sum, so for the external path it is max(python, xz).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench-cache"
WORK = CACHE / "decompress"
WHEELS = CACHE / "wheels"

# The child that decodes in-process: reads the stream in tarfile-sized pieces (what the
# splitter does) and discards them.
PY_READER = """
import os, sys, lzma
sys.path.insert(0, os.environ.get("BENCH_CUDASPLIT_PATH", {root!r}))
from pathlib import Path
mode, path, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = 0
if mode == "stdlib-lzma":
    with lzma.open(path, "rb") as fh:
        while b := fh.read(1 << 16):
            n += len(b)
else:
    from cudasplit._source.codecs import open_decompressed
    kw = dict(jobs=jobs, external=(mode == "external"))
    if mode == "threaded":
        kw["background"] = True
    with open_decompressed(Path(path), **kw) as fh:
        while b := fh.read(1 << 16):
            n += len(b)
print(n)
"""


@dataclass
class Result:
    name: str
    wall: float
    cpu: float
    rss_mb: float


def _run(argv: list[str]) -> tuple[float, float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure_all(items: list[tuple[str, list[str]]], repeat: int) -> list[Result]:
    """Run every item once per round, ``repeat`` rounds; keep each item's fastest run.

    Interleaving rounds (rather than repeating one item back to back) spreads the load of
    a shared machine evenly over the items.
    """
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in items}
    for round_no in range(repeat):
        for name, argv in items:
            runs[name].append(_run(argv))
            wall, cpu, rss = runs[name][-1]
            print(f"  [{round_no + 1}/{repeat}] {name}: {wall:.2f} s wall, {cpu:.2f} s cpu, "
                  f"{rss:.0f} MB", file=sys.stderr)
    return [Result(name, *min(runs[name])) for name, _ in items]


def _wheel_members() -> list[tuple[str, bytes]]:
    wheels = sorted(WHEELS.glob("nvidia_cublas_cu12-*.whl"))
    if not wheels:
        return []
    out = []
    with zipfile.ZipFile(wheels[0]) as zf:
        # Small files first so that headers and text survive the cut to --size-mb.
        for info in sorted(zf.infolist(), key=lambda i: i.file_size):
            out.append((info.filename, zf.read(info)))
    return out


def _synthetic_members(size: int) -> list[tuple[str, bytes]]:
    text = b"".join(b"#define CUBLAS_THING_%d %d /* a header line */\n" % (i, i * 7)
                    for i in range(size // 200))
    binary = bytearray(os.urandom(size // 2))
    binary[:: 3] = bytes(len(binary[:: 3]))  # make it partly compressible, like code
    return [("include/things.h", text), ("lib/libthing.so", bytes(binary))]


def build_payload(size_mb: int) -> Path:
    tar_path = WORK / f"payload-{size_mb}mb.tar"
    if tar_path.exists():
        return tar_path
    members = _wheel_members() or _synthetic_members(size_mb << 20)
    budget = size_mb << 20
    tmp = tar_path.with_suffix(".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            data = data[:budget]
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
            budget -= len(data)
            if budget <= 0:
                break
    tmp.rename(tar_path)
    return tar_path


def compress(tar_path: Path) -> dict[str, Path]:
    variants = {
        "xz-single": (["xz", "-6", "-T1", "-c"], ".single.xz"),
        "xz-multi": (["xz", "-6", "-T2", "-c"], ".multi.xz"),
        # -9 -T2: 192 MiB blocks and a 64 MiB dictionary, the worst case for memory.
        "xz-multi-9": (["xz", "-9", "-T2", "-c"], ".multi9.xz"),
    }
    if shutil.which("zstd"):  # optional: the zstd rows are left out without it
        variants["zstd"] = (["zstd", "-9", "-T2", "-q", "-c"], ".zst")
    out = {}
    for key, (argv, suffix) in variants.items():
        path = tar_path.with_name(tar_path.name + suffix)
        if not path.exists():
            print(f"compressing {path.name} ...", file=sys.stderr)
            tmp = path.with_suffix(".tmp")
            with open(tar_path, "rb") as src, open(tmp, "wb") as dst:
                subprocess.run([*argv, "-"], stdin=src, stdout=dst, check=True)
            tmp.rename(path)
        out[key] = path
    return out


def plan(files: dict[str, Path]) -> list[tuple[str, list[str]]]:
    py = [sys.executable, "-c", PY_READER.format(root=str(ROOT))]
    single, multi = str(files["xz-single"]), str(files["xz-multi"])
    big = str(files["xz-multi-9"])
    items = [
        ("xz -dc (single-block)", ["xz", "-dc", single]),
        ("xz -dc (multi-block)", ["xz", "-dc", multi]),
        ("xz -T2 -dc (multi-block)", ["xz", "-T2", "-dc", multi]),
        ("python lzma.open (single-block)", [*py, "stdlib-lzma", single, "1"]),
        ("cudasplit jobs=1 (single-block)", [*py, "inproc", single, "1"]),
        ("cudasplit jobs=1 (multi-block)", [*py, "inproc", multi, "1"]),
        ("cudasplit jobs=1 threaded (multi-block)", [*py, "threaded", multi, "1"]),
        ("cudasplit jobs=2 (multi-block)", [*py, "inproc", multi, "2"]),
        ("cudasplit jobs=2 threaded (single-block)", [*py, "threaded", single, "2"]),
        ("cudasplit external jobs=2 (multi-block)", [*py, "external", multi, "2"]),
        ("cudasplit external jobs=1 (single-block)", [*py, "external", single, "1"]),
        ("xz -T2 -dc (-9, 192 MiB blocks)", ["xz", "-T2", "-dc", big]),
        ("cudasplit jobs=2 (-9, 192 MiB blocks)", [*py, "inproc", big, "2"]),
        ("cudasplit external jobs=2 (-9, 192 MiB blocks)", [*py, "external", big, "2"]),
    ]
    if "zstd" not in files:
        return items
    zst = str(files["zstd"])
    return [
        *items,
        ("zstd -dc", ["zstd", "-dcq", zst]),
        ("cudasplit in-process zstd jobs=1", [*py, "inproc", zst, "1"]),
        ("cudasplit in-process zstd jobs=2 (read-ahead thread)", [*py, "inproc", zst, "2"]),
        ("cudasplit external zstd", [*py, "external", zst, "1"]),
    ]


def table(results: list[Result], baseline: float) -> str:
    lines = [
        "| measurement | wall s | wall vs `xz -dc` | CPU s | peak RSS MB |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r.name} | {r.wall:.2f} | {r.wall / baseline:.2f} | {r.cpu:.2f} "
                     f"| {r.rss_mb:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="",
                        help="comma-separated substrings: run only measurements naming one")
    parser.add_argument("--prepare", action="store_true", help="only build the cached files")
    args = parser.parse_args()
    if shutil.which("xz") is None:
        raise SystemExit("xz is needed for this benchmark")
    WORK.mkdir(parents=True, exist_ok=True)
    if args.prepare:
        compress(build_payload(args.size_mb))
        return
    # Preparing reads the wheel into memory; done in a child so that this process stays
    # small: a child's ru_maxrss starts at its parent's RSS at fork time.
    subprocess.run([sys.executable, __file__, "--prepare", "--size-mb", str(args.size_mb)],
                   check=True)
    tar_path = build_payload(args.size_mb)
    files = compress(tar_path)
    sizes = ", ".join(f"{k} {p.stat().st_size / 1e6:.0f} MB" for k, p in files.items())
    print(f"payload: {tar_path.stat().st_size / 1e6:.0f} MB tar; {sizes}\n", file=sys.stderr)
    wanted = args.only.split(",")
    items = [(name, argv) for name, argv in plan(files) if any(w in name for w in wanted)]
    results = measure_all(items, args.repeat)
    baseline = next((r.wall for r in results if r.name.startswith("xz -dc (single")),
                    results[0].wall)
    print(f"payload {tar_path.stat().st_size / 1e6:.0f} MB tar; {sizes}; "
          f"min of {args.repeat} runs; {os.cpu_count()} CPUs\n")
    print(table(results, baseline))


if __name__ == "__main__":
    main()
