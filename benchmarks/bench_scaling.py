"""Scaling benchmark (issues 22, 34): ``cudasplit split`` against ``tar`` for every codec and
``-jN``, a release at once, and start-up; every row with its ratio, from one run.

Usage (from the repository root)::

    python benchmarks/bench_scaling.py                     # the cu12 wheels' libraries (2 cores)
    python benchmarks/bench_scaling.py --from-dir /usr/local/cuda/targets/x86_64-linux/lib
    python benchmarks/bench_scaling.py --tarball some.tar.xz [--zstd F] [--single F]
    # options: --jobs 1,2,4,8,16 (default: powers of two up to the available cores),
    #          --repeat N (interleaved rounds, default 3: median and min are printed),
    #          --only SECTION (repeatable; default: all of them),
    #          --prepare (build the tarballs only), --json FILE (every sample),
#          --deadline SECONDS (leave out rounds that would end later; at least one runs),
    #          --report FILE [FILE...] (print the tables of earlier --json runs, merged),
    #          --fsync (cudasplit's default; off here because tar does not fsync),
    #          --memory-limit SIZE (passed to cudasplit), --cache DIR, --markdown FILE

Sections (``--only``), each a table, then a summary against issue 34's targets:

* ``startup``: ``cudasplit --version`` and ``cudasplit split --help`` against ``python -c
  pass`` (10 rounds), and ``python -X importtime``: of ``import cudasplit.cli``, and of a
  whole split of the sample tarball (every import a split needs), its biggest entries.
* ``xz-multi``: ``split -jN`` against ``tar -I 'xz -TN' -xf`` for every N.
* ``xz-single``: ``split -j1`` and ``-j<largest N>`` against ``tar -xJf``.
* ``zstd``: ``split -j1`` against ``tar -I 'zstd -T1' -xf``, ``-j<largest N>`` against
  ``tar -I 'zstd -T0' -xf``.
* ``batch``: one multi-block tarball per library family (``BATCH_FAMILIES``), ``split
  -j<largest N> DIR`` against ``tar -I 'xz -TN' -xf`` over them one after another.
* ``decode`` (the decoder alone against ``xz -dc -TN``) and ``patch-share`` (with and without
  ``--no-patch``): explanations, not targets.

Payload: real NVIDIA bytes. ``--from-dir DIR``: the ``--glob`` files of DIR (a CUDA toolkit's
``targets/x86_64-linux/lib``: ``libcublas*``) under ``libcublas-linux-x86_64-<version>-archive/
lib/``; without it, the cu12 wheels' ``libcublas.so.12`` (105 MB; batch: with libcurand and
libcufftw), hard-linked into the cache from the wheel cache (``tests/support/realwheels.py``).
The tar is compressed three ways and cached in ``--cache`` (default
``~/.cache/cudasplit/bench-scaling``): multi-block xz (``xz -6 --block-size=24MiB -T0``),
single-block xz (``xz -6 -T1``; ``--single-preset`` and ``--single-glob`` make it quicker to
build) and ``zstd -12 -T0`` (one frame).

Every command runs as a child, interleaved: round 1 runs every command once, then round 2 ...;
wall time is reported as the median and the minimum of the rounds, the ratio as median/median
and min/min; peak RSS is ``ru_maxrss`` from ``os.wait4`` (the largest single process among the
child and its reaped descendants: for ``tar -I xz`` that is max(tar, xz)), the largest of the
rounds. Outputs go to a scratch directory beside the cache, removed between runs (untimed).
Children run with ``PYTHONDONTWRITEBYTECODE`` unset and cudasplit's modules compiled first, as
an installed wheel has them (a checkout without ``__pycache__`` would compile on every start).
"""

from __future__ import annotations

import argparse
import compileall
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 24 << 20
SINGLE_PRESET = 6  # --single-preset: xz -6 -T1 runs at ~2 MB/s; a lower preset builds faster
SAMPLE = ROOT / "fixtures" / "cuda_sample-linux-x86_64-12.9.79-archive.tar.xz"
# Children run here, not in the clone: ``python -m cudasplit`` / ``-c`` put the working
# directory first on sys.path, and a checkout there would shadow the cudasplit under test.
CHILD_CWD = Path(tempfile.gettempdir())
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Sample:
    wall: float
    rss_mb: float
    cpu: float = 0.0   # user + system seconds of the child and its reaped descendants


@dataclass
class Stat:
    """The rounds of one command: wall median and minimum, largest peak RSS."""

    walls: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    @property
    def min(self) -> float:
        return min(self.walls)

    @property
    def rss_mb(self) -> float:
        return max(self.rss)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus) if self.cpus else 0.0


def available_cores() -> int:
    cores = len(os.sched_getaffinity(0))
    nix = os.environ.get("NIX_BUILD_CORES", "")
    return min(int(nix), cores) if nix.isdigit() and int(nix) > 0 else cores


def run(argv: list[str], *, cwd: Path | None = None) -> Sample:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd or CHILD_CWD, env=CHILD_ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {code}\n{err.decode(errors='replace')}")
    return Sample(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


# -- the payload ------------------------------------------------------------------------------

# The cu12 wheels' libraries of the default payload: (wheel, version, file) -> family.
WHEEL_LIBS = (("nvidia-cublas-cu12", "12.9.1.4", "nvidia/cublas/lib/libcublas.so.12"),
              ("nvidia-curand-cu12", "10.3.10.19", "nvidia/curand/lib/libcurand.so.10"),
              ("nvidia-cufft-cu12", "11.4.1.4", "nvidia/cufft/lib/libcufftw.so.11"))


def wheel_lib_dir(cache: Path) -> Path:
    """A directory of the wheels' libraries (hard links into the wheel cache, else copies)."""
    out = cache / "wheel-libs"
    out.mkdir(exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.support.realwheels import wheel_root

    for name, version, rel in WHEEL_LIBS:
        dest = out / Path(rel).name
        if not dest.exists():
            src = wheel_root(name, version) / rel
            try:
                os.link(src, dest)
            except OSError:
                shutil.copyfile(src, dest)
    return out


def tar_from_dir(cache: Path, directory: Path, pattern: str, version: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9.]+", "_", f"{directory.as_posix().strip('/')}_{pattern}")
    out = cache / f"dir-{slug}.tar"
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
    out = cache / f"batch-{re.sub(r'[^A-Za-z0-9.]+', '_', directory.as_posix().strip('/'))}"
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

    def tar(self, path: Path, program: str | None, flag: str | None = None) -> Sample:
        out = self._fresh()
        argv = ["tar", *([flag] if flag else []), "-xf", str(path), "-C", str(out)]
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

    def variant(self, path: Path, jobs: int, name: str, *extra: str) -> Sample:
        """``cudasplit split`` with one choice of its data path replaced (:data:`VARIANTS`)."""
        out = self._fresh() / "split"
        code = (VARIANTS[name][1] + "import sys\nfrom cudasplit._launch import run\n"
                "sys.argv = ['cudasplit', *sys.argv[1:]]\nrun()\n")
        return run([sys.executable, "-c", code, "split", "-q", "--no-fsync", f"-j{jobs}",
                    *extra, "-o", str(out), str(path)])

    def decode(self, path: Path, jobs: int, external: bool | None = None) -> Sample:
        code = ("import sys; from pathlib import Path; "
                "from cudasplit._source.codecs import open_decompressed\n"
                "external = {'None': None, 'True': True, 'False': False}[sys.argv[3]]\n"
                "with open_decompressed(Path(sys.argv[1]), jobs=int(sys.argv[2]), "
                "external=external) as f:\n"
                "    skip = getattr(type(f), 'skip', None)\n"
                "    while (skip(f, 1 << 30) if skip else len(f.read1(1 << 20))): pass\n")
        return run([sys.executable, "-c", code, str(path), str(jobs), str(external)])

    def zstd_dc(self, path: Path) -> Sample:
        return run(["zstd", "-dcq", "-T0", str(path)])

    def xz_dc(self, path: Path, jobs: int) -> Sample:
        return run(["xz", "-dc", f"-T{jobs}", str(path)])

    def tar_each(self, directory: Path, jobs: int) -> Sample:
        """``tar -I 'xz -TN' -xf`` over every tarball of ``directory``, one after another."""
        out = self._fresh()
        script = ('for f in "$1"/*.tar.xz; do d="$2/$(basename "$f" .tar.xz)"; mkdir "$d" && '
                  'tar -I "xz -T$3" -xf "$f" -C "$d" || exit 1; done')
        return run(["sh", "-c", script, "sh", str(directory), str(out), str(jobs)])


# Each choice the data path makes, and how a child replaces it (``Bench.variant``): the code
# runs before the CLI. ``chosen`` is the split as shipped.
VARIANTS: dict[str, tuple[str, str]] = {
    "chosen": ("as shipped: the decoder of `_source/codecs/choice.py`, member bytes moved in "
               "the kernel, large files read by the reading process", ""),
    "library decoder": (
        "the in-process library decoder instead of the binary",
        "import cudasplit._source.codecs as c\n"
        "real = c.choose_decoder\n"
        "c.choose_decoder = lambda codec, **kw: real(codec, **{**kw, 'external': False})\n"),
    "read and write": (
        "the binary's pipe read into Python and written (`os.read`/`os.write`), no splice",
        "import cudasplit._source.codecs.fdreader as f\nf.FdReader.transfer_to = None\n"),
    "reads in-process": (
        "large files read on the split's own threads, not by the reading process",
        "import cudasplit._split.gpucode as i\ni.BACKGROUND_FROM = 1 << 62\n"),
    "--no-inside": ("no GPU code and glibc floors read (the dlopen scan stays)", ""),
}


# --deadline: a round is not started when it would end past this (time.monotonic()); at least
# one round always runs, so a slow machine prints fewer rounds instead of nothing.
DEADLINE = [float("inf")]


def interleaved(named: list[tuple[str, Callable[[], Sample]]], repeat: int
                ) -> dict[str, Stat]:
    stats = {name: Stat() for name, _ in named}
    last = 0.0  # how long the previous round took
    for done in range(repeat):
        started = time.monotonic()
        if done and started + last > DEADLINE[0]:
            print(f"# --deadline: {done} rounds of {repeat}", file=sys.stderr, flush=True)
            break
        for name, thunk in named:
            sample = thunk()
            stats[name].walls.append(sample.wall)
            stats[name].rss.append(sample.rss_mb)
            stats[name].cpus.append(sample.cpu)
            print(f"#   {name}: {sample.wall:.3f} s, {sample.rss_mb:.0f} MB", file=sys.stderr,
                  flush=True)
        last = time.monotonic() - started
    return stats


# -- where the time goes ----------------------------------------------------------------------

# What a sampled frame of the main thread stands for, first match wins (py-spy --threads
# --idle: idle samples are kept, so a thread's samples add up to its life).
PHASES = (
    ("moves member bytes (splice, or waits in it for the decoder)",
     ("FdReader.transfer_to", "FdReader._kernel_move", "FdReader.skip", "FdReader._drop")),
    ("waits for decoded bytes (headers, the library decoder)",
     ("FdReader.read", "ChunkReader._fill", "BlockPipeline._take", "ChunkReader.read")),
    ("starts: imports, rules, layout", ("_find_and_load", "_call_with_frames_removed",
                                        "prepare (", "load_rules")),
    ("waits for the reading process", ("BackgroundReads.result", "wait_early")),
    ("ends: links, patches, report, promotion", ("EndOfRun.", "settle", "finish (",
                                                 "Promotion.", "assemble")),
    ("reads headers, classifies, writes small files", ("SplitRun._take", "_iterate",
                                                       "Placer.place")),
)
# A thread waiting, whatever for (the share of its life it did nothing).
IDLE = ("Condition.wait", "Event.wait", "Future.result", "_read_exact", "_receive",
        "Thread.join", "_wait_for_tstate_lock", "select (", "Popen.wait", "_try_wait",
        "waiter.<locals>.wait", "_worker (")


def _thread_name(frames: list[str]) -> str:
    """py-spy's ``process PID:"cmd";thread (TID): name;...``: the reading process (its own
    ``python -S -c``), the main thread (TID = PID, named or not yet), or the thread's name."""
    process = frames[0] if frames and frames[0].startswith("process") else ""
    if '"' in process and " -S -c " in process:
        return "reading process"
    thread = next((f for f in frames[:3] if f.startswith("thread")), "")
    found = re.match(r"thread \((\d+)\)(?::\s*(.*))?", thread)
    pid = re.match(r"process (\d+)", process)
    if found is None:
        return "?"
    if pid is not None and found[1] == pid[1]:
        return "MainThread"
    return re.sub(r"_\d+$", "", found[2] or f"thread {found[1]}")


def profile(bench: Bench, path: Path, jobs: int) -> dict[str, object]:
    """One split under ``py-spy record --threads --idle --subprocesses``: per thread, its
    samples and where the main thread's went (:data:`PHASES`)."""
    spy = shutil.which("py-spy")
    if spy is None:
        return {"error": "py-spy not on PATH (pip install py-spy)"}
    raw = bench.scratch / "profile.txt"
    out = bench._fresh() / "split"
    argv = [spy, "record", "--threads", "--idle", "--subprocesses", "-r", "500", "-f", "raw",
            "-o", str(raw), "--", sys.executable, "-m", "cudasplit", "split", "-q",
            "--no-fsync", f"-j{jobs}", "-o", str(out), str(path)]
    sample = run(argv)
    threads: dict[str, list[int]] = {}
    main: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        name = _thread_name(frames)
        seen = threads.setdefault(name, [0, 0])
        seen[0] += int(count)
        if any(mark in frames[-1] for mark in IDLE):
            seen[1] += int(count)
        if name == "MainThread":
            phase = next((label for label, marks in PHASES
                          if any(mark in frame for frame in reversed(frames)
                                 for mark in marks)), "other")
            main[phase] = main.get(phase, 0) + int(count)
    return {"wall": sample.wall, "threads": {k: v[0] for k, v in threads.items()},
            "idle": {k: v[1] for k, v in threads.items()}, "main": main}


# -- start-up ---------------------------------------------------------------------------------


def importtime(argv: list[str]) -> dict[str, tuple[int, int]]:
    """``python -X importtime ARGV``: module -> (self us, cumulative us)."""
    err = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=CHILD_CWD,
                         env=CHILD_ENV, capture_output=True, text=True, check=True).stderr
    found: dict[str, tuple[int, int]] = {}
    for line in err.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            found[parts[2].strip()] = (int(parts[0]), int(parts[1]))
    return found


def startup(bench: Bench, rounds: int) -> dict[str, object]:
    """The start-up rows: wall of three commands, and what a split imports."""
    me = [sys.executable]
    stats = interleaved([
        ("python -c pass", lambda: run([*me, "-c", "pass"])),
        ("cudasplit --version", lambda: run([*me, "-m", "cudasplit", "--version"])),
        ("cudasplit split --help", lambda: run([*me, "-m", "cudasplit", "split", "--help"])),
    ], rounds)
    cli = min((importtime(["-c", "import cudasplit.cli"]) for _ in range(3)),
              key=lambda t: t.get("cudasplit.cli", (0, 0))[1])
    out = bench._fresh() / "sample"
    splits = []
    for _ in range(3):
        shutil.rmtree(out, ignore_errors=True)
        splits.append(importtime(["-m", "cudasplit", "split", "-q", "--no-fsync", "-o",
                                  str(out), str(SAMPLE)]))
    split = min(splits, key=lambda t: sum(s for s, _ in t.values()))
    return {"stats": {k: asdict(v) for k, v in stats.items()},
            "import_cli_us": cli.get("cudasplit.cli", (0, 0))[1],
            "import_cli_modules": len(cli),
            "split_import_us": sum(s for s, _ in split.values()),
            "split_modules": len(split),
            "split_cudasplit_modules": sum(1 for m in split if m.startswith("cudasplit")),
            "split_top": sorted(((m, c) for m, (_, c) in split.items()
                                 if m.startswith("cudasplit")), key=lambda mc: -mc[1])[:6]}


# -- the sections ---------------------------------------------------------------------------


def payload(args: argparse.Namespace, only: set[str]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    if args.tarball or args.zstd or args.single:
        for kind, path in (("xz-multi", args.tarball), ("zstd", args.zstd),
                           ("xz-single", args.single)):
            if path:
                files[kind] = path
        return files
    directory = args.from_dir or wheel_lib_dir(args.cache)
    pattern = args.glob or ("libcublas*" if args.from_dir else "libcublas.so*")
    tar = tar_from_dir(args.cache, directory, pattern, args.version)
    every = bool(only & {"choices", "profile"})
    for kind in ("xz-multi", "zstd"):
        if kind in only or "decode" in only or every or (kind == "xz-multi"
                                                        and "patch-share" in only):
            files[kind] = compressed(tar, kind)
    if "xz-single" in only or every or "decode" in only:
        single = (tar_from_dir(args.cache, directory, args.single_glob, args.version)
                  if args.single_glob else tar)
        files["xz-single"] = compressed(single, "xz-single", args.single_preset)
    if "batch" in only:
        files["batch"] = batch_dir(args.cache, directory, args.version)
    return files


def run_sections(bench: Bench, files: dict[str, Path], jobs: list[int], only: set[str],
                 repeat: int) -> dict[str, object]:
    """Every section asked for: raw statistics, for the tables and --json."""
    top = jobs[-1]
    results: dict[str, object] = {}
    if "startup" in only:
        results["startup"] = startup(bench, max(repeat, 10))
    multi = files.get("xz-multi")
    if multi is not None and "xz-multi" in only:
        named: list[tuple[str, Callable[[], Sample]]] = []
        for n in jobs:
            named += [(f"split -j{n}", lambda n=n: bench.cudasplit(multi, n)),
                      (f"tar -I 'xz -T{n}'", lambda n=n: bench.tar(multi, f"xz -T{n}"))]
        results["xz-multi"] = _section(multi, interleaved(named, repeat), jobs)
    if "xz-single" in only and (single := files.get("xz-single")) is not None:
        named = [(f"split -j{n}", lambda n=n: bench.cudasplit(single, n))
                 for n in sorted({1, top})]
        named.append(("tar -xJf", lambda: bench.tar(single, None, "-J")))
        results["xz-single"] = _section(single, interleaved(named, repeat), sorted({1, top}))
    if "zstd" in only and (zst := files.get("zstd")) is not None:
        named = [("split -j1", lambda: bench.cudasplit(zst, 1)),
                 ("tar -I 'zstd -T1'", lambda: bench.tar(zst, "zstd -T1"))]
        if top > 1:
            named += [(f"split -j{top}", lambda: bench.cudasplit(zst, top)),
                      ("tar -I 'zstd -T0'", lambda: bench.tar(zst, "zstd -T0"))]
        results["zstd"] = _section(zst, interleaved(named, repeat), sorted({1, top}))
    if "batch" in only and (batch := files.get("batch")) is not None:
        tarballs = sorted(batch.glob("*.tar.xz"))
        stats = interleaved([(f"split -j{top} DIR", lambda: bench.cudasplit(batch, top)),
                             ("tar each", lambda: bench.tar_each(batch, top))], repeat)
        results["batch"] = {**_section(batch, stats, [top]),
                            "tarballs": [p.name for p in tarballs],
                            "mb": sum(p.stat().st_size for p in tarballs) / 1e6}
    if multi is not None and "decode" in only:
        named = []
        many = [n for n in jobs if n > 1] or jobs  # one thread is xz's own speed: left out
        for n in many:
            named += [(f"decoder -j{n}", lambda n=n: bench.decode(multi, n)),
                      (f"library decoder -j{n}", lambda n=n: bench.decode(multi, n, False)),
                      (f"xz -dc -T{n}", lambda n=n: bench.xz_dc(multi, n))]
        results["decode"] = _section(multi, interleaved(named, repeat), many)
    if (zst := files.get("zstd")) is not None and "decode" in only:
        results["decode-zstd"] = _section(zst, interleaved([
            ("decoder in-process", lambda: bench.decode(zst, 1, False)),
            ("decoder through zstd -dc -T0", lambda: bench.decode(zst, 1, True)),
            ("zstd -dc -T0", lambda: bench.zstd_dc(zst))], repeat), [1])
    if (single := files.get("xz-single")) is not None and "decode" in only:
        results["decode-xz-single"] = _section(single, interleaved([
            ("decoder in-process", lambda: bench.decode(single, 1, False)),
            ("decoder through xz -dc -T1", lambda: bench.decode(single, 1, True)),
            ("xz -dc -T1", lambda: bench.xz_dc(single, 1))], repeat), [1])
    if "choices" in only:
        anchors = {"zstd": ("tar -I 'zstd -T1'", "zstd -T1", None),
                   "xz-single": ("tar -xJf", None, "-J"),
                   "xz-multi": ("tar -I 'xz -TN'", "xz -T{n}", None)}
        results["choices"] = {}
        for kind in ("zstd", "xz-single", "xz-multi"):
            path = files.get(kind)
            if path is None:
                continue
            for n in sorted({1, top}):
                if kind == "xz-multi" and n == 1 and top > 1:
                    continue   # one thread decodes it as single-block xz: that row says it
                anchor, program, flag = anchors[kind]
                if kind == "zstd" and n > 1:
                    anchor, program = "tar -I 'zstd -T0'", "zstd -T0"
                named = [(anchor.replace("N", str(n)),
                          lambda p=path, prog=program, f=flag, n=n: bench.tar(
                              p, prog.format(n=n) if prog else None, f))]
                for variant in VARIANTS:
                    extra = ("--no-inside",) if variant == "--no-inside" else ()
                    named.append((variant, lambda p=path, n=n, v=variant, e=extra:
                                  bench.variant(p, n, v if v != "--no-inside" else "chosen",
                                                *e)))
                section = _section(path, interleaved(named, repeat), [n])
                section["anchor"] = anchor.replace("N", str(n))
                results["choices"][f"{kind} -j{n}"] = section  # type: ignore[index]
    if "profile" in only:
        results["profile"] = {}
        for kind in ("zstd", "xz-single", "xz-multi"):
            path = files.get(kind)
            if path is not None:
                for n in sorted({1, top}):
                    results["profile"][f"{kind} -j{n}"] = profile(bench, path, n)  # type: ignore[index]
    if multi is not None and "patch-share" in only:
        results["patch-share"] = _section(multi, interleaved([
            (f"split -j{top}", lambda: bench.cudasplit(multi, top)),
            (f"split -j{top} --no-patch", lambda: bench.cudasplit(multi, top, "--no-patch"))],
            repeat), [top])
    return results


def _section(path: Path, stats: dict[str, Stat], jobs: list[int]) -> dict[str, object]:
    info: dict[str, object] = {"file": path.name, "jobs": jobs,
                               "mb": path.stat().st_size / 1e6 if path.is_file() else 0.0}
    if path.is_file() and path.name.endswith(".xz"):
        info["blocks"] = xz_blocks(path)
    return {**info, "stats": {name: asdict(stat) for name, stat in stats.items()}}


# -- the tables -------------------------------------------------------------------------------


def _stat(data: dict[str, object], name: str) -> Stat:
    stats = data["stats"]
    assert isinstance(stats, dict)
    return Stat(**stats[name])


def _ratio(a: Stat, b: Stat) -> tuple[float, float]:
    return a.median / b.median, a.min / b.min


def table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


PAIR = ("", "cudasplit s (median / min)", "baseline s (median / min)", "ratio (median / min)",
        "cudasplit RSS MB", "baseline RSS MB")


def _pair_row(label: str, a: Stat, b: Stat) -> tuple[str, ...]:
    median, low = _ratio(a, b)
    return (label, f"{a.median:.2f} / {a.min:.2f}", f"{b.median:.2f} / {b.min:.2f}",
            f"{median:.2f} / {low:.2f}", f"{a.rss_mb:.0f}", f"{b.rss_mb:.0f}")


@dataclass
class Target:
    what: str
    ratio: tuple[float, float]
    limit: float
    rss: tuple[float, float] | None = None

    def row(self) -> tuple[str, ...]:
        median, low = self.ratio
        met = median <= self.limit
        rss = ""
        if self.rss is not None:
            met = met and self.rss[0] <= self.rss[1]
            rss = f"; RSS {self.rss[0]:.0f} / {self.rss[1]:.0f} MB"
        return (self.what, f"<= {self.limit:.2f}", f"{median:.2f} / {low:.2f}{rss}",
                "met" if met else "**not met**")


def tables(results: dict[str, object]) -> list[str]:
    out: list[str] = []
    targets: list[Target] = []
    if isinstance(s := results.get("startup"), dict):
        stats = {k: Stat(**v) for k, v in s["stats"].items()}
        base = stats["python -c pass"]
        rows = [(name, f"{st.median:.3f} / {st.min:.3f}", f"{base.median:.3f} / {base.min:.3f}",
                 f"{st.median / base.median:.1f} / {st.min / base.min:.1f}")
                for name, st in stats.items() if name != "python -c pass"]
        out.append(table("Start-up (10 rounds): against `python -c pass`",
                         ("", "s (median / min)", "python -c pass s", "ratio"), rows))
        top_imports = ", ".join(f"`{m.removeprefix('cudasplit.')}` {c / 1e3:.0f}"
                                for m, c in s["split_top"])
        out.append(f"`python -X importtime`: `import cudasplit.cli` "
                   f"{s['import_cli_us'] / 1e3:.0f} ms ({s['import_cli_modules']} modules); a "
                   f"whole split of the sample tarball imports {s['split_modules']} modules "
                   f"({s['split_cudasplit_modules']} of cudasplit), "
                   f"{s['split_import_us'] / 1e3:.0f} ms of imports in all; largest "
                   f"(cumulative ms): {top_imports}.\n")
        for name in ("cudasplit --version", "cudasplit split --help"):
            targets.append(Target(f"`{name}` (s, not a ratio)",
                                  (stats[name].median, stats[name].min), 0.15))
    if isinstance(m := results.get("xz-multi"), dict):
        rows = []
        jobs = sorted(m["jobs"])
        top = jobs[-1]
        for n in jobs:
            a, b = _stat(m, f"split -j{n}"), _stat(m, f"tar -I 'xz -T{n}'")
            rows.append(_pair_row(f"N = {n}", a, b))
            targets.append(Target(f"multi-block xz, N = {n}, vs `tar -I 'xz -T{n}'`",
                                  _ratio(a, b), 1.00,
                                  (a.rss_mb, b.rss_mb) if n == top and top > 1 else None))
        out.append(table(f"Multi-block xz ({m['file']}, {m['mb']:.0f} MB, {m.get('blocks')} "
                         "blocks): `cudasplit split -jN` vs `tar -I 'xz -TN' -xf`", PAIR, rows))
    if isinstance(x := results.get("xz-single"), dict):
        base = _stat(x, "tar -xJf")
        rows = []
        for n in x["jobs"]:
            a = _stat(x, f"split -j{n}")
            rows.append(_pair_row(f"-j{n}", a, base))
            targets.append(Target(f"single-block xz, `-j{n}`, vs `tar -xJf`", _ratio(a, base),
                                  1.00))
        out.append(table(f"Single-block xz ({x['file']}, {x['mb']:.0f} MB): vs `tar -xJf`",
                         PAIR, rows))
    if isinstance(z := results.get("zstd"), dict):
        pairs = [("split -j1", "tar -I 'zstd -T1'")]
        if (top := max(z["jobs"])) > 1:
            pairs += [("split -j1", "tar -I 'zstd -T0'"), (f"split -j{top}", "tar -I 'zstd -T1'"),
                      (f"split -j{top}", "tar -I 'zstd -T0'")]
        rows = []
        for mine, theirs in pairs:
            a, b = _stat(z, mine), _stat(z, theirs)
            rows.append(_pair_row(f"`{mine}` vs `{theirs}`", a, b))
            targets.append(Target(f"zstd, `{mine}` vs `{theirs}`", _ratio(a, b), 1.00))
        out.append(table(f"zstd ({z['file']}, {z['mb']:.0f} MB, one frame)", PAIR, rows))
    if isinstance(b := results.get("batch"), dict):
        top = max(b["jobs"])
        a, t = _stat(b, f"split -j{top} DIR"), _stat(b, "tar each")
        names = ", ".join(n.split("-")[0] for n in b["tarballs"])
        out.append(table(f"A release at once: {len(b['tarballs'])} multi-block tarballs "
                         f"({b['mb']:.0f} MB: {names}): `cudasplit split -j{top} DIR` vs "
                         f"`tar -I 'xz -T{top}' -xf` over each in turn", PAIR,
                         [_pair_row(f"N = {top}", a, t)]))
        targets.append(Target(f"a release at once, `-j{top}`, vs tar over each in turn",
                              _ratio(a, t), 0.95, (a.rss_mb, t.rss_mb)))
    if isinstance(d := results.get("decode"), dict):
        rows = []
        for n in sorted(d["jobs"]):
            rows.append(_pair_row(f"N = {n}, as chosen", _stat(d, f"decoder -j{n}"),
                                  _stat(d, f"xz -dc -T{n}")))
            if f"library decoder -j{n}" in d["stats"]:  # type: ignore[operator]
                rows.append(_pair_row(f"N = {n}, the library", _stat(d, f"library decoder -j{n}"),
                                      _stat(d, f"xz -dc -T{n}")))
        out.append(table("Multi-block xz decoder alone: `open_decompressed(jobs=N)` read to the "
                         "end vs `xz -dc -TN >/dev/null`", PAIR, rows))
    if isinstance(d := results.get("decode-zstd"), dict):
        base = _stat(d, "zstd -dc -T0")
        rows = [_pair_row(name, _stat(d, name), base)
                for name in ("decoder in-process", "decoder through zstd -dc -T0")]
        out.append(table(f"zstd decoder alone ({d['file']}, {d['mb']:.0f} MB) vs "
                         "`zstd -dc -T0 >/dev/null`: in-process or through the binary (the "
                         "default)", PAIR, rows))
    if isinstance(c := results.get("choices"), dict):
        rows = []
        for label, sec in c.items():
            anchor = _stat(sec, sec["anchor"])
            for variant in VARIANTS:
                st = _stat(sec, variant)
                rows.append((label, variant, f"{st.median:.2f} / {st.min:.2f}",
                             f"{st.cpu:.2f}", f"{st.median / anchor.median:.2f}"))
            rows.append((label, f"`{sec['anchor']}`", f"{anchor.median:.2f} / {anchor.min:.2f}",
                         f"{anchor.cpu:.2f}", "1.00"))
            chosen, none = _stat(sec, "chosen"), _stat(sec, "--no-inside")
            targets.append(Target(f"in-pass reading's share, {label}",
                                  ((chosen.median - none.median) / chosen.median,
                                   (chosen.min - none.min) / chosen.min), 0.03))
        out.append(table("Each choice of the data path against its alternatives (`split` "
                         "with one choice replaced; ratio of medians to the tar anchor)",
                         ("payload", "variant", "s (median / min)", "CPU s", "vs tar"), rows))
        out.append("\n".join(f"* **{name}**: {text}" for name, (text, _) in VARIANTS.items())
                   + "\n")
    if isinstance(pr := results.get("profile"), dict):
        rows = []
        for label, prof in pr.items():
            if "error" in prof:
                rows.append((label, prof["error"], "", ""))
                continue
            idle = prof.get("idle", {})
            threads = ", ".join(
                f"{name} {1 - idle.get(name, 0) / count:.0%} busy"
                for name, count in sorted(prof["threads"].items(), key=lambda kv: -kv[1])
                if count)
            main_total = sum(prof["main"].values()) or 1
            phases = ", ".join(f"{name} {count / main_total:.0%}"
                               for name, count in sorted(prof["main"].items(),
                                                         key=lambda kv: -kv[1]))
            rows.append((label, f"{prof['wall']:.2f}", threads, phases))
        out.append(table("Where the time goes (py-spy --threads --idle --subprocesses, 500 "
                         "Hz): how busy each thread was (not waiting on a lock, a condition, a "
                         "future or a pipe), and the main thread's life by phase",
                         ("payload", "wall s", "threads", "main thread"), rows))
    if isinstance(d := results.get("decode-xz-single"), dict):
        base = _stat(d, "xz -dc -T1")
        rows = [_pair_row(name, _stat(d, name), base)
                for name in ("decoder in-process", "decoder through xz -dc -T1")]
        out.append(table(f"Single-block xz decoder alone ({d['file']}, {d['mb']:.0f} MB) vs "
                         "`xz -dc -T1 >/dev/null`: in-process or through the binary", PAIR,
                         rows))
    if isinstance(p := results.get("patch-share"), dict):
        top = max(p["jobs"])
        a = _stat(p, f"split -j{top}")
        n = _stat(p, f"split -j{top} --no-patch")
        out.append(table(f"ELF edits' share of a split (multi-block xz, -j{top})",
                         ("split s (median)", "--no-patch s", "ELF edits s", "share"),
                         [(f"{a.median:.2f}", f"{n.median:.2f}", f"{a.median - n.median:.2f}",
                           f"{(a.median - n.median) / a.median:.1%}")]))
    if targets:
        out.append(table("Issue 40's targets (ratio median / min; RSS cudasplit / tar at the "
                         "largest N)", ("target", "limit", "measured", ""),
                         [t.row() for t in targets]))
    return out


def machine_line(args: argparse.Namespace, cores: int) -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    tools = []
    for tool in ("xz", "zstd"):
        try:
            tools.append(subprocess.run([tool, "--version"], capture_output=True, text=True,
                                        check=True).stdout.splitlines()[0])
        except (OSError, subprocess.CalledProcessError, IndexError):
            tools.append(f"{tool}: none")
    return (f"Machine: {cores} cores available ({cpu}), Python {platform.python_version()}, "
            f"{'; '.join(tools)}; load average {os.getloadavg()[0]:.1f} at start; "
            f"{args.repeat} interleaved rounds; cudasplit "
            f"{'with' if args.fsync else 'without'} fsync"
            + (f", --memory-limit {args.memory_limit}" if args.memory_limit else "") + ".\n")


SECTIONS = ("startup", "xz-multi", "xz-single", "zstd", "batch", "decode", "patch-share",
            "choices", "profile")
TARGETS = ("startup", "xz-multi", "xz-single", "zstd", "batch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tarball", type=Path, help="an existing multi-block .tar.xz")
    parser.add_argument("--zstd", type=Path, help="an existing .tar.zst")
    parser.add_argument("--single", type=Path, help="an existing single-block .tar.xz")
    parser.add_argument("--from-dir", type=Path, help="build the tar from DIR's --glob files")
    parser.add_argument("--glob", help="files of the payload (default libcublas*; the wheels' "
                        "libcublas.so*)")
    parser.add_argument("--single-glob", help="files of the single-block payload (default: "
                        "--glob's)")
    parser.add_argument("--version", default="13.0.0.0", help="version in the top dir name")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "CUDASPLIT_CACHE", Path.home() / ".cache" / "cudasplit")) / "bench-scaling")
    parser.add_argument("--jobs", help="comma-separated N (default 1,2,4,... up to the cores)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", choices=SECTIONS)
    parser.add_argument("--single-preset", type=int, default=SINGLE_PRESET,
                        help="xz preset of the single-block tarball (default 6)")
    parser.add_argument("--prepare", action="store_true",
                        help="only build (and cache) the tarballs, time nothing")
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--memory-limit")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path, help="write every sample here")
    parser.add_argument("--deadline", type=float, help="seconds from now: rounds that would "
                        "end later are left out (at least one runs)")
    parser.add_argument("--report", type=Path, nargs="+",
                        help="print the tables of earlier --json files (merged), run nothing")
    args = parser.parse_args(argv)

    if args.report:
        merged: dict[str, dict[str, object]] = {}
        header = []
        for path in args.report:
            data = json.loads(path.read_text())
            header.append(str(data.pop("machine", "")))
            for name, section in data.items():
                _merge(merged.setdefault(name, {}), section)
        return _print("\n".join(dict.fromkeys(header)), dict(merged), args.markdown)

    if args.deadline:
        DEADLINE[0] = time.monotonic() + args.deadline
    cores = available_cores()
    jobs = ([int(j) for j in args.jobs.split(",")] if args.jobs
            else [n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n <= cores])
    only = set(args.only or SECTIONS)
    args.cache.mkdir(parents=True, exist_ok=True)
    files = payload(args, only)
    if args.prepare:
        print("\n".join(f"{kind}: {path}" for kind, path in files.items()))
        return 0
    where = subprocess.run([sys.executable, "-c", "import cudasplit; print(cudasplit.__file__)"],
                           cwd=CHILD_CWD, env=CHILD_ENV, capture_output=True, text=True,
                           check=True).stdout.strip()
    compileall.compile_dir(Path(where).parent, quiet=1)  # as an installed wheel has them
    print(f"# cudasplit under test: {where}", file=sys.stderr, flush=True)
    machine = machine_line(args, cores)
    scratch = Path(tempfile.mkdtemp(prefix="bench-scaling-", dir=args.cache))
    try:
        results = run_sections(Bench(args, scratch), files, jobs, only, args.repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, **results}, indent=1))
    return _print(machine, results, args.markdown)


def _merge(into: dict[str, object], section: dict[str, object]) -> None:
    """One section of several runs (the host's two calls): their rows together."""
    for key, value in section.items():
        if key == "stats" and isinstance(into.get(key), dict):
            into[key] = {**into[key], **value}  # type: ignore[dict-item]
        elif key == "jobs" and isinstance(into.get(key), list):
            into[key] = sorted({*into[key], *value})  # type: ignore[misc]
        else:
            into[key] = value


def _print(machine: str, results: dict[str, object], markdown: Path | None) -> int:
    text = "\n".join([machine, *tables(results)])
    print(text)
    if markdown:
        markdown.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
