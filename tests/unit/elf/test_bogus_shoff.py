"""Issue 23: a bogus ``e_shoff`` (the file still loads: the loader never reads section headers).

Whatever the header points at is left untouched by every tier: no "section header" or
``.symtab`` entry is written at a bogus offset, and the patched file loads.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cudasplit._elf.patch import ElfEdit, apply_edit
from cudasplit._elf.read import open_raw

LONG = "/nix/store/" + "b" * 32 + "-cuda_compat-12.9/compat:/run/opengl-driver/lib:$ORIGIN"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shoff")
    (root / "a.c").write_text("int g = 3; int *const p = &g; int f(void){return *p;}\n")
    out = root / "liba.so"
    subprocess.run(["gcc", "-g", "-shared", "-fPIC", "-o", str(out), str(root / "a.c")],
                   check=True)
    return out


def _shoff(blob: bytes) -> tuple[int, int, int]:
    shoff, = struct.unpack_from("<Q", blob, 40)
    shentsize, shnum = struct.unpack_from("<HH", blob, 58)
    return shoff, shentsize, shnum


def _with_shoff(src: Path, dst: Path, new: int) -> Path:
    blob = bytearray(src.read_bytes())
    struct.pack_into("<Q", blob, 40, new)
    dst.write_bytes(bytes(blob))
    return dst


def _loads(path: Path) -> bool:
    code = f"import ctypes,sys; sys.exit(0 if ctypes.CDLL({str(path)!r}).f() == 3 else 1)"
    return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def _bogus_offsets(lib: Path) -> dict[str, int]:
    shoff, shentsize, _ = _shoff(lib.read_bytes())
    with open(lib, "rb") as stream:
        from cudasplit._elf.read import read_raw
        elf = read_raw(str(lib), stream.fileno())
        debug = max(s.sh_offset for s in elf.shdrs if s.sh_type == 1 and not s.sh_flags & 2)
    return {"shifted-back": shoff - shentsize, "shifted-on": shoff + shentsize,
            "into-debug-info": debug, "zeros": shoff - 4 * shentsize}


@pytest.mark.parametrize("where", ["shifted-back", "shifted-on", "into-debug-info", "zeros"])
@pytest.mark.parametrize("patcher", ["auto", "append"])
def test_bogus_table_is_left_untouched(lib: Path, tmp_path: Path, where: str,
                                       patcher: str) -> None:
    bogus = _bogus_offsets(lib)[where]
    path = _with_shoff(lib, tmp_path / "liba.so", bogus)
    assert _loads(path)
    with _opened(path) as elf:
        assert elf.shdrs == []  # not taken for a section header table
    _, shentsize, shnum = _shoff(path.read_bytes())
    before = path.read_bytes()
    size = len(before)
    res = apply_edit(path, ElfEdit(runpath=LONG), patcher=patcher)
    assert res.method == "append"
    after = path.read_bytes()
    end = min(bogus + shnum * shentsize, size)
    assert after[bogus:end] == before[bogus:end]
    assert _loads(path)


class _opened:
    def __init__(self, path: Path) -> None:
        self.elf = open_raw(str(path))

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self.elf

    def __exit__(self, *exc: object) -> None:
        import os
        os.close(self.elf.fd)


def test_true_table_is_still_used(lib: Path) -> None:
    with _opened(lib) as elf:
        assert len(elf.shdrs) == _shoff(lib.read_bytes())[2]
