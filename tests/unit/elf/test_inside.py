"""What is inside a file: fatbinary entries, ar members, version floors and exports.

Fatbinaries, objects and archives are written byte by byte (tests/support/fatbins.py); the
version tests compile small libraries with gcc and compare with ``readelf``/``objdump``.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudasplit._elf.read import (
    GpuCode,
    fatbin_entries,
    read_exports,
    read_inside,
    version_key,
)
from tests.support.builders import compile_shared
from tests.support.fatbins import (
    Entry,
    ar_archive,
    container,
    elf_with_sections,
    entry_bytes,
    fatbin_object,
)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _archs(path: Path) -> list[tuple[str, str, str]]:
    problems: list[str] = []
    found = [(e.kind, e.arch, e.section) for _, e in fatbin_entries(path, problems)]
    assert not problems
    return found


def test_entries_in_file_order_with_suffixes_and_kinds(tmp_path: Path) -> None:
    data = fatbin_object(
        container(Entry("sass", 75), Entry("sass", 90, "a"), Entry("ptx", 120)),
        container(Entry("sass", 100, "f", extra_header=48), Entry("ltoir", 90),
                  Entry("ptx", 100, "f", extra_header=16)))
    path = _write(tmp_path, "lib.so", data)
    assert _archs(path) == [
        ("sass", "sm_75", ".nv_fatbin"), ("sass", "sm_90a", ".nv_fatbin"),
        ("ptx", "sm_120", ".nv_fatbin"), ("sass", "sm_100f", ".nv_fatbin"),
        ("ltoir", "sm_90", ".nv_fatbin"), ("ptx", "sm_100f", ".nv_fatbin")]


def test_sizes_stored_and_unpacked(tmp_path: Path) -> None:
    packed = Entry("sass", 80, payload=b"x" * 13, compressed=True, unpacked=4000)
    plain = Entry("sass", 80, payload=b"y" * 24)
    path = _write(tmp_path, "lib.so", fatbin_object(container(packed, plain)))
    inside = read_inside(path)
    assert inside is not None and not inside.problems
    # stored: 64-byte headers plus payloads padded to 8 (13 -> 16); unpacked: as declared
    assert inside.gpu == (GpuCode("sass", "sm_80", 2, 64 + 16 + 64 + 24, 4000 + 24, 1),)
    section = len(container(packed, plain))
    assert sum(g.stored for g in inside.gpu) == section - 16   # one container header


def test_relocatable_fatbin_and_both_sections(tmp_path: Path) -> None:
    obj = elf_with_sections({".nv_fatbin": container(Entry("sass", 80)),
                             "__nv_relfatbin": container(Entry("sass", 90))})
    assert [a for _, a, _ in _archs(_write(tmp_path, "x.o", obj))] == ["sm_80", "sm_90"]
    assert _archs(_write(tmp_path, "y.o", fatbin_object(container(Entry("ptx", 52)),
                                                        section="__nv_relfatbin"))) == [
        ("ptx", "sm_52", "__nv_relfatbin")]


def test_static_archive_members_are_read(tmp_path: Path) -> None:
    archive = ar_archive({
        "a.o": fatbin_object(container(Entry("sass", 75))),
        "readme.txt": b"not ELF",
        "a_very_long_member_name.o": fatbin_object(container(Entry("sass", 86)),
                                                    section="__nv_relfatbin")})
    path = _write(tmp_path, "libx_static.a", archive)
    problems: list[str] = []
    found = [(obj, e.arch) for obj, e in fatbin_entries(path, problems)]
    assert not problems
    assert found == [(f"{path}(a.o)", "sm_75"), (f"{path}(a_very_long_member_name.o)", "sm_86")]
    inside = read_inside(path)
    assert inside is not None and [g.arch for g in inside.gpu] == ["sm_75", "sm_86"]
    assert inside.floors == ()


def test_system_ar_reads_our_archives(tmp_path: Path) -> None:
    if shutil.which("ar") is None:
        pytest.skip("no ar (binutils)")
    path = _write(tmp_path, "libx.a", ar_archive({"a_very_long_member_name.o": b"x",
                                                  "b.o": b"yy"}))
    listed = subprocess.run(["ar", "t", str(path)], capture_output=True, text=True, check=True)
    assert listed.stdout.split() == ["a_very_long_member_name.o", "b.o"]


def test_not_elf_nor_archive(tmp_path: Path) -> None:
    assert read_inside(_write(tmp_path, "notes.txt", b"hello")) is None
    assert read_inside(_write(tmp_path, "lib.so", elf_with_sections({".text": b"\xc3"}))) \
        is not None


@pytest.mark.parametrize("damage, expect", [
    ("truncated-container", "past the end of the section"),
    ("bad-magic", "no fatbinary header"),
    ("entry-past-container", "past its container's end"),
    ("tiny-entry-header", "past its container's end"),
    ("cut-entry", "cut short"),
    ("trailing-garbage", "are not a fatbinary"),
])
def test_damaged_fatbins_are_problems(tmp_path: Path, damage: str, expect: str) -> None:
    good = container(Entry("sass", 80), Entry("sass", 90))
    data = bytearray(good)
    if damage == "truncated-container":
        data = data[:-8]
    elif damage == "bad-magic":
        data = container(Entry("sass", 70)) + b"\x01\x02\x03\x04" + data[4:]
    elif damage == "entry-past-container":
        struct.pack_into("<Q", data, 16 + 8, 1 << 40)          # first entry's payload size
    elif damage == "tiny-entry-header":
        struct.pack_into("<I", data, 16 + 4, 8)                 # header size below 64
    elif damage == "cut-entry":
        data = bytearray(container(Entry("sass", 80))[:16] + entry_bytes(Entry("sass", 80))[:40])
        struct.pack_into("<Q", data, 8, 40)
    elif damage == "trailing-garbage":
        data += b"\x07" * 8
    path = _write(tmp_path, "lib.so", fatbin_object(bytes(data)))
    inside = read_inside(path)
    assert inside is not None
    assert any(expect in p for p in inside.problems), inside.problems


def test_zero_padding_after_the_last_container_is_no_problem(tmp_path: Path) -> None:
    path = _write(tmp_path, "lib.so", fatbin_object(container(Entry("sass", 80)) + b"\0" * 40))
    inside = read_inside(path)
    assert inside is not None and not inside.problems and len(inside.gpu) == 1


def test_section_past_the_end_of_the_file(tmp_path: Path) -> None:
    data = bytearray(fatbin_object(container(Entry("sass", 80))))
    shoff = struct.unpack_from("<Q", data, 40)[0]
    struct.pack_into("<Q", data, shoff + 2 * 64 + 32, 1 << 30)   # .nv_fatbin's sh_size
    inside = read_inside(_write(tmp_path, "lib.so", bytes(data)))
    assert inside is not None and inside.gpu == ()


def test_many_distinct_architectures_are_capped(tmp_path: Path) -> None:
    entries = [Entry("sass", arch, payload=b"") for arch in range(600)]
    inside = read_inside(_write(tmp_path, "lib.so", fatbin_object(container(*entries))))
    assert inside is not None and len(inside.gpu) == 512
    assert any("more than 512" in p for p in inside.problems)


def test_damaged_archive_header(tmp_path: Path) -> None:
    archive = bytearray(ar_archive({"a.o": fatbin_object(container(Entry("sass", 75))),
                                    "b.o": b"zz"}))
    archive[-2 - 60 + 58:-2 - 60 + 60] = b"XX"                   # b.o's header end marker
    problems: list[str] = []
    path = _write(tmp_path, "libx.a", bytes(archive))
    assert [e.arch for _, e in fatbin_entries(path, problems)] == ["sm_75"]
    assert problems and "damaged" in problems[0]


# -- versions ---------------------------------------------------------------------------------

_SOURCE = r"""
#include <string.h>
#include <stdlib.h>
#include <math.h>
double exported_twice(double x) { return log2(x) + strtod("1", 0); }
int exported_data = 3;
static int hidden_one(void) { return 1; }
int uses_hidden(void) { return hidden_one(); }
"""


def _readelf_floors(path: Path) -> dict[str, str]:
    out = subprocess.run(["readelf", "-V", "--wide", str(path)], capture_output=True,
                         text=True, check=True).stdout
    best: dict[str, str] = {}
    for prefix, version in re.findall(r"Name: (GLIBCXX|GLIBC|CXXABI|GCC)_([\d.]+)\b", out):
        if prefix not in best or version_key(version) > version_key(best[prefix]):
            best[prefix] = version
    return best


def test_glibc_floor_equals_readelf(tmp_path: Path) -> None:
    if shutil.which("readelf") is None or shutil.which("gcc") is None:
        pytest.skip("needs gcc and readelf")
    lib = compile_shared(tmp_path, "libfloor.so", _SOURCE, extra=["-lm"])
    inside = read_inside(lib)
    assert inside is not None
    assert {n.prefix: n.version for n in inside.floors} == _readelf_floors(lib)
    glibc = next(n for n in inside.floors if n.prefix == "GLIBC")
    # the symbol is one that needs exactly that version (objdump -T shows it so)
    dump = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True).stdout
    assert re.search(rf"\(?GLIBC_{re.escape(glibc.version)}\)?\s+{glibc.symbol}\b", dump)


def test_exports_with_versions(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    script = tmp_path / "vers.map"
    script.write_text("LIBX_1.0 { global: exported_twice; local: *; };\n"
                      "LIBX_2.0 { global: exported_data; } LIBX_1.0;\n")
    lib = compile_shared(tmp_path, "libvers.so", _SOURCE,
                         extra=["-lm", f"-Wl,--version-script={script}"])
    exports = {(s.name, s.version, s.default, s.kind) for s in read_exports(lib)}
    assert ("exported_twice", "LIBX_1.0", True, "func") in exports
    assert ("exported_data", "LIBX_2.0", True, "object") in exports
    assert not any(name in ("uses_hidden", "hidden_one", "strtod") for name, *_ in exports)


def test_entries_past_the_first_window_are_read_where_they_are(tmp_path: Path) -> None:
    """Headers are read through a 64 KiB window of the section: an entry header beyond it is
    read from a new window, never unpacked from the old one's bytes."""
    big = b"\x7fELF" + bytes(range(256)) * 300           # 76,804 bytes: past one window
    fat = container(*(Entry("sass", arch, payload=big) for arch in (75, 80, 86, 89, 90)),
                    Entry("ptx", 90, payload=b"// ptx\n" * 100))
    inside = read_inside(_write(tmp_path, "libbig.so", fatbin_object(fat)))
    assert inside is not None and inside.problems == ()
    assert [(g.kind, g.arch, g.entries) for g in inside.gpu] == [
        ("sass", "sm_75", 1), ("sass", "sm_80", 1), ("sass", "sm_86", 1), ("sass", "sm_89", 1),
        ("sass", "sm_90", 1), ("ptx", "sm_90", 1)]
