"""Issue 15's acceptance: hostile corpora through the real CLI, each input in its own process.

For every input: exit status as documented (0: split done, problems in the report; 2: one
line ``cudasplit: error: ...`` on stderr), no traceback, no native crash (signal, 134, 139),
under ``TIME_LIMIT_S`` seconds and ``RSS_LIMIT`` bytes of peak memory (the child's
``ru_maxrss``), nothing changed outside the output directory (a canary file and an empty
directory sit next to it, and archives aim at both), nothing left that looks finished
after a refusal (the output directory is absent or empty), no staging directory left after
a success, and every symlink in the outputs resolving inside them.

Inputs:

* the catalog of tests/hostile.py (paths, links, special files, header bombs, member count,
  corrupt tar/compression, decompression bombs, corrupt ELF), with its expected outcomes;
* traversal archives after jwilk/traversal-archives and snyk's zip-slip tarballs, raw and
  wrapped in an NVIDIA top directory; CPython's CVE-2025-4517 realpath-limit attack (as in its
  test_tarfile, and scaled down to fit the name limits);
* what libarchive's suite reads besides tar (zip, cpio, ar; refused by magic) and codec
  wrappers around non-tar data;
* CPython's own tar test data (``test/archivetestdata`` or ``test/`` of the stdlib, from
  Debian's ``libpython3.11-testsuite`` or a full CPython install): each member sliced out as
  an archive of its own, plus the whole files; skipped with a reason when absent;
* directory sources: 1,500 levels deep, a FIFO, an escaping symlink.

The runs go through tests/corpus_driver.py (fork per input after one import).
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.security.test_hostile import CANARY, assert_links_inside, make_ctx, snapshot
from tests.support.hostile import (
    Accept,
    Ctx,
    catalog,
    deep_tree,
    ext_header,
    padded,
    raw_header,
    remove_deep,
)
from tests.support.paths import REPO
from tests.support.tarutil import TOP, compress

TIME_LIMIT_S = 10.0
RSS_LIMIT = 200 << 20

Builder = Callable[[Path, Ctx], Path]  # (directory to write into, ctx) -> the source path


@dataclass(frozen=True)
class Input:
    name: str
    build: Builder
    expect: int | None = None       # the documented exit status; None: 0 or 2
    args: tuple[str, ...] = ()


def _archive(data: Callable[[Ctx], bytes], suffix: str = ".tar") -> Builder:
    def build(directory: Path, ctx: Ctx) -> Path:
        path = directory / f"{TOP}{suffix}"
        path.write_bytes(data(ctx))
        return path
    return build


def _copy(source: Path) -> Builder:
    def build(directory: Path, ctx: Ctx) -> Path:
        path = directory / source.name
        path.write_bytes(source.read_bytes())
        return path
    return build


# -- the catalog -------------------------------------------------------------------------------


def catalog_inputs() -> list[Input]:
    inputs = []
    for case in catalog():
        args: list[str] = []
        flags = {"max_total_bytes": "--max-size", "max_ratio": "--max-ratio",
                 "max_members": "--max-members"}
        for key, flag in flags.items():
            if key in case.options:
                args += [flag, str(case.options[key])]
        if case.options.get("skip_unsafe_members"):
            args.append("--skip-unsafe-members")
        expect = 0 if isinstance(case.expect, Accept) else 2
        inputs.append(Input(f"catalog/{case.name}", _archive(case.build, case.suffix), expect,
                            tuple(args)))
    return inputs


# -- traversal archives (jwilk/traversal-archives, snyk zip-slip) --------------------------------

# A raw archive has no NVIDIA top dir: say so, so that the traversal guards are reached.
RAW_ARGS = ("--package", "cuda_demo", "--default-rules", "--strip-components", "0")


def _tar(entries: list[tuple[str, str, str]]) -> bytes:
    """(kind, name, target or data) -> tar bytes; kinds: file, symlink, hardlink, dir. Names
    and link targets over 99 bytes go in GNU long-name/long-link headers, as GNU tar does."""
    blocks = []
    for kind, name, extra in entries:
        raw_name, raw_link = name.encode(), b"" if kind == "file" else extra.encode()
        if len(raw_name) > 99:
            blocks.append(ext_header(b"L", raw_name + b"\0"))
        if len(raw_link) > 99:
            blocks.append(ext_header(b"K", raw_link + b"\0"))
        if kind == "file":
            data = extra.encode()
            blocks.append(raw_header(raw_name[:99], b"0", len(data)) + padded(data))
        else:
            flag = {"symlink": b"2", "hardlink": b"1", "dir": b"5"}[kind]
            blocks.append(raw_header(raw_name[:99], flag, 0, raw_link[:99]))
    return b"".join(blocks) + b"\0" * 1024


def _wrapped(entries: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The same members inside the NVIDIA top dir (absolute names stay absolute; relative
    hard link targets, which tar resolves from the archive root, follow them)."""
    return [("dir", TOP + "/", "")] + [
        (kind, member if member.startswith("/") else f"{TOP}/{member}",
         f"{TOP}/{extra}" if kind == "hardlink" and not extra.startswith("/") else extra)
        for kind, member, extra in entries]


def _traversal_classes(ctx: Ctx) -> dict[str, list[tuple[str, str, str]]]:
    """jwilk's classes, aimed at the canary and the outside directory of this run."""
    outside, canary = str(ctx.outside), str(ctx.canary)
    return {
        "absolute1": [("file", canary, "moo")],
        "absolute2": [("file", "/" + canary, "moo")],
        "relative0": [("file", "../moo", "moo")],
        "relative2": [("file", "foo/../../moo", "moo")],
        "symlink": [("symlink", "moo", canary), ("file", "moo", "moo")],
        "dirsymlink": [("symlink", "moo", outside), ("file", "moo/moo", "moo")],
        "dirsymlink-relative": [("symlink", "moo", ctx.climb.rsplit("/", 1)[0]),
                                ("file", "moo/outside/moo", "moo")],
        "dirsymlink2a": [("symlink", "cur", "."), ("symlink", "par", "cur/.."),
                         ("file", "par/moo", "moo")],
        "dirsymlink2b": [("symlink", "cur", "."), ("symlink", "cur/par", ".."),
                         ("file", "par/moo", "moo")],
        "hardlink-escape": [("hardlink", "moo", canary)],
        "symlink-then-hardlink": [("symlink", "moo", canary), ("hardlink", "moo2", "moo")],
        "zip-slip": [("file", "good.txt", "good"),
                     ("file", "../" * 20 + canary.lstrip("/"), "evil")],
        "zip-slip-windows": [("file", "good.txt", "good"),
                             ("file", "..\\..\\..\\..\\evil.txt", "evil")],
    }


# What each class must come to: refused (2) or accepted with the escape skipped (0). Issue 24:
# a symlink whose target is absolute or climbs out lexically fails the run (2); the kernel-only
# climbs (``cur -> .``, ``par -> cur/..``) are rewritten to canonical text and accepted.
_TRAVERSAL_EXPECT = {
    "absolute1": 2, "absolute2": 2, "relative0": 2, "relative2": 2, "hardlink-escape": 2,
    "zip-slip": 2, "symlink": 2, "dirsymlink": 2, "dirsymlink-relative": 2,
    "dirsymlink2a": 0, "dirsymlink2b": 0, "symlink-then-hardlink": 2, "zip-slip-windows": 0,
}


def traversal_inputs() -> list[Input]:
    inputs = []
    for name, expect in _TRAVERSAL_EXPECT.items():
        for wrapped in (False, True):
            def data(ctx: Ctx, name: str = name, wrapped: bool = wrapped) -> bytes:
                entries = _traversal_classes(ctx)[name]
                return _tar(_wrapped(entries) if wrapped else entries)
            suffix = ".tar.xz" if wrapped else ".tar"
            raw_args = () if wrapped else RAW_ARGS
            inputs.append(Input(f"traversal/{name}{'-wrapped' if wrapped else ''}",
                                _archive(lambda ctx, d=data, s=suffix: compress(d(ctx), "xz")
                                         if s == ".tar.xz" else d(ctx), suffix), expect,
                                raw_args))
    return inputs


def _realpath_limit_attack(component_len: int) -> list[tuple[str, str, str]]:
    """CPython's test for CVE-2025-4517 (test_tarfile ``test_realpath_limit_attack``): symlinks
    that only overflow PATH_MAX once expanded, an escaping link behind them, a hard link
    through it to a file outside, then writes through both."""
    component = "d" * component_len
    entries: list[tuple[str, str, str]] = []
    path, steps = "", "abcdefghijklmnop"
    for step in steps:
        entries.append(("dir", f"{path}{component}", ""))
        entries.append(("symlink", f"{path}{step}", component))
        path += component + "/"
    link = "/".join(steps) + "/" + "l" * 254
    entries.append(("symlink", link, "/".join([".."] * len(steps))))
    entries.append(("symlink", "escape", link + "/.."))
    entries.append(("hardlink", "flaglink", "escape/canary"))
    entries.append(("file", "flaglink", "overwrite"))
    entries.append(("file", "escape/newfile", "new"))
    return entries


def other_format_inputs() -> list[Input]:
    """What libarchive's test suite reads besides tar (cudasplit refuses by magic), and
    wrappers that are not what they claim."""
    def zip_bytes(_: Ctx) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as archive:
            archive.writestr("../../evil.txt", "evil")
        return buf.getvalue()

    cpio = b"070701" + b"0" * 104 + b"TRAILER!!!\0"
    return [
        Input("format/zip-slip-zip", _archive(zip_bytes, ".zip"), 2),
        Input("format/cpio-newc", _archive(lambda x: cpio, ".cpio"), 2),
        Input("format/ar", _archive(lambda x: b"!<arch>\n", ".a"), 2),
        Input("format/gz-of-gz", _archive(lambda x: gzip.compress(gzip.compress(b"x" * 600)),
                                          ".tar.gz"), 2),
        Input("format/xz-of-random", _archive(lambda x: lzma.compress(os.urandom(4096)),
                                              ".tar.xz"), 2),
        Input("format/one-byte", _archive(lambda x: b"\x1f"), 2),
        Input("format/zeros-only", _archive(lambda x: b"\0" * 10240), 2),
        Input("cve-2025-4517/realpath-limit-attack", _archive(
            lambda x: _tar(_realpath_limit_attack(235))), 2, RAW_ARGS),
        # Within the name limits the escapes are skipped (dangling-symlink, under-symlink,
        # dangling-hardlink) and the rest is split: documented acceptance, exit 0.
        Input("cve-2025-4517/within-name-limits", _archive(
            lambda x: _tar(_realpath_limit_attack(40))), 0, RAW_ARGS),
        Input("cve-2025-4517/within-name-limits-wrapped", _archive(
            lambda x: compress(_tar(_wrapped(_realpath_limit_attack(40))), "xz"), ".tar.xz"), 0),
    ]


# -- CPython's tar test data -------------------------------------------------------------------


def cpython_test_data() -> Path | None:
    """The directory holding CPython's ``testtar.tar``, if any installed Python ships it."""
    stdlib = Path(sysconfig.get_path("stdlib"))
    for candidate in (stdlib / "test" / "archivetestdata", stdlib / "test",
                      Path("/usr/lib/python3.11/test/archivetestdata"),
                      Path("/usr/lib/python3.11/test")):
        if (candidate / "testtar.tar").is_file():
            return candidate
    return None


def cpython_inputs(directory: Path) -> list[Input]:
    inputs = [Input(f"cpython/{p.name}", _copy(p), None, RAW_ARGS)
              for p in sorted(directory.iterdir()) if p.name.endswith((".tar", ".tar.xz"))]
    testtar = (directory / "testtar.tar").read_bytes()
    # tarfile is trusted here: it only finds where CPython's own test members begin.
    with tarfile.open(directory / "testtar.tar") as archive:
        offsets = [info.offset for info in archive.getmembers()]
        names = [info.name for info in archive.getmembers()]
    ends = [*offsets[1:], len(testtar)]
    for name, start, end in zip(names, offsets, ends, strict=True):
        piece = testtar[start:end] + b"\0" * 1024  # headers and data, whole blocks
        safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in name)[-60:]
        inputs.append(Input(f"cpython-member/{safe}", _archive(lambda ctx, p=piece: p), None,
                            RAW_ARGS))
    return inputs


# -- directory sources -------------------------------------------------------------------------


def _deep_dir(directory: Path, ctx: Ctx) -> Path:
    return deep_tree(directory, 1500)


def _fifo_dir(directory: Path, ctx: Ctx) -> Path:
    top = directory / TOP
    (top / "lib").mkdir(parents=True)
    os.mkfifo(top / "lib" / "pipe")
    return top


def _escaping_link_dir(directory: Path, ctx: Ctx) -> Path:
    top = directory / TOP
    (top / "lib").mkdir(parents=True)
    (top / "lib" / "libx.so.1").write_bytes(b"x")
    (top / "lib" / "canary").symlink_to(ctx.canary)
    (top / "lib" / "outside").symlink_to(ctx.outside)
    return top


DIRECTORY_INPUTS = [
    Input("dir/depth-1500", _deep_dir, 2),
    Input("dir/fifo", _fifo_dir, 2),
    Input("dir/escaping-symlinks", _escaping_link_dir, 2),  # issue 24: refused
]


# -- running and judging -----------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    input: Input
    root: Path
    source: Path
    out: Path
    report: Path
    stderr: Path
    before: dict[str, tuple[int, bytes | str | None]]


def _prepare(inp: Input, base: Path, index: int) -> Run:
    root = base / f"r{index}"
    root.mkdir()
    ctx = make_ctx(root)
    # Sources lie beside the run's root: a 1,500-level tree would defeat the recursive walk
    # of ``snapshot`` (the canary, the outside directory and the output stay in the root).
    sources = base / f"s{index}"
    sources.mkdir()
    source = inp.build(sources, ctx)
    out = root / "out"
    run = Run(inp, root, source, out, base / f"r{index}.report.json", base / f"r{index}.err",
              snapshot(root, out))
    return run


def _argv(run: Run) -> list[str]:
    return ["split", str(run.source), "-o", str(run.out), "--report", str(run.report),
            "-j", "1", *run.input.args]


def _drive(runs: list[Run]) -> list[dict[str, float]]:
    specs = [{"argv": _argv(r), "stderr": str(r.stderr)} for r in runs]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, str(REPO / "tests" / "support" / "corpus_driver.py")],
                            input=json.dumps(specs), capture_output=True, text=True, env=env,
                            timeout=60 + 30 * len(runs), check=False)
    lines = result.stdout.splitlines()
    assert len(lines) == len(runs), result.stderr[-2000:]
    return [json.loads(line) for line in lines]


def _judge(run: Run, measured: dict[str, float]) -> list[str]:
    """Every guarantee this input broke (empty: all held)."""
    rc, stderr = int(measured["rc"]), run.stderr.read_text(errors="replace")
    broken = []
    if rc < 0 or rc not in (0, 1, 2):
        broken.append(f"exit status {rc} (crash or signal)")
    if "Traceback" in stderr:
        broken.append("traceback: " + stderr[-300:])
    if run.input.expect is not None and rc != run.input.expect:
        broken.append(f"exit {rc}, documented {run.input.expect}: {stderr.strip()[:300]}")
    if rc == 2:
        # Informational lines ("an unpacked redistributable tree") may come first; the error
        # itself is one line, and the last.
        lines = stderr.splitlines()
        errors = [line for line in lines if line.startswith("cudasplit: error: ")]
        if len(errors) != 1 or lines[-1] != errors[0]:
            broken.append(f"not one error line: {stderr[:300]!r}")
        leftovers = sorted(p.name for p in run.out.iterdir()) if run.out.exists() else []
        if leftovers:
            broken.append(f"refused but left {leftovers}")
    if rc == 0:
        try:
            json.loads(run.report.read_text())
        except (OSError, ValueError) as exc:
            broken.append(f"no valid report ({exc})")
        staging = [p.name for p in run.out.iterdir() if p.name.startswith(".cudasplit-staging")]
        if staging:
            broken.append(f"succeeded but left {staging}")
        try:
            assert_links_inside(run.out)
        except AssertionError as exc:
            broken.append(str(exc))
    if measured["wall"] > TIME_LIMIT_S:
        broken.append(f"took {measured['wall']:.1f} s")
    if measured["maxrss"] > RSS_LIMIT:
        broken.append(f"peak RSS {measured['maxrss'] / 2**20:.0f} MiB")
    if (run.root / "canary").read_bytes() != CANARY or snapshot(run.root, run.out) != run.before:
        broken.append("something outside the output directory changed")
    return broken


def _run_all(inputs: list[Input], tmp_path: Path) -> dict[str, list[str]]:
    runs = [_prepare(inp, tmp_path, i) for i, inp in enumerate(inputs)]
    try:
        measured = _drive(runs)
        failures = {r.input.name: _judge(r, m) for r, m in zip(runs, measured, strict=True)}
    finally:
        for run in runs:  # deep trees defeat pytest's recursive cleanup
            for top in run.source.parent.glob(TOP):
                if top.is_dir():
                    remove_deep(top)
    peak = max(m["maxrss"] for m in measured) / 2**20
    slowest = max(m["wall"] for m in measured)
    accepted = sum(1 for m in measured if m["rc"] == 0)
    print(f"{len(runs)} inputs ({accepted} split, {len(runs) - accepted} refused); slowest "
          f"{slowest:.2f} s; peak RSS {peak:.0f} MiB")
    return {name: broken for name, broken in failures.items() if broken}


def test_catalog_and_traversal_corpus_through_the_cli(tmp_path: Path) -> None:
    inputs = catalog_inputs() + traversal_inputs() + other_format_inputs() + DIRECTORY_INPUTS
    assert len(inputs) >= 100
    assert _run_all(inputs, tmp_path) == {}


def test_cpython_tar_test_data_through_the_cli(tmp_path: Path) -> None:
    directory = cpython_test_data()
    if directory is None:
        pytest.skip("CPython's tar test data (testtar.tar) is not installed: apt-get install "
                    "libpython3.11-testsuite")
    inputs = cpython_inputs(directory)
    assert len(inputs) >= 30
    assert _run_all(inputs, tmp_path) == {}


def test_the_installed_entry_point_behaves_like_the_driver(tmp_path: Path) -> None:
    """One refusal through ``python -m cudasplit`` itself, so the driver's fork is not the only
    path measured: exit 2, one line, no traceback."""
    ctx = make_ctx(tmp_path)
    (tmp_path / "src").mkdir()
    case = next(c for c in catalog() if c.name == "pax-header-digits-cve-2024-6232")
    source = _archive(case.build, case.suffix)(tmp_path / "src", ctx)
    result = subprocess.run([sys.executable, "-m", "cudasplit", "split", str(source), "-o",
                             str(tmp_path / "out"), "-j", "1"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60,
                            check=False, cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("cudasplit: error: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
