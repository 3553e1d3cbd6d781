"""Scaling benchmark (issue 22): ``cudasplit split -jN`` against ``tar -I 'xz -TN' -xf``.

Usage (from the repository root)::

    python benchmarks/bench_scaling.py                     # libcublas from the cu12 wheel
    python benchmarks/bench_scaling.py --from-dir /usr/local/cuda/targets/x86_64-linux/lib
    python benchmarks/bench_scaling.py --tarball some.tar.xz [--zstd some.tar.zst]
    # options: --jobs 1,2,4,8,16 (default: powers of two up to the available cores),
    #          --repeat N (best of N, default 2),
    #          --only xz-multi|xz-single|zstd|decode|batch|patch-share (repeatable),
    #          --prepare (build the tarballs only),
    #          --fsync (cudasplit's default; off here because tar does not fsync),
    #          --memory-limit SIZE (passed to cudasplit), --cache DIR, --markdown FILE

The payload is real NVIDIA bytes: by default libcublas/libcublasLt (+ headers) of the
``nvidia-cublas-cu12`` wheel laid out as a redist tarball by ``tests/wheeltrees.py`` (the wheel
is downloaded once into ``~/.cache/cudasplit``, outside the clone); with ``--from-dir DIR`` the
``libcublas*`` files (``--glob``) of DIR, e.g. a CUDA toolkit's ``targets/x86_64-linux/lib``,
under ``libcublas-linux-x86_64-<version>-archive/lib/``. The tar is compressed three ways and
cached in ``--cache`` (default ``~/.cache/cudasplit/bench-scaling``): multi-block xz
(``xz -6 --block-size=24MiB -T0``: the blocks ``xz -T`` writes by default), single-block xz
(``xz -6 -T1``; ``--single-preset`` to make it quicker to build) and ``zstd -12 -T0`` (one
frame).

``batch`` (needs ``--from-dir``): one multi-block tarball per library family of DIR
(``BATCH_FAMILIES``: libcublas, libcufft, libcusparse, ...), named as NVIDIA names them, in one
directory; ``cudasplit split -jN DIR`` (the batch) against ``tar -I 'xz -TN' -xf`` over them
one after another, N the largest ``--jobs``. ``patch-share``: the multi-block split at the
largest N with and without ``--no-patch``; the difference is what the ELF edits cost.

Every command runs as a child; wall time is the best of ``--repeat`` interleaved rounds, peak
RSS is ``ru_maxrss`` from ``os.wait4`` (the largest single process among the child and its
reaped descendants: for ``tar -I xz`` that is max(tar, xz)). Outputs are written to a scratch
directory beside the cache and removed between runs (untimed).
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 24 << 20
SINGLE_PRESET = 6  # --single-preset: xz -6 -T1 runs at ~2 MB/s; a lower preset builds faster


@dataclass
class Sample:
    wall: float
    rss_mb: float


def available_cores() -> int:
    cores = len(os.sched_getaffinity(0))
    nix = os.environ.get("NIX_BUILD_CORES", "")
    return min(int(nix), cores) if nix.isdigit() and int(nix) > 0 else cores


# Children run here, not in the clone: ``python -m cudasplit`` / ``-c`` put the working
# directory first on sys.path, and a checkout there would shadow the cudasplit under test.
CHILD_CWD = Path(tempfile.gettempdir())


def run(argv: list[str], *, cwd: Path | None = None, stdout: int | None = None) -> Sample:
    cwd = cwd or CHILD_CWD
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=stdout if stdout is not None else
                            subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {code}\n{err.decode(errors='replace')}")
    return Sample(wall, usage.ru_maxrss / 1024)


# -- the payload ------------------------------------------------------------------------------


def tar_from_wheel(cache: Path) -> Path:
    out = cache / "wheel-libcublas.tar"
    if out.exists():
        return out
    sys.path.insert(0, str(ROOT))
    from tests.support.wheeltrees import WHEELS, redist_tarball

    gz = redist_tarball("libcublas", WHEELS["libcublas"])
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        subprocess.run(["gzip", "-dc", str(gz)], stdout=fh, check=True)
    os.replace(tmp, out)
    return out


def tar_from_dir(cache: Path, directory: Path, pattern: str, version: str) -> Path:
    out = cache / f"dir-{directory.as_posix().strip('/').replace('/', '_')}.tar"
    if out.exists():
        return out
    names = sorted(os.path.basename(p) for p in glob.glob(str(directory / pattern)))
    if not names:
        raise SystemExit(f"no {pattern} in {directory}")
    top = f"libcublas-linux-x86_64-{version}-archive"
    tmp = out.with_suffix(".tmp")
    # Symlinks stay symlinks (the redist layout); the files keep their bytes.
    subprocess.run(["tar", "-cf", str(tmp), "-C", str(directory),
                    f"--transform=s,^,{top}/lib/,S", *names], check=True)
    os.replace(tmp, out)
    return out


def compressed(tar: Path, kind: str, single_preset: int = SINGLE_PRESET) -> Path:
    single = ".single.tar.xz" if single_preset == 6 else f".single{single_preset}.tar.xz"
    out = tar.with_suffix({"xz-multi": ".multi.tar.xz", "xz-single": single,
                           "zstd": ".tar.zst"}[kind])
    if out.exists():
        return out
    argv = {"xz-multi": ["xz", "-6", f"--block-size={BLOCK}", "-T0", "-c", str(tar)],
            "xz-single": ["xz", f"-{single_preset}", "-T1", "-c", str(tar)],
            "zstd": ["zstd", "-12", "-T0", "-q", "-c", str(tar)]}[kind]
    print(f"# compressing {tar.name} -> {out.name} ({' '.join(argv[:-2])})", file=sys.stderr,
          flush=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        subprocess.run(argv, stdout=fh, check=True)
    os.replace(tmp, out)
    return out


# Library families of a CUDA toolkit's targets/<arch>/lib, one redist tarball each (batch).
BATCH_FAMILIES = {"libcublas": "libcublas*", "libcufft": "libcufft*",
                  "libcusparse": "libcusparse[._]*", "libcusolver": "libcusolver*",
                  "libnpp": "libnpp*", "libcurand": "libcurand*", "libnvjpeg": "libnvjpeg*"}


def batch_dir(cache: Path, directory: Path, version: str) -> Path:
    """A directory of multi-block ``<pname>-linux-x86_64-<version>-archive.tar.xz``."""
    out = cache / "batch"
    out.mkdir(exist_ok=True)
    for pname, pattern in BATCH_FAMILIES.items():
        final = out / f"{pname}-linux-x86_64-{version}-archive.tar.xz"
        names = sorted(os.path.basename(p) for p in glob.glob(str(directory / pattern)))
        if final.exists() or not names:
            continue
        tar = cache / f"batch-{pname}.tar"
        subprocess.run(["tar", "-cf", str(tar), "-C", str(directory),
                        f"--transform=s,^,{final.name.removesuffix('.tar.xz')}/lib/,S", *names],
                       check=True)
        os.replace(compressed(tar, "xz-multi"), final)
        tar.unlink()
    return out


def xz_blocks(path: Path) -> str:
    try:
        out = subprocess.run(["xz", "--robot", "-lv", str(path)], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "?"
    for line in out.splitlines():
        if line.startswith("totals"):
            return line.split("\t")[2]
    return "?"


# -- the commands -----------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, scratch: Path) -> None:
        self.args = args
        self.scratch = scratch

    def _fresh(self) -> Path:
        out = self.scratch / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        return out

    def tar(self, path: Path, program: str | None) -> Sample:
        out = self._fresh()
        argv = ["tar", "-xf", str(path), "-C", str(out)]
        if program:
            argv[1:1] = ["-I", program]
        return run(argv)

    def cudasplit(self, path: Path, jobs: int, *extra: str) -> Sample:
        out = self._fresh() / "split"
        argv = [sys.executable, "-m", "cudasplit", "split", "-q", f"-j{jobs}", *extra, "-o",
                str(out), str(path)]
        if not self.args.fsync:
            argv.insert(4, "--no-fsync")
        if self.args.memory_limit:
            argv.insert(4, f"--memory-limit={self.args.memory_limit}")
        return run(argv)

    def decode(self, path: Path, jobs: int) -> Sample:
        code = ("import sys; from pathlib import Path; "
                "from cudasplit._source.codecs import open_decompressed\n"
                "with open_decompressed(Path(sys.argv[1]), jobs=int(sys.argv[2])) as f:\n"
                "    while f.read(1 << 20): pass\n")
        return run([sys.executable, "-c", code, str(path), str(jobs)])

    def xz_dc(self, path: Path, jobs: int) -> Sample:
        return run(["xz", "-dc", f"-T{jobs}", str(path)])

    def tar_each(self, directory: Path, jobs: int) -> Sample:
        """``tar -I 'xz -TN' -xf`` over every tarball of ``directory``, one after another."""
        out = self._fresh()
        script = ('for f in "$1"/*.tar.xz; do d="$2/$(basename "$f" .tar.xz)"; mkdir "$d" && '
                  'tar -I "xz -T$3" -xf "$f" -C "$d" || exit 1; done')
        return run(["sh", "-c", script, "sh", str(directory), str(out), str(jobs)])


def table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


SECTIONS = ("xz-multi", "xz-single", "zstd", "decode")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tarball", type=Path, help="an existing multi-block .tar.xz")
    parser.add_argument("--zstd", type=Path, help="an existing .tar.zst (with --tarball)")
    parser.add_argument("--single", type=Path, help="an existing single-block .tar.xz")
    parser.add_argument("--from-dir", type=Path, help="build the tar from DIR's --glob files")
    parser.add_argument("--glob", default="libcublas*")
    parser.add_argument("--version", default="13.0.0.0", help="version in the top dir name")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "CUDASPLIT_CACHE", Path.home() / ".cache" / "cudasplit")) / "bench-scaling")
    parser.add_argument("--jobs", help="comma-separated N (default 1,2,4,... up to the cores)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", action="append", choices=[*SECTIONS, "batch", "patch-share"])
    parser.add_argument("--single-preset", type=int, default=SINGLE_PRESET,
                        help="xz preset of the single-block tarball (default 6)")
    parser.add_argument("--prepare", action="store_true",
                        help="only build (and cache) the tarballs, time nothing")
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--memory-limit")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)

    cores = available_cores()
    jobs = ([int(j) for j in args.jobs.split(",")] if args.jobs
            else [n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n <= cores])
    only = set(args.only or SECTIONS)
    args.cache.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    if args.tarball:
        files["xz-multi"] = args.tarball
        if args.zstd:
            files["zstd"] = args.zstd
        if args.single:
            files["xz-single"] = args.single
    else:
        tar = (tar_from_dir(args.cache, args.from_dir, args.glob, args.version)
               if args.from_dir else tar_from_wheel(args.cache))
        for kind in ("xz-multi", "xz-single", "zstd"):
            if kind in only or (kind == "xz-multi" and only & {"decode", "patch-share"}):
                files[kind] = compressed(tar, kind, args.single_preset)
        if "batch" in only:
            if not args.from_dir:
                parser.error("--only batch needs --from-dir (library families of a toolkit)")
            files["batch"] = batch_dir(args.cache, args.from_dir, args.version)

    if args.prepare:
        print("\n".join(f"{kind}: {path}" for kind, path in files.items()))
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="bench-scaling-", dir=args.cache))
    bench = Bench(args, scratch)
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    where = subprocess.run([sys.executable, "-c", "import cudasplit; print(cudasplit.__file__)"],
                           cwd=CHILD_CWD, capture_output=True, text=True,
                           check=True).stdout.strip()
    print(f"# cudasplit under test: {where}", file=sys.stderr, flush=True)
    report = [f"Machine: {cores} cores available ({cpu}), load average "
              f"{os.getloadavg()[0]:.1f} at start; best of {args.repeat}; cudasplit "
              f"{'with' if args.fsync else 'without'} fsync"
              + (f", --memory-limit {args.memory_limit}" if args.memory_limit else "") + ".\n"]
    try:
        report += run_sections(bench, files, jobs, only, args.repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = "\n".join(report)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


def _mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.0f} MB"


def run_sections(bench: Bench, files: dict[str, Path], jobs: list[int], only: set[str],
                 repeat: int) -> list[str]:
    out: list[str] = []
    multi = files.get("xz-multi")
    if multi is not None and "xz-multi" in only:
        names = [(f"split-j{n}", lambda n=n: bench.cudasplit(multi, n)) for n in jobs]
        names += [(f"tar-T{n}", lambda n=n: bench.tar(multi, f"xz -T{n}")) for n in jobs]
        best = _interleaved(names, repeat)
        rows = []
        for n in jobs:
            s, t = best[f"split-j{n}"], best[f"tar-T{n}"]
            rows.append((str(n), f"{s.wall:.2f}", f"{t.wall:.2f}", f"{s.wall / t.wall:.2f}",
                         f"{s.rss_mb:.0f}", f"{t.rss_mb:.0f}"))
        out.append(table(f"Multi-block xz ({_mb(multi)}, {xz_blocks(multi)} blocks): "
                         "`cudasplit split -jN` vs `tar -I 'xz -TN' -xf`",
                         ("N", "split s", "tar s", "ratio", "split RSS MB", "tar RSS MB"),
                         rows))
    if multi is not None and "decode" in only:
        names = [(f"decode-j{n}", lambda n=n: bench.decode(multi, n)) for n in jobs]
        names += [(f"xzdc-T{n}", lambda n=n: bench.xz_dc(multi, n)) for n in jobs]
        best = _interleaved(names, repeat)
        rows = [(str(n), f"{best[f'decode-j{n}'].wall:.2f}", f"{best[f'xzdc-T{n}'].wall:.2f}",
                 f"{best[f'decode-j{n}'].wall / best[f'xzdc-T{n}'].wall:.2f}",
                 f"{best[f'decode-j{n}'].rss_mb:.0f}", f"{best[f'xzdc-T{n}'].rss_mb:.0f}")
                for n in jobs]
        out.append(table("Decoder alone: `open_decompressed(jobs=N)` read to the end vs "
                         "`xz -dc -TN >/dev/null`",
                         ("N", "decoder s", "xz -dc s", "ratio", "decoder RSS MB", "xz RSS MB"),
                         rows))
    for kind, label in (("xz-single", "`tar -xJf`"), ("zstd", "`tar --zstd -xf`")):
        path = files.get(kind)
        if path is None or kind not in only:
            continue
        flag = "-J" if kind == "xz-single" else "--zstd"
        ends = sorted({jobs[0], jobs[-1]})
        names = [(f"split-j{n}", lambda n=n, p=path: bench.cudasplit(p, n)) for n in ends]
        names.append(("tar", lambda p=path, f=flag: run(["tar", f, "-xf", str(p), "-C",
                                                        str(bench._fresh())])))
        best = _interleaved(names, repeat)
        t = best["tar"]
        rows = [(str(n), f"{best[f'split-j{n}'].wall:.2f}", f"{t.wall:.2f}",
                 f"{best[f'split-j{n}'].wall / t.wall:.2f}", f"{best[f'split-j{n}'].rss_mb:.0f}",
                 f"{t.rss_mb:.0f}") for n in ends]
        what = "single-block xz" if kind == "xz-single" else "zstd (one frame)"
        out.append(table(f"{what} ({_mb(path)}): `cudasplit split -jN` vs {label}",
                         ("N", "split s", "tar s", "ratio", "split RSS MB", "tar RSS MB"),
                         rows))
    out += _batch_and_patch_share(bench, files, jobs[-1], only, repeat)
    return out


def _batch_and_patch_share(bench: Bench, files: dict[str, Path], top: int, only: set[str],
                           repeat: int) -> list[str]:
    out: list[str] = []
    batch = files.get("batch")
    if batch is not None and "batch" in only:
        tarballs = sorted(batch.glob("*.tar.xz"))
        best = _interleaved([("split", lambda: bench.cudasplit(batch, top)),
                             ("tar", lambda: bench.tar_each(batch, top))], repeat)
        s, t = best["split"], best["tar"]
        size = sum(p.stat().st_size for p in tarballs) / 1e6
        out.append(table(f"A release at once: {len(tarballs)} multi-block tarballs "
                         f"({size:.0f} MB: {', '.join(p.name.split('-')[0] for p in tarballs)}):"
                         f" `cudasplit split -j{top} DIR` vs `tar -I 'xz -T{top}' -xf` over "
                         "them one after another",
                         ("N", "split s", "tar s", "ratio", "split RSS MB", "tar RSS MB"),
                         [(str(top), f"{s.wall:.2f}", f"{t.wall:.2f}", f"{s.wall / t.wall:.2f}",
                           f"{s.rss_mb:.0f}", f"{t.rss_mb:.0f}")]))
    multi = files.get("xz-multi")
    if multi is not None and "patch-share" in only:
        best = _interleaved([("patch", lambda: bench.cudasplit(multi, top)),
                             ("no-patch", lambda: bench.cudasplit(multi, top, "--no-patch"))],
                            repeat)
        p, n = best["patch"], best["no-patch"]
        out.append(table(f"ELF edits' share of a split (multi-block xz, {_mb(multi)}, -j{top})",
                         ("split s", "--no-patch s", "ELF edits s", "share"),
                         [(f"{p.wall:.2f}", f"{n.wall:.2f}", f"{p.wall - n.wall:.2f}",
                           f"{(p.wall - n.wall) / p.wall:.1%}")]))
    return out


def _interleaved(named: list[tuple[str, object]], repeat: int) -> dict[str, Sample]:
    rounds: list[dict[str, Sample]] = []
    for _ in range(repeat):
        results: dict[str, Sample] = {}
        for name, thunk in named:
            results[name] = thunk()  # type: ignore[operator]
            print(f"#   {name}: {results[name].wall:.2f} s, {results[name].rss_mb:.0f} MB",
                  file=sys.stderr, flush=True)
        rounds.append(results)
    return {name: Sample(min(r[name].wall for r in rounds), max(r[name].rss_mb for r in rounds))
            for name, _ in named}


if __name__ == "__main__":
    raise SystemExit(main())
