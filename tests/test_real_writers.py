"""Issue 23: every writer the project can choose, on every real NVIDIA library, strip included.

``--patcher auto`` is :mod:`tests.test_real_elf`; here each library of its corpus goes through
``native`` (tiers 1-2 only) and ``lief`` (tier 3 only). A writer either refuses (PatchError, the
file byte-identical: LIEF's output is refused when ``strip --strip-debug`` or
``patchelf --shrink-rpath`` would change what the loader maps) or its output loads
(``ctypes.CDLL`` in a child) as written, after ``strip --strip-debug``, ``strip --strip-all`` and
``patchelf --shrink-rpath``. ``native`` must never refuse these files.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudasplit._elfedit import ElfEdit
from cudasplit._patch import apply_edit
from cudasplit.errors import PatchError
from tests import test_real_elf as real

pytestmark = real.pytestmark

PATCHERS = ("native", "lief")


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


@pytest.fixture(scope="module")
def writer_results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str],
                                                                      dict[str, str]]:
    if shutil.which("strip") is None:
        pytest.skip("binutils strip not installed")
    files = [(f"{w}:{rel}", real._locate(w, rel)) for w, rel in real.LIBS]
    real._LIBRARY_PATH[0] = real._library_path()
    root = tmp_path_factory.mktemp("real-writers")
    jobs = [(key, src, patcher, root / f"{patcher}-{i}") for patcher in PATCHERS
            for i, (key, src) in enumerate(files)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda job: _check(job[1], job[3], job[2]), jobs))
    return {(job[2], job[0]): res for job, res in zip(jobs, done, strict=True)}


@pytest.mark.slow
@pytest.mark.parametrize("patcher", PATCHERS)
@pytest.mark.parametrize("key", [f"{w}:{rel}" for w, rel in real.LIBS])
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
