"""Issue 23: the program header checks accept exactly what ld.so accepts.

ld.so mprotects PT_GNU_RELRO rounded *down* to pages at both ends (lld pads RELRO to the page
end, past its PT_LOAD's memsz), and copies only PT_TLS's p_filesz bytes from the mapping (lld and
mold give .tbss no room in any PT_LOAD). A RELRO that reaches an unmapped page, or a TLS image
outside every PT_LOAD, is still refused.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudasplit._elf.read import read_raw
from cudasplit.errors import ElfError

pytestmark = pytest.mark.skipif(shutil.which("ld.lld") is None, reason="needs lld")

SOURCE = "__thread int t = 7; __thread int z; int g; int *const p = &g; int f(void){return t + z;}\n"
PT_TLS, PT_GNU_RELRO, PT_LOAD = 7, 0x6474E552, 1


@pytest.fixture(scope="module")
def lld_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lld")
    (root / "a.c").write_text(SOURCE)
    out = root / "liba.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-fuse-ld=lld", "-Wl,-z,relro,-z,now", "-o",
                    str(out), str(root / "a.c")], check=True)
    return out


def _phdrs(blob: bytes) -> list[tuple[int, int, list[int]]]:
    """(index, table offset, [type, flags, offset, vaddr, paddr, filesz, memsz, align])."""
    phoff, = struct.unpack_from("<Q", blob, 32)
    phnum, = struct.unpack_from("<H", blob, 56)
    return [(i, phoff + 56 * i, list(struct.unpack_from("<IIQQQQQQ", blob, phoff + 56 * i)))
            for i in range(phnum)]


def _edit(src: Path, dst: Path, p_type: int, **fields: int) -> Path:
    blob = bytearray(src.read_bytes())
    names = ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align")
    for _, at, ph in _phdrs(bytes(blob)):
        if ph[0] == p_type:
            for key, value in fields.items():
                ph[names.index(key)] = value
            struct.pack_into("<IIQQQQQQ", blob, at, *ph)
    dst.write_bytes(bytes(blob))
    return dst


def _check(path: Path) -> None:
    with open(path, "rb") as stream:
        read_raw(str(path), stream.fileno())


def _seg(path: Path, p_type: int) -> list[int]:
    return next(ph for _, _, ph in _phdrs(path.read_bytes()) if ph[0] == p_type)


def _load_of(path: Path, vaddr: int) -> list[int]:
    return next(ph for _, _, ph in _phdrs(path.read_bytes())
                if ph[0] == PT_LOAD and ph[3] <= vaddr < ph[3] + ph[6])


def test_lld_relro_padded_to_the_page_end_is_accepted(lld_lib: Path) -> None:
    relro = _seg(lld_lib, PT_GNU_RELRO)
    load = _load_of(lld_lib, relro[3])
    assert relro[3] + relro[6] > load[3] + load[6]  # the layout the issue is about
    _check(lld_lib)


def test_relro_reaching_an_unmapped_page_is_refused(lld_lib: Path, tmp_path: Path) -> None:
    relro = _seg(lld_lib, PT_GNU_RELRO)
    far = _edit(lld_lib, tmp_path / "far.so", PT_GNU_RELRO, memsz=relro[6] + 0x100000)
    with pytest.raises(ElfError, match="lies outside every PT_LOAD"):
        _check(far)
    # Past the page end but not to the next page boundary: ld.so rounds down, never touches it.
    end = relro[3] + relro[6]
    within = _edit(lld_lib, tmp_path / "within.so", PT_GNU_RELRO,
                   memsz=relro[6] + (-end % 0x1000) + 0xFFF)
    _check(within)


def test_tls_block_beyond_every_load_is_accepted_its_image_is_not(
        lld_lib: Path, tmp_path: Path) -> None:
    tls = _seg(lld_lib, PT_TLS)
    big = _edit(lld_lib, tmp_path / "tbss.so", PT_TLS, memsz=tls[6] + 0x100000)
    _check(big)  # .tbss is zero-filled by ld.so in the TLS block, never read from the mapping
    load = _load_of(lld_lib, tls[3])
    over = load[3] + load[6] - tls[3] + 0x10  # the image runs 16 bytes past its PT_LOAD
    image = _edit(lld_lib, tmp_path / "tdata.so", PT_TLS, filesz=over, memsz=over)
    with pytest.raises(ElfError, match="lies outside every PT_LOAD"):
        _check(image)


def test_dynamic_outside_every_load_is_still_refused(lld_lib: Path, tmp_path: Path) -> None:
    bad = _edit(lld_lib, tmp_path / "dyn.so", 2, vaddr=0x7FFF0000)
    with pytest.raises(ElfError):
        _check(bad)
