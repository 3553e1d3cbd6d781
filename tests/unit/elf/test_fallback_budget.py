"""Issue 23: the LIEF fallback's cost is bounded and reported.

Identical inputs (same bytes, same edit) cost one LIEF child; its verified result (or its
refusal) is reused for every copy. Once a run's cap is spent, further files are refused
(``patch-failed``), and the report says what the fallback cost.

The fixture needs the fallback: a gcc library whose ``PT_NOTE`` became an ignored OS-specific
type and whose section headers are gone, so the append tier has no program header slot.
"""

from __future__ import annotations

import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import cudasplit._elf.patch.lief_worker as _lief_worker
import cudasplit._elf.patch.patcher as patcher
from cudasplit import RunpathPolicy, SplitOptions, split_to_dir
from cudasplit._elf.patch import ElfEdit, FallbackBudget, apply_edit
from cudasplit._elf.read import read_elf_info
from cudasplit.errors import PatchError
from tests.support.tarutil import write_archive

pytest.importorskip("lief")

LONG = "/nix/store/" + "c" * 32 + "-cuda_compat-12.9/compat"
RUNPATH = f"{LONG}:/run/opengl-driver/lib"


def _needs_fallback(src: Path, dst: Path) -> Path:
    blob = bytearray(src.read_bytes())
    phoff, = struct.unpack_from("<Q", blob, 32)
    phnum, = struct.unpack_from("<H", blob, 56)
    for i in range(phnum):
        if struct.unpack_from("<I", blob, phoff + 56 * i)[0] == 4:  # PT_NOTE
            struct.pack_into("<I", blob, phoff + 56 * i, 0x60000001)
    struct.pack_into("<Q", blob, 40, 0)  # e_shoff
    struct.pack_into("<HHH", blob, 58, 64, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    dst.write_bytes(bytes(blob))
    return dst


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fallback")
    out = {}
    for name, body in (("one", "return 4;"), ("two", "return 5;")):
        (root / f"{name}.c").write_text(f"int f(void){{{body}}}\n")
        built = root / f"{name}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(built), str(root / f"{name}.c")],
                       check=True)
        out[name] = _needs_fallback(built, root / f"lib{name}.so")
    return out


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = _lief_worker.run

    def run(src: str, dst: str, want: object, size: int) -> None:
        calls.append(src)
        real(src, dst, want, size)  # type: ignore[arg-type]

    monkeypatch.setattr(_lief_worker, "run", run)
    return calls


def _copies(src: Path, folder: Path, n: int) -> list[Path]:
    folder.mkdir()
    out = []
    for i in range(n):
        dst = folder / f"c{i}.so"
        dst.write_bytes(src.read_bytes())
        out.append(dst)
    return out


def _apply(path: Path, budget: FallbackBudget) -> str:
    try:
        return apply_edit(path, ElfEdit(runpath=RUNPATH), budget=budget).method
    except PatchError as exc:
        return f"refused: {str(exc).replace(str(path), '<file>')}"


def test_native_tiers_do_not_apply(libs: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "x.so"
    path.write_bytes(libs["one"].read_bytes())
    with pytest.raises(PatchError, match="does not apply"):
        apply_edit(path, ElfEdit(runpath=RUNPATH), patcher="native")


def test_identical_copies_cost_one_lief_run(libs: dict[str, Path], tmp_path: Path,
                                            counted: list[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The verified result is reused (strip cannot read a file without sections, so the
    strip probe is switched off here to get a result at all)."""
    monkeypatch.setattr(patcher, "verify_after_strip", lambda path, expect: None)
    files = _copies(libs["one"], tmp_path / "c", 20)
    budget = FallbackBudget()
    with ThreadPoolExecutor(max_workers=4) as pool:
        methods = list(pool.map(lambda p: _apply(p, budget), files))
    assert methods == ["lief"] * 20
    assert len(counted) == 1 and (budget.runs, budget.reused) == (1, 19)
    first = files[0].read_bytes()
    assert all(f.read_bytes() == first for f in files)
    assert read_elf_info(files[7]).runpath == RUNPATH  # type: ignore[union-attr]


def test_identical_copies_share_one_refusal(libs: dict[str, Path], tmp_path: Path,
                                            counted: list[str]) -> None:
    files = _copies(libs["one"], tmp_path / "c", 12)
    budget = FallbackBudget()
    with ThreadPoolExecutor(max_workers=3) as pool:
        methods = list(pool.map(lambda p: _apply(p, budget), files))
    assert len(set(methods)) == 1 and methods[0].startswith("refused: <file>: LIEF output")
    assert len(counted) == 1
    assert all(f.read_bytes() == libs["one"].read_bytes() for f in files)


def test_cap_refuses_new_inputs_once_spent(libs: dict[str, Path], tmp_path: Path,
                                           counted: list[str]) -> None:
    budget = FallbackBudget(max_runs=1)
    one, two = tmp_path / "one.so", tmp_path / "two.so"
    one.write_bytes(libs["one"].read_bytes())
    two.write_bytes(libs["two"].read_bytes())
    _apply(one, budget)
    assert "LIEF fallback budget spent (1 runs" in _apply(two, budget)
    assert len(counted) == 1 and budget.over == 1
    assert two.read_bytes() == libs["two"].read_bytes()
    assert "1 file(s) refused over the cap" in (budget.summary() or "")


def test_split_of_many_copies_reports_the_cost(libs: dict[str, Path], tmp_path: Path,
                                               counted: list[str]) -> None:
    data = libs["one"].read_bytes()
    archive = write_archive(tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive.tar.zst",
                            [("file", f"lib/libc{i}.so", data) for i in range(40)], "zst")
    report = split_to_dir(archive, tmp_path / "out",
                          SplitOptions(runpath=RunpathPolicy(cuda_compat=LONG), jobs=2))
    assert len(counted) == 1
    notes = [w.message for w in report.warnings if w.code == "lief-fallback"]
    assert len(notes) == 1 and "1 run(s)" in notes[0] and "39 identical" in notes[0]
    assert notes[0] in report.summary_lines()
    assert len([p for p in report.problems if p.code == "patch-failed"]) == 40
    assert "NOT patched: 40 ELF files" in "\n".join(report.summary_lines())
