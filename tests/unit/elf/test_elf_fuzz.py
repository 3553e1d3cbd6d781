"""Hostile ELF input for the writer (issue 15.3, 15.4, 15.7).

Targeted cases: what the writer cannot write safely is refused with the file byte-identical
(DT_STRSZ smaller than the strings in use, two DT_STRTAB, a search path that is the tail of a
library name, PT_LOAD alignment below the page size, version chains that outgrow the file,
e_type that is neither EXEC nor DYN), and LIEF's crashes stay in its child process.

The fuzzer: a seeded mutator over gcc-built libraries and executables (GNU layout and NVIDIA's
layout) that flips bytes and plants interesting values in the ELF header, program headers,
dynamic array, .dynstr and version records, then applies an edit. For every case: no exception
but a ``CudasplitError`` (ValueError never: the inputs are valid strings), a refused input is
byte-identical, a patched output works (libraries: ``dlopen`` in a child; executables:
``--version``, through the new interpreter where the edit sets one) whenever the mutated input
did, and each case finishes in bounded time. ``CUDASPLIT_FUZZ=1`` runs 10,000 cases
(``CUDASPLIT_FUZZ=N`` runs N), the default run 400.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudasplit._elf.patch import apply_edit, set_runpath
from cudasplit._elf.plan import ElfEdit
from cudasplit._elf.read import (
    DT_NEEDED,
    DT_RUNPATH,
    DT_STRSZ,
    DT_STRTAB,
    DT_VERNEED,
    PT_LOAD,
    open_raw,
    read_elf_info,
)
from cudasplit.errors import CudasplitError, ElfError, PatchError
from tests.support import nvlayout

TARGET = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.9/compat:" \
    "/run/opengl-driver/lib:$ORIGIN"
B_C = "int b_value(void){ return 2; }\n"
A_C = "int b_value(void);\nint a_value(void){ return 40 + b_value(); }\n"


def _cc(out: Path, src: str, *flags: str) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["gcc", str(c), "-o", str(out), *flags], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not nvlayout.have_gcc():
        pytest.skip("gcc not installed")
    root = tmp_path_factory.mktemp("fuzz-seeds")
    _DLOPEN[:] = [_cc(root / "dlopen", DLOPEN_C, "-ldl")]
    libb = _cc(root / "libb.so", B_C, "-shared", "-fPIC", "-Wl,-soname,libb.so")
    liba = _cc(root / "liba.so", A_C, "-shared", "-fPIC", f"-L{root}", "-lb",
               "-Wl,-rpath,$ORIGIN")
    nv = nvlayout.build_nvlike(root / "nv")
    pie = _cc(root / "pieexe", nvlayout.EXE_C, "-pie", "-fPIE", f"-L{root / 'nv'}",
              "-l:libnvnote.so.1")
    if os.path.exists(GLIBC_LOADER):
        loader = root / "nix/store/0123456789abcdfghijklmnpqrsvwxyz-glibc-2.40/lib" / \
            "ld-linux-x86-64.so.2"
        loader.parent.mkdir(parents=True)
        shutil.copy2(os.path.realpath(GLIBC_LOADER), loader)
        _EXE_EDITS[:] = [ElfEdit(runpath=TARGET, interpreter=str(loader)),
                         ElfEdit(interpreter=str(loader)), ElfEdit(runpath="$ORIGIN"),
                         ElfEdit(runpath=TARGET, interpreter=GLIBC_LOADER)]
    return {"libb": libb, "liba": liba, "nvnote": nv["note"], "nvnonote": nv["nonote"],
            "nvuser": nv["user"], "nvexe": nv["exe"], "pieexe": pie}


GLIBC_LOADER = "/lib64/ld-linux-x86-64.so.2"
_EXES = ("nvexe", "pieexe")
# The executables' edits; they set a non-default interpreter at a long store-like path (a copy
# of the system loader made by the ``seeds`` fixture).
_EXE_EDITS: list[ElfEdit] = [ElfEdit(runpath="$ORIGIN")]


DLOPEN_C = """
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_LAZY);
    if (!h) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
    puts("ok");
    return 0;
}
"""
_DLOPEN: list[Path] = []


def _runs(path: Path, tries: int = 1, need: int = 1) -> bool:
    """Does the executable answer ``--version`` at least `need` of `tries` times?"""
    ok = 0
    for _ in range(tries):
        ok += _run_once(path)
        if ok >= need:
            return True
    return False


def _run_once(path: Path) -> bool:
    for _ in range(20):  # ETXTBSY: a child forked by the other thread held our file briefly
        try:
            done = subprocess.run([str(path), "--version"], capture_output=True, timeout=10,
                                  check=False, cwd=path.parent,
                                  env={"LD_LIBRARY_PATH": str(path.parent)})
            return done.returncode == 0 and done.stdout.strip() == b"nvlike 1.0"
        except subprocess.TimeoutExpired:
            return False
        except OSError as exc:
            if exc.errno != 26:
                return False  # e.g. ENOEXEC: the kernel refuses the mutated file
            time.sleep(0.05)
    return False


def _works(name: str, path: Path, tries: int = 1, need: int = 1) -> bool:
    return _runs(path, tries, need) if name in _EXES else _loads(path, tries, need)


def _loads(path: Path, tries: int = 1, need: int = 1) -> bool:
    """Does dlopen (RTLD_LAZY, in a child) succeed at least `need` of `tries` times?

    A mutated relocation can write to a random address: whether that hits a mapping depends on
    ASLR, so such an input "loads" only by luck. Inputs must load every time to count as
    loading; outputs may retry.
    """
    ok = 0
    for _ in range(tries):
        try:
            done = subprocess.run([str(_DLOPEN[0]), str(path)], capture_output=True,
                                  timeout=20, check=False, cwd=path.parent,
                                  env={"LD_LIBRARY_PATH": str(path.parent)})
            ok += done.stdout.strip() == b"ok"
        except subprocess.TimeoutExpired:
            pass
        if ok >= need:
            return True
    return False


# --------------------------------------------------------------------------- file surgery

class Surgery:
    """Offsets of the parts of a file the tests change (found with the reader under test)."""

    def __init__(self, path: Path) -> None:
        elf = open_raw(str(path))
        try:
            self.dynstr = elf.dynstr()
            self.verneed_off = elf.vaddr_to_offset(elf.dyn_value(DT_VERNEED) or elf.strtab_addr)
        finally:
            os.close(elf.fd)
        self.elf = elf
        self.blob = bytearray(path.read_bytes())

    def name(self, value: int) -> bytes:
        return self.dynstr[value:self.dynstr.index(b"\0", value)]

    def dyn_entry_off(self, index: int) -> int:
        return self.elf.dyn_off + index * self.elf.dynent

    def set_dyn(self, index: int, tag: int, value: int) -> None:
        struct.pack_into(self.elf.bo + "qQ", self.blob, self.dyn_entry_off(index), tag, value)

    def dyn_index(self, tag: int) -> int:
        return next(i for i, (t, _) in enumerate(self.elf.entries) if t == tag)

    def regions(self) -> list[tuple[int, int]]:
        """(offset, length) of the parts worth mutating."""
        e = self.elf
        out = [(0, 64), (e.phoff, e.phnum * e.phentsize), (e.dyn_off, e.dyn_cap * e.dynent),
               (e.strtab_off, e.strsz)]
        if e.shnum:
            out.append((e.shoff, e.shnum * e.shentsize))
        if e.dyn_value(DT_VERNEED) is not None:
            out.append((self.verneed_off, 64))
        return [(o, n) for o, n in out if n > 0 and o + n <= len(self.blob)]


def _write(path: Path, blob: bytes | bytearray) -> Path:
    path.write_bytes(bytes(blob))
    return path


def _refused_untouched(path: Path, edit: ElfEdit, *, patcher: str = "auto") -> str:
    before = path.read_bytes()
    with pytest.raises(CudasplitError) as err:
        apply_edit(path, edit, patcher=patcher)
    assert path.read_bytes() == before
    return str(err.value)


# --------------------------------------------------------------------------- targeted cases

def test_strsz_smaller_than_the_strings_in_use(seeds: dict[str, Path], tmp_path: Path) -> None:
    s = Surgery(seeds["liba"])
    s.set_dyn(s.dyn_index(DT_STRSZ), DT_STRSZ, 3)
    msg = _refused_untouched(_write(tmp_path / "liba.so", s.blob), ElfEdit(runpath=TARGET))
    assert "DT_STRSZ" in msg


def test_symbol_names_beyond_strsz_are_not_cut_off(seeds: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """DT_STRSZ covers the dynamic tags' strings but not every symbol name: append refuses."""
    s = Surgery(seeds["nvnote"])
    dynstr = s.dynstr
    names = [s.name(v) for t, v in s.elf.entries if t in (DT_NEEDED, 14)]
    last = max(dynstr.index(n + b"\0") + len(n) + 1 for n in names)
    if last >= len(dynstr):
        pytest.skip("the dynamic names end .dynstr here")
    s.set_dyn(s.dyn_index(DT_STRSZ), DT_STRSZ, last)
    path = _write(tmp_path / "lib.so", s.blob)
    msg = _refused_untouched(path, ElfEdit(runpath=TARGET))
    assert "DT_STRSZ" in msg


def test_two_strtab_entries(seeds: dict[str, Path], tmp_path: Path) -> None:
    s = Surgery(seeds["liba"])
    n = len(s.elf.entries)
    s.set_dyn(n, DT_STRTAB, s.elf.strtab_addr + 1)  # glibc would use this one
    msg = _refused_untouched(_write(tmp_path / "liba.so", s.blob), ElfEdit(runpath="$ORIGIN"))
    assert "DT_STRTAB" in msg


def test_runpath_that_is_the_tail_of_a_library_name(seeds: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """DT_RUNPATH points into "libb.so": writing in place would rename the library."""
    s = Surgery(seeds["liba"])
    needed = next(v for t, v in s.elf.entries if t == DT_NEEDED and
                  s.name(v) == b"libb.so")
    s.set_dyn(s.dyn_index(DT_RUNPATH), DT_RUNPATH, needed + 3)  # "b.so"
    path = _write(tmp_path / "liba.so", s.blob)
    shutil.copy2(seeds["libb"], tmp_path / "libb.so")
    res = set_runpath(path, "$O")  # would fit into "b.so" in place
    assert res.method == "append"
    info = read_elf_info(path)
    assert info is not None and "libb.so" in info.needed and info.runpath == "$O"


def test_load_alignment_below_the_page_size(seeds: dict[str, Path], tmp_path: Path) -> None:
    s = Surgery(seeds["liba"])
    e = s.elf
    for i, ph in enumerate(e.phdrs):
        if ph.p_type == PT_LOAD:
            struct.pack_into(e.bo + "Q", s.blob, e.phoff + i * e.phentsize + 48, 16)
    path = _write(tmp_path / "liba.so", s.blob)
    msg = _refused_untouched(path, ElfEdit(runpath=TARGET))
    assert "page size" in msg
    assert set_runpath(path, "/x").method == "in-place"  # no new segment: fine


def test_huge_version_counts_are_bounded(seeds: dict[str, Path], tmp_path: Path) -> None:
    """vn_cnt and DT_VERNEEDNUM at their maximum over aux records 1 byte apart (issue 15.4:
    65,536 x 65,535 steps): refused (or walked) within the file-size bound, quickly."""
    s = Surgery(seeds["nvnote"])
    e = s.elf
    off = s.verneed_off
    struct.pack_into(e.bo + "H", s.blob, off + 2, 0xFFFF)  # vn_cnt
    aux, = struct.unpack_from(e.bo + "I", s.blob, off + 8)
    struct.pack_into(e.bo + "I", s.blob, off + aux + 12, 1)  # vna_next: overlapping records
    idx = next(i for i, (t, _) in enumerate(e.entries) if t == 0x6FFFFFFF)
    s.set_dyn(idx, 0x6FFFFFFF, 0xFFFF)
    path = _write(tmp_path / "liba.so", s.blob)
    start = time.monotonic()
    _refused_untouched(path, ElfEdit(runpath=TARGET))
    assert time.monotonic() - start < 2


def test_overlapping_version_records_are_bounded(seeds: dict[str, Path], tmp_path: Path) -> None:
    """Records whose next offset is 0-length-ish (4 bytes) overlap: bounded by the file size."""
    s = Surgery(seeds["nvnote"])
    e = s.elf
    off = s.verneed_off
    struct.pack_into(e.bo + "I", s.blob, off + 12, 4)  # vn_next = 4: overlapping records
    idx = next(i for i, (t, _) in enumerate(e.entries) if t == 0x6FFFFFFF)
    s.set_dyn(idx, 0x6FFFFFFF, 0xFFFF)
    path = _write(tmp_path / "liba.so", s.blob)
    before = path.read_bytes()
    start = time.monotonic()
    with pytest.raises(ElfError):
        apply_edit(path, ElfEdit(runpath=TARGET))
    assert time.monotonic() - start < 2
    assert path.read_bytes() == before


def test_lief_crash_is_one_line_patch_error(seeds: dict[str, Path], tmp_path: Path) -> None:
    """A LIEF failure in the child (here: killed by its memory cap) is a PatchError line."""
    import cudasplit._elf.patch.lief_worker as _lief_worker

    path = tmp_path / "liba.so"
    shutil.copy2(seeds["liba"], path)
    before = path.read_bytes()
    orig = _lief_worker.memory_cap
    try:
        _lief_worker.memory_cap = lambda size: 64 << 20  # type: ignore[assignment]
        with pytest.raises(PatchError) as err:
            apply_edit(path, ElfEdit(runpath=TARGET), patcher="lief")
    finally:
        _lief_worker.memory_cap = orig  # type: ignore[assignment]
    assert "\n" not in str(err.value) and "LIEF" in str(err.value)
    assert path.read_bytes() == before


def test_unknown_e_type_never_reaches_lief(seeds: dict[str, Path], tmp_path: Path) -> None:
    """e_type = 7 made LIEF abort in-process (issue 15.3): refused before LIEF is called."""
    blob = bytearray(seeds["liba"].read_bytes())
    struct.pack_into("<H", blob, 16, 7)
    path = _write(tmp_path / "liba.so", blob)
    for patcher in ("auto", "lief"):
        msg = _refused_untouched(path, ElfEdit(runpath=TARGET), patcher=patcher)
        assert "e_type" in msg and "\n" not in msg


def test_lief_tier_output_survives_strip(seeds: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("lief")
    path = tmp_path / "liba.so"
    shutil.copy2(seeds["liba"], path)
    shutil.copy2(seeds["libb"], tmp_path / "libb.so")
    try:
        assert apply_edit(path, ElfEdit(runpath=TARGET), patcher="lief").method == "lief"
    except PatchError as exc:  # refused because strip would break it: also a valid outcome
        assert "strip" in str(exc)
        return
    subprocess.run(["strip", "--strip-debug", str(path)], check=True)
    assert _loads(path)


# --------------------------------------------------------------------------- the fuzzer

_INTERESTING = (0, 1, 2, 3, 4, 7, 8, 0x10, 0x40, 0xFF, 0x100, 0x1000, 0x7FFF, 0xFFFF,
                0x7FFFFFFF, 0xFFFFFFFF, 0x6FFFFFFE, 0x6FFFFFFF)


def _mutate(rng: random.Random, blob: bytearray, regions: list[tuple[int, int]]) -> str:
    off, length = rng.choice(regions)
    at = off + rng.randrange(length)
    how = rng.randrange(4)
    if how == 0:
        blob[at] ^= 1 << rng.randrange(8)
        return f"flip@{at:#x}"
    if how == 1:
        blob[at] = rng.randrange(256)
        return f"byte@{at:#x}"
    width = rng.choice((2, 4, 8))
    at -= at % width
    if at + width > len(blob):
        return "none"
    value = rng.choice(_INTERESTING) if how == 2 else \
        int.from_bytes(blob[at:at + width], "little") + rng.choice((-8, -1, 1, 8, 0x1000))
    blob[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    return f"int{width}@{at:#x}={value:#x}"


_EDITS = (ElfEdit(runpath=TARGET), ElfEdit(runpath="$ORIGIN"),
          ElfEdit(runpath=TARGET, add_needed=("libm.so.6",)),
          ElfEdit(replace_needed=(("libc.so.6", "libc.so.6"),), runpath="$ORIGIN/../lib"))


def _one_case(seed: int, seeds: dict[str, Path], regions: dict[str, list[tuple[int, int]]],
              work: Path) -> str | None:
    """Run one case; None when it held, else what went wrong (counts go to ``_OUTCOMES``)."""
    rng = random.Random(seed)
    name = rng.choice(sorted(regions))
    blob = bytearray(seeds[name].read_bytes())
    what = [_mutate(rng, blob, regions[name]) for _ in range(rng.randint(1, 3))]
    case = work / f"c{seed}"
    case.mkdir()
    path = case / seeds[name].name
    path.write_bytes(bytes(blob))
    path.chmod(0o755)
    for dep in ("libb", "nvnote"):
        if not (case / seeds[dep].name).exists():
            (case / seeds[dep].name).symlink_to(seeds[dep])
    edit = rng.choice(_EXE_EDITS if name in _EXES else _EDITS)
    loaded = _works(name, path, tries=3, need=3)
    start = time.monotonic()
    try:
        apply_edit(path, edit, patcher="native" if rng.random() < 0.9 else "auto")
    except CudasplitError:
        if path.read_bytes() != bytes(blob):
            return f"seed {seed} {name} {what}: refused but the file changed"
        shutil.rmtree(case)
        _OUTCOMES.append((name, "refused"))
        return None
    except Exception as exc:  # anything else is a bug
        return f"seed {seed} {name} {what}: {type(exc).__name__}: {exc}"
    took = time.monotonic() - start
    if took > 20:
        return f"seed {seed} {name} {what}: took {took:.1f} s"
    if loaded and not _works(name, path, tries=3) and \
            _relocations_stay_inside(case / "in", blob):
        return f"seed {seed} {name} {what}: loaded before, not after {edit}"
    shutil.rmtree(case)
    _OUTCOMES.append((name, "patched, works" if loaded else "patched"))
    return None


_OUTCOMES: list[tuple[str, str]] = []  # (seed file, outcome) of the cases that held


def _relocations_stay_inside(scratch: Path, blob: bytes | bytearray) -> bool:
    """Do all relocations of the input write inside its own segments?

    A mutated relocation that writes past the object's end lands in whatever the loader mapped
    next to it: the input "loads" only by accident of the address-space layout, which any added
    segment changes. Such inputs are out of scope for "loads after if it loaded before".
    """
    scratch.write_bytes(bytes(blob))
    try:
        elf = open_raw(str(scratch))
    except CudasplitError:
        return True
    try:
        spans = [(ph.p_vaddr, ph.mem_end) for ph in elf.phdrs if ph.p_type == PT_LOAD]
        for addr_tag, size_tag in ((7, 8), (23, 2)):  # DT_RELA/RELASZ, DT_JMPREL/PLTRELSZ
            addr, size = elf.dyn_value(addr_tag), elf.dyn_value(size_tag)
            if addr is None or not size:
                continue
            try:
                data = elf.pread(size - size % 24, elf.vaddr_to_offset(addr, size))
            except CudasplitError:
                return False
            for r_offset, _, _ in struct.iter_unpack(elf.bo + "QQq", data):
                if not any(lo <= r_offset < hi for lo, hi in spans):
                    return False
        return True
    finally:
        os.close(elf.fd)


def _case_count() -> int:
    value = os.environ.get("CUDASPLIT_FUZZ", "")
    if not value:
        return 400
    return 10_000 if value == "1" else int(value)


def test_fuzzed_elf_files(seeds: dict[str, Path], tmp_path: Path) -> None:
    regions = {}
    for name, path in seeds.items():
        regions[name] = Surgery(path).regions()
    count = _case_count()
    base = int(os.environ.get("CUDASPLIT_FUZZ_SEED", "20261124"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for p in pool.map(lambda i: _one_case(base + i, seeds, regions, tmp_path),
                                        range(count)) if p]
    assert not problems, f"{len(problems)} of {count} cases failed:\n" + "\n".join(problems[:20])
    # Not vacuous: libraries and executables were patched and still worked.
    working = {name for name, outcome in _OUTCOMES if outcome == "patched, works"}
    assert {"nvnote", "nvnonote", "nvexe", "pieexe"} <= working, sorted(working)
