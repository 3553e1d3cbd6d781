"""What is inside real NVIDIA files, checked against NVIDIA's and binutils' own tools.

* GPU code: for every ELF file and static archive of the wheels below (cudart, cupti, nvrtc
  of CUDA 12.9 and 13.0, cuBLAS and cuDNN of CUDA 13), the SASS and PTX architecture lists,
  in order, equal ``cuobjdump --list-elf`` / ``--list-ptx`` (the ``nvidia-cuda-cuobjdump``
  wheel, pinned). cuobjdump names a family-specific cubin (``sm_100f``) ``sm_100`` in its
  ELF list (it keeps the ``f`` for PTX); the comparison maps that. cuobjdump lists the
  executable fatbinary of an object when there is one, else the relocatable one: so does
  the comparison.
* Sizes: per fatbinary section, the entries' stored bytes plus 16 bytes per container header
  equal the section's size (nothing is left uncounted); per file, the first cubin and PTX
  that cuobjdump extracts have the unpacked size we report (PTX: one byte less, the
  terminating NUL cuobjdump drops).
* glibc floors equal the highest versions ``readelf -V`` lists.
* The symbol diff of cudart 12.9 -> 13.0 lists what NVIDIA removed; ``objdump -T`` agrees.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cudasplit._elf.read import FatbinEntry, fatbin_entries, read_inside, version_key
from cudasplit.releases import diff_releases
from tests.support.realwheels import cu12, cu13, wheel_root

CUOBJDUMP = ("nvidia-cuda-cuobjdump", "13.4.92")
WHEELS = [
    ("nvidia-cuda-runtime-cu12", None), ("nvidia-cuda-runtime", None),
    ("nvidia-cuda-cupti-cu12", None), ("nvidia-cuda-cupti", None),
    ("nvidia-cuda-nvrtc-cu12", None), ("nvidia-cuda-nvrtc", None),
    ("nvidia-cublas", "13.1.1.3"), ("nvidia-cudnn-cu13", "9.27.0.42"),
]


def _root(name: str, version: str | None) -> Path:
    if version is not None:
        return wheel_root(name, version)
    return cu12(name) if name.endswith("-cu12") else cu13(name)


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    root = wheel_root(*CUOBJDUMP)
    found = sorted(root.glob("nvidia/*/bin/cuobjdump"))
    if not found:
        pytest.skip(f"{CUOBJDUMP[0]} {CUOBJDUMP[1]} holds no bin/cuobjdump")
    return str(found[0])


def _binaries(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as fh:
                head = fh.read(8)
            if head[:4] == b"\x7fELF" or head == b"!<arch>\n":
                found.append(path)
    return found


def _theirs(tool: str, path: Path, flag: str, ext: str) -> list[str]:
    out = subprocess.run([tool, flag, str(path)], capture_output=True, text=True,
                         timeout=600).stdout
    return re.findall(r"\.(sm_\w+)\." + ext + "$", out, re.M)


def _ours(path: Path) -> tuple[dict[str, list[FatbinEntry]], list[str]]:
    problems: list[str] = []
    by_object: dict[str, list[FatbinEntry]] = {}
    for obj, entry in fatbin_entries(path, problems):
        by_object.setdefault(obj, []).append(entry)
    return by_object, problems


def _listed(by_object: dict[str, list[FatbinEntry]], kind: str) -> list[str]:
    """What cuobjdump lists: per object its executable fatbinary, else its relocatable one."""
    names = []
    for entries in by_object.values():
        chosen = [e for e in entries if e.section == ".nv_fatbin"] or entries
        for e in chosen:
            if e.kind == kind:
                names.append(e.arch[:-1] if kind == "sass" and e.arch.endswith("f")
                             else e.arch)
    return names


@pytest.mark.parametrize("wheel", WHEELS, ids=[w[0] for w in WHEELS])
def test_gpu_code_equals_cuobjdump(wheel: tuple[str, str | None], cuobjdump: str) -> None:
    files = _binaries(_root(*wheel))
    assert files
    with_code = 0
    for path in files:
        by_object, problems = _ours(path)
        assert not problems, (path, problems)
        sass, ptx = _listed(by_object, "sass"), _listed(by_object, "ptx")
        assert sass == _theirs(cuobjdump, path, "--list-elf", "cubin"), path
        assert ptx == _theirs(cuobjdump, path, "--list-ptx", "ptx"), path
        with_code += bool(sass or ptx)
    if wheel[0].startswith(("nvidia-cublas", "nvidia-cudnn", "nvidia-cuda-runtime")):
        assert with_code, "these wheels carry GPU code"


def _section_sizes(path: Path) -> dict[str, int]:
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        match = re.search(r"\]\s+(\.nv_fatbin|__nv_relfatbin)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)",
                          line)
        if match:
            sizes[match[1]] = int(match[2], 16)
    return sizes


@pytest.mark.parametrize("wheel", [w for w in WHEELS if w[1]], ids=lambda w: w[0])
def test_sizes_add_up_and_match_extracted_code(wheel: tuple[str, str | None],
                                               cuobjdump: str, tmp_path: Path) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("needs readelf (binutils)")
    for path in _binaries(_root(*wheel)):
        by_object, _ = _ours(path)
        entries = [e for found in by_object.values() for e in found]
        if not entries or path.name.endswith(".a"):
            continue
        for section, size in _section_sizes(path).items():
            mine = [e for e in entries if e.section == section]
            containers = len({e.container for e in mine})
            assert sum(e.stored for e in mine) + 16 * containers == size, (path, section)
        _check_extracted(cuobjdump, path, entries, tmp_path)


def _check_extracted(tool: str, path: Path, entries: list[FatbinEntry], tmp: Path) -> None:
    """The first cubin and PTX cuobjdump extracts are the sizes we report unpacked."""
    stem = path.name.split(".so")[0] + ".so" if ".so" in path.name else path.stem
    counters: Counter[str] = Counter()
    wanted = {}
    for e in entries:
        if e.section != ".nv_fatbin" or e.kind not in ("sass", "ptx"):
            continue
        counters[e.kind] += 1
        if e.kind not in wanted:
            arch = e.arch[:-1] if e.kind == "sass" and e.arch.endswith("f") else e.arch
            ext = "cubin" if e.kind == "sass" else "ptx"
            wanted[e.kind] = (f"{stem}.{counters[e.kind]}.{arch}.{ext}", e)
    for kind, (name, entry) in wanted.items():
        flag = "-xelf" if kind == "sass" else "-xptx"
        subprocess.run([tool, flag, name, str(path)], cwd=tmp, capture_output=True, timeout=600)
        size = (tmp / name).stat().st_size
        assert size == (entry.size if kind == "sass" else entry.size - 1), (path, name)


def _readelf_floors(path: Path) -> dict[str, str]:
    out = subprocess.run(["readelf", "-V", "--wide", str(path)], capture_output=True,
                         text=True).stdout
    needs = out.split("Version needs section", 1)
    best: dict[str, str] = {}
    for prefix, version in re.findall(r"Name: (GLIBCXX|GLIBC|CXXABI|GCC)_([\d.]+)\s",
                                      needs[1] if len(needs) > 1 else ""):
        if prefix not in best or version_key(version) > version_key(best[prefix]):
            best[prefix] = version
    return best


@pytest.mark.parametrize("wheel", WHEELS, ids=[w[0] for w in WHEELS])
def test_glibc_floors_equal_readelf(wheel: tuple[str, str | None]) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("needs readelf (binutils)")
    for path in _binaries(_root(*wheel)):
        inside = read_inside(path)
        if inside is None or path.name.endswith(".a"):
            continue
        assert {n.prefix: n.version for n in inside.floors} == _readelf_floors(path), path


def _objdump_defined(path: Path) -> set[str]:
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if " DF " in line or " DO " in line
            if "*UND*" not in line and "*ABS*" not in line}   # ABS: version node markers


def test_cudart_symbol_diff_lists_what_nvidia_removed() -> None:
    if shutil.which("objdump") is None:
        pytest.skip("needs objdump (binutils)")
    from tests.support.releases import release
    old, new = release("12.9.1"), release("13.0.2")
    diff = diff_releases(old.tarball("cuda_cudart"), new.tarball("cuda_cudart"))
    removed = {c.old.split("@")[0] for c in diff.of("symbol-removed")}
    added = {c.new.split("@")[0] for c in diff.of("symbol-added")}
    # CUDA 13.0 removed the deprecated thread-scope API and the _v2 variants it had superseded
    assert {"cudaThreadExit", "cudaThreadSynchronize", "cudaSetDoubleForDevice"} <= removed
    lib12 = next(old.roots["cuda_cudart"].rglob("libcudart.so.12"))
    lib13 = next(new.roots["cuda_cudart"].rglob("libcudart.so.13"))
    before, after = _objdump_defined(lib12), _objdump_defined(lib13)
    assert removed == before - after
    assert added == after - before
    moved = diff.of("symbol-moved")
    assert moved and all(c.old.endswith("@@libcudart.so.12") and
                         c.new.endswith("@@libcudart.so.13") for c in moved)
    gone = {c.old for c in diff.of("gpu-removed")}
    assert {"sm_50", "sm_52", "sm_60", "sm_61", "sm_70"} <= gone   # pre-Turing SASS dropped
    assert os.path.basename(str(old.tarball("cuda_cudart"))).startswith("cuda_cudart")
