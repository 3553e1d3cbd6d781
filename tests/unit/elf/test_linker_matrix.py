"""Issue 23: files from every Debian linker are patched, load, and survive strip.

For each arch, :mod:`tests.support.linkermatrix` links a library and an executable per (linker, flag
set) once per session; the tarball is split five times (with the driver link and a Nix-store
length ``--interpreter``); the second and third trees are then stripped (``strip
--strip-debug``, ``strip --strip-unneeded``), the fourth gets ``patchelf --shrink-rpath``, the
fifth a second, longer RUNPATH (which must go in place: the append tier's spare bytes). Each
library must then ``dlopen`` and answer, each executable must run through the new interpreter
and find its library through the new RUNPATH (natively, or under ``qemu-aarch64``). The runs are
made once, in the fixture, on two threads; each parametrized test checks one of them. A file
that does not run as linked (lld 14 links RELR executables without the ``GLIBC_ABI_DT_RELR``
version glibc requires) must fail the same way after the split.

Only combinations a linker can make are cases: gold has no RELR relocations and no ``-z
separate-code``, so those two are not in the matrix (as skips they said the same thing on
every run and hid a real one). A case whose linker, cross compiler or qemu is missing skips
naming the Debian package that has it (:func:`tests.support.tools.need`).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudasplit import RunpathPolicy, SplitOptions, split_to_dir
from cudasplit._elf.patch import set_runpath
from cudasplit._elf.read import read_elf_info
from tests.support.linkermatrix import (
    ARCHES,
    EXPECTED,
    LINKERS,
    Matrix,
    _flag_sets,
    build_matrix,
    compiler,
    run_target,
    runner,
    strip_tool,
)
from tests.support.tools import need

STAGES = ("split", "strip-debug", "strip-unneeded", "shrink-rpath", "repatch")
DRIVER = "/run/opengl-driver"


@functools.cache
def _root() -> Path:
    """One scratch directory per session, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="cudasplit-linkermatrix-"))
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.cache
def _matrix(arch: str) -> tuple[Matrix, dict[tuple[str, str, str], tuple[int, str]], dict[str, object]]:
    """Build, split, strip and run everything for `arch` once: (matrix, results, records)."""
    matrix = build_matrix(arch, _root() / arch)
    policy = RunpathPolicy(driver_link=DRIVER, interpreters=((arch, str(matrix.loader)),))
    records: dict[str, object] = {}
    jobs: list[tuple[tuple[str, str, str], list[str], str | None]] = []
    for combo, member in matrix.libs.items():  # the files as linked, before any split
        jobs.append((("before", "lib", combo), [str(matrix.probe), str(matrix.build /
                                                                        Path(member).name)], None))
    for combo, member in matrix.exes.items():
        jobs.append((("before", "exe", combo), [str(matrix.build / Path(member).name)],
                     str(matrix.build)))
    for stage in STAGES:
        out = _root() / arch / f"out-{stage}"
        report = split_to_dir(matrix.tarball, out, SplitOptions(runpath=policy))
        if stage == "split":
            records["problems"] = list(report.problems)
            for member in [*matrix.libs.values(), *matrix.exes.values()]:
                records[member] = report.member(member)
        if stage.startswith("strip-"):
            flag = "--strip-debug" if stage == "strip-debug" else "--strip-unneeded"
            for member in [*matrix.libs.values(), *matrix.exes.values()]:
                subprocess.run([strip_tool(arch), flag, str(_placed(out, member))], check=True)
        if stage == "repatch":  # a second edit of a patched file goes in place (spare bytes)
            for member in [*matrix.libs.values(), *matrix.exes.values()]:
                placed = _placed(out, member)
                info = read_elf_info(placed)
                assert info is not None and info.runpath is not None
                records[f"repatch:{member}"] = set_runpath(placed, info.runpath + ":/run/x").method
        if stage == "shrink-rpath" and shutil.which("patchelf"):
            for member in [*matrix.libs.values(), *matrix.exes.values()]:
                subprocess.run(["patchelf", "--shrink-rpath", str(_placed(out, member))],
                               check=True)
        for combo, member in matrix.libs.items():
            jobs.append(((stage, "lib", combo), [str(matrix.probe), str(_placed(out, member))],
                         None))
        for combo, member in matrix.exes.items():
            jobs.append(((stage, "exe", combo), [str(_placed(out, member))], None))
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda job: run_target(arch, job[1], libdir=job[2]), jobs))
    results = {key: res for (key, _, _), res in zip(jobs, done, strict=True)}
    return matrix, results, records


def _placed(out: Path, member: str) -> Path:
    top, _, name = member.partition("/")
    return out / top / top / name


def _combos() -> list[tuple[str, str]]:
    """Every (linker, flag set) the linker can link: a flag set it has no such feature for
    (gold: RELR, separate code) is no case at all."""
    return [(linker, name) for linker in LINKERS
            for name, flags in _flag_sets(linker).items() if not isinstance(flags, str)]


# The program each linker is, and the Debian package that has it.
LINKER_TOOLS = {"bfd": ("ld.bfd", "binutils"), "gold": ("ld.gold", "binutils"),
                "lld": ("ld.lld", "lld"), "mold": ("mold", "mold")}


def _skip_unless_runnable(arch: str, combo: str | None = None) -> None:
    """Skip (naming the package) where this machine lacks what the case needs."""
    if combo is not None:
        need(*LINKER_TOOLS[combo.split("-", 1)[0]])
    if compiler(arch) is None:
        need(f"{arch}-linux-gnu-gcc", f"gcc-{arch}-linux-gnu")
    if runner(arch) is None:
        need(f"qemu-{arch}", "qemu-user")
        pytest.skip(f"no {arch} C library to run programs with (Debian: apt-get install "
                    "libc6-dev-arm64-cross; see .ci/apt-packages.txt)")


def _params() -> list[object]:
    out: list[object] = []
    for arch in ARCHES:
        for linker, flags in _combos():  # aarch64 under qemu: ~8 s in all, so not marked slow
            out.append(pytest.param(arch, f"{linker}-{flags}", id=f"{arch}-{linker}-{flags}"))
    return out


@pytest.mark.parametrize(("arch", "combo"), _params())
def test_patched_with_runpath_and_interpreter(arch: str, combo: str) -> None:
    _skip_unless_runnable(arch, combo)
    matrix, _, records = _matrix(arch)
    if combo in matrix.skipped:
        pytest.skip(matrix.skipped[combo])
    assert records["problems"] == []
    for kind, member in (("lib", matrix.libs[combo]), ("exe", matrix.exes[combo])):
        record = records[member]
        assert record.patch in ("in-place", "append"), (member, record)  # type: ignore[attr-defined]
        assert DRIVER in (record.runpath_after or ""), record  # type: ignore[attr-defined]
        placed = _placed(_root() / arch / "out-split", member)
        info = read_elf_info(placed)
        assert info is not None and info.runpath == record.runpath_after  # type: ignore[attr-defined]
        if kind == "exe":
            assert info.interp == str(matrix.loader)
        assert records[f"repatch:{member}"] == "in-place"


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(("arch", "combo"), _params())
def test_loads_and_runs(arch: str, combo: str, stage: str) -> None:
    _skip_unless_runnable(arch, combo)
    matrix, results, _ = _matrix(arch)
    if combo in matrix.skipped:
        pytest.skip(matrix.skipped[combo])
    ok = (0, str(EXPECTED))
    for kind, member in (("lib", matrix.libs[combo]), ("exe", matrix.exes[combo])):
        before = results[("before", kind, combo)]
        if before != ok:  # lld 14's RELR executables lack the GLIBC_ABI_DT_RELR need
            assert results[(stage, kind, combo)][0] != 0, (member, "runs only after the split")
            continue
        code, text = results[(stage, kind, combo)]
        assert (code, text) == ok, f"{kind} {member}: {text}"


@pytest.mark.parametrize(("tool", "package"), [
    ("ld.bfd", "binutils"), ("ld.gold", "binutils"), ("ld.lld", "lld"), ("mold", "mold"),
    ("qemu-aarch64", "qemu-user")])
def test_every_linker_is_installed(tool: str, package: str) -> None:
    """The matrix above skips a linker that is missing; this says which, by name. Under .ci/run
    (CUDASPLIT_REQUIRE_TOOLS, every package of .ci/apt-packages.txt installed) a missing one
    fails instead: CI must run the whole matrix."""
    assert need(tool, package)
