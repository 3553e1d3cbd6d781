"""Issue 23: every writer the project can choose, on real NVIDIA libraries, strip included.

``--patcher auto`` is :mod:`tests.realbytes.test_real_elf`, which also asserts that auto took a
native tier (in place or append) for every library of its CUDA 12 corpus: that run is the
``native`` writer's on those files, so here ``native`` (tiers 1-2 only) goes through the CUDA 13
wheels the suite downloads (cuBLAS excepted, as there), and ``lief`` (tier 3 only) through
every library of both corpora up to ``LIEF_MAX_BYTES`` (``CUDASPLIT_LIEF_LARGE=1``: all of
them; LIEF takes 10-20 s per library of 100-500 MB, and refuses them all for the same reason
it refuses the smaller ones). So does each executable, through both writers (a RUNPATH and a
Nix-store-length interpreter; ``--version`` as patched and after ``strip``). A writer either
refuses (PatchError, the file byte-identical: LIEF's output is refused when
``strip --strip-debug`` or ``patchelf --shrink-rpath`` would change what the loader maps) or its
output loads (``ctypes.CDLL`` in a child) as written, after ``strip --strip-debug``,
``strip --strip-all`` and ``patchelf --shrink-rpath``. ``native`` must never refuse these files.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudasplit._elf.patch import apply_edit
from cudasplit._elf.plan import ElfEdit
from cudasplit.errors import PatchError
from tests.realbytes import test_real_elf as real
from tests.support.realwheels import CU13

pytestmark = real.pytestmark

PATCHERS = ("native", "lief")
# The CUDA 13 wheels the suite downloads, beyond test_real_elf's CUDA 12 corpus (cuBLAS stays
# out, as there: 0.9 GB).
CU13_LIBS = [("nvidia-nvvm==13.0.88", "lib/libnvvm.so.4"),
             ("nvidia-cuda-runtime==13.0.96", "lib/libcudart.so.13"),
             ("nvidia-cuda-cupti==13.0.85", "lib/libpcsamplingutil.so"),
             ("nvidia-cuda-cupti==13.0.85", "lib/libnvperf_host.so"),
             ("nvidia-cuda-cupti==13.0.85", "lib/libcheckpoint.so"),
             ("nvidia-cuda-cupti==13.0.85", "lib/libnvperf_target.so"),
             ("nvidia-cuda-cupti==13.0.85", "lib/libcupti.so.13"),
             ("nvidia-cuda-nvrtc==13.0.88", "lib/libnvrtc.so.13"),
             ("nvidia-cuda-nvrtc==13.0.88", "lib/libnvrtc-builtins.so.13.0"),
             ("nvidia-cuda-nvrtc==13.0.88", "lib/libnvrtc.alt.so.13"),
             ("nvidia-cuda-nvrtc==13.0.88", "lib/libnvrtc-builtins.alt.so.13.0"),
             ("nvidia-nvjitlink==13.0.88", "lib/libnvJitLink.so.13")]
assert {w.partition("==")[0] for w, _ in CU13_LIBS} <= set(CU13)
ALL_LIBS = [*real.LIBS, *CU13_LIBS]
LIEF_MAX_BYTES = 64 * 1024 * 1024
# The libraries over LIEF_MAX_BYTES, by name: the parametrisation is fixed when the tests are
# collected, before any wheel is downloaded (test_the_large_libraries_are_those_over_the_cap
# checks the names against the files).
LARGE_NAMES = ("libnvrtc.so", "libnvrtc.alt.so", "libnvJitLink.so", "libcurand.so",
               "libcufft.so", "libcusparse.so", "libcusolver.so", "libnccl.so")


def _large(rel: str) -> bool:
    return any(name in rel for name in LARGE_NAMES)


def _jobs() -> list[tuple[str, str, str]]:
    """(patcher, wheel, path): native on the CUDA 13 corpus, LIEF on every library up to
    LIEF_MAX_BYTES (every one with CUDASPLIT_LIEF_LARGE=1)."""
    every = bool(os.environ.get("CUDASPLIT_LIEF_LARGE"))
    return ([("native", w, rel) for w, rel in CU13_LIBS]
            + [("lief", w, rel) for w, rel in ALL_LIBS if every or not _large(rel)])


JOBS = _jobs()


def _locate(wheel: str, rel: str) -> Path:
    """:func:`tests.realbytes.test_real_elf._locate`, but never another platform's copy of a CUDA 13 wheel
    (the cache may hold the aarch64 one under the same name and version)."""
    found = real._locate(wheel, rel)
    top = next(p for p in found.parents if p.parent.name == "unpacked")
    if "x86_64" in top.name:
        return found
    twins = sorted(top.parent.glob(top.name.split("-py3-")[0] + "-py3-*x86_64*"))
    hits = [t / found.relative_to(top) for t in twins if (t / found.relative_to(top)).exists()]
    if not hits:
        pytest.skip(f"{rel}: only a {top.name} copy is cached")
    return hits[0]


def _check(src: Path, work: Path, patcher: str) -> dict[str, str]:
    work.mkdir(parents=True)
    if real._loads(src) != "ok":
        return {"original": f"does not load (not tested): {real._loads(src)}"}
    for sibling in src.parent.iterdir():
        if sibling.name != src.name:
            (work / sibling.name).symlink_to(sibling)
    patched = work / src.name
    shutil.copyfile(src, patched)
    try:
        method = apply_edit(patched, ElfEdit(runpath=real.TARGET), patcher=patcher).method
    except PatchError as exc:
        same = patched.read_bytes() == src.read_bytes()
        patched.unlink()
        return {"refused": str(exc).replace(str(work), "<work>"), "untouched": str(same)}
    results = {"method": method}
    for name, path in real._variants(patched, work).items():
        results[name] = real._loads(path)
        if path != patched:
            path.unlink()
    patched.unlink()
    return results


def _check_exe(src: Path, work: Path, patcher: str, loader: Path) -> dict[str, str]:
    work.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin"}
    if real._run_version(src, env) != "ok":
        return {"original": "does not run (not tested)"}
    patched = work / src.name
    shutil.copy2(src, patched)
    edit = ElfEdit(runpath=f"{real.TARGET}:$ORIGIN/../lib", interpreter=str(loader))
    try:
        method = apply_edit(patched, edit, patcher=patcher).method
    except PatchError as exc:
        same = patched.read_bytes() == src.read_bytes()
        patched.unlink()
        return {"refused": str(exc).replace(str(work), "<work>"), "untouched": str(same)}
    results = {"method": method, "patched": real._run_version(patched, env)}
    for mode in ("--strip-debug", "--strip-all"):
        dst = work / f"{src.name}{mode}"
        done = real._run("strip", mode, "-o", str(dst), str(patched))
        results[mode.lstrip("-")] = real._run_version(dst, env) if done.returncode == 0 \
            else f"strip failed: {done.stderr.strip()[-200:]}"
        dst.unlink(missing_ok=True)
    patched.unlink()
    return results


@pytest.fixture(scope="module")
def exe_results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str],
                                                                   dict[str, str]]:
    if shutil.which("strip") is None or not Path(real.LOADER).exists():
        pytest.skip("binutils strip or the x86_64 glibc loader missing")
    root = tmp_path_factory.mktemp("real-writer-exes")
    loader = root / "nix/store" / f"{real.HASH}-glibc-2.40" / "lib/ld-linux-x86-64.so.2"
    loader.parent.mkdir(parents=True)
    shutil.copy2(Path(real.LOADER).resolve(), loader)
    out = {}
    for patcher in PATCHERS:  # one at a time: see tests.realbytes.test_real_elf.exe_results (ETXTBSY)
        for i, (w, rel) in enumerate(real.EXES):
            out[(patcher, f"{w}:{rel}")] = _check_exe(real._locate(w, rel),
                                                      root / f"{patcher}-{i}", patcher, loader)
    return out


@pytest.fixture(scope="module")
def writer_results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str],
                                                                      dict[str, str]]:
    if shutil.which("strip") is None:
        pytest.skip("binutils strip not installed")
    real._LIBRARY_PATH[0] = real._library_path()
    root = tmp_path_factory.mktemp("real-writers")
    jobs = [(f"{w}:{rel}", _locate(w, rel), patcher, root / f"{patcher}-{i}")
            for i, (patcher, w, rel) in enumerate(JOBS)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda job: _check(job[1], job[3], job[2]), jobs))
    return {(job[2], job[0]): res for job, res in zip(jobs, done, strict=True)}


@pytest.mark.slow
@pytest.mark.parametrize(("patcher", "key"), [(p, f"{w}:{rel}") for p, w, rel in JOBS])
def test_each_writer_loads_after_strip_or_refuses(
        writer_results: dict[tuple[str, str], dict[str, str]], patcher: str, key: str) -> None:
    res = writer_results[(patcher, key)]
    if "original" in res:
        pytest.skip(f"{key}: {res['original']}")
    if "refused" in res:
        assert patcher == "lief", res  # the native tiers take every NVIDIA library
        assert res["untouched"] == "True", res
        return
    broken = {k: v for k, v in res.items() if k != "method" and v != "ok"}
    assert not broken, (key, patcher, res)


@pytest.mark.slow
@pytest.mark.parametrize("patcher", PATCHERS)
@pytest.mark.parametrize("key", [f"{w}:{rel}" for w, rel in real.EXES])
def test_each_writer_runs_executables_after_strip_or_refuses(
        exe_results: dict[tuple[str, str], dict[str, str]], patcher: str, key: str) -> None:
    res = exe_results[(patcher, key)]
    if "original" in res:
        pytest.skip(f"{key}: {res['original']}")
    if "refused" in res:
        assert patcher == "lief", res
        assert res["untouched"] == "True", res
        return
    broken = {k: v for k, v in res.items() if k != "method" and v != "ok"}
    assert not broken, (key, patcher, res)


@pytest.mark.slow
def test_the_large_libraries_are_those_over_the_cap() -> None:
    sizes = {f"{w}:{rel}": _locate(w, rel).stat().st_size for w, rel in ALL_LIBS}
    assert {k for k, size in sizes.items() if size > LIEF_MAX_BYTES} == \
        {f"{w}:{rel}" for w, rel in ALL_LIBS if _large(rel)}
