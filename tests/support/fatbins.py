"""Fatbinaries, ELF objects holding them, and ``ar`` archives, written byte by byte for tests.

The layout is the one NVIDIA's tools write (``cudasplit/_elf/read/fatbin.py`` documents it);
payloads are opaque bytes here (a test checks headers, never GPU code). ``elf_with_sections``
writes a minimal ELF64 relocatable file (header, sections, ``.shstrtab``, section header
table) that ``readelf -S`` and ``objcopy`` accept; ``ar_archive`` a GNU ``ar`` archive with a
long-name table when a name needs it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = 0xBA55ED50
KIND = {"ptx": 1, "sass": 2, "ltoir": 8}
FLAGS_BASE = 0x11               # 64-bit, Linux host
ZSTD, LZ, ARCH_A, FAMILY_F = 0x8000, 0x2000, 0x100000, 0x200000


@dataclass(frozen=True)
class Entry:
    kind: str = "sass"
    arch: int = 80
    suffix: str = ""             # "", "a" or "f"
    payload: bytes = b"\x7fELF" + b"\0" * 60
    compressed: bool = False
    unpacked: int = 0            # the uncompressed size written for a compressed entry
    extra_header: int = 0        # bytes of extended header after the 64 base bytes

    def flags(self) -> int:
        return (FLAGS_BASE | (ZSTD if self.compressed else 0)
                | (ARCH_A if self.suffix == "a" else FAMILY_F if self.suffix == "f" else 0))


def entry_bytes(entry: Entry) -> bytes:
    padded = entry.payload + b"\0" * (-len(entry.payload) % 8)
    header = 64 + entry.extra_header
    raw = struct.pack("<HHIQIIHHIIIQQQ", KIND.get(entry.kind, 4), 0x0101, header, len(padded),
                      len(entry.payload) if entry.compressed else 0, 0, 0, 1, entry.arch, 0, 0,
                      entry.flags(), 0, entry.unpacked if entry.compressed else 0)
    return raw + b"\0" * entry.extra_header + padded


def container(*entries: Entry) -> bytes:
    body = b"".join(entry_bytes(e) for e in entries)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


def elf_with_sections(sections: dict[str, bytes], *, e_type: int = 1) -> bytes:
    """An ELF64 little-endian x86-64 file with these PROGBITS sections (8-byte aligned)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body, placed, offset = bytearray(), [], 64
    for name, data in [*sections.items(), (".shstrtab", names)]:
        pad = -offset % 8
        body += b"\0" * pad
        offset += pad
        placed.append((names.index(name.encode() + b"\0"), offset, len(data), name))
        body += data
        offset += len(data)
    body += b"\0" * (-offset % 8)
    shoff = 64 + len(body)
    shdrs = [b"\0" * 64]
    for name_off, off, size, name in placed:
        sh_type = 3 if name == ".shstrtab" else 1
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_off, sh_type, 2 if sh_type == 1 else 0,
                                 0, off, size, 0, 0, 8 if sh_type == 1 else 1, 0))
    header = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                         e_type, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(shdrs), len(shdrs) - 1)
    return header + bytes(body) + b"".join(shdrs)


def fatbin_object(*containers: bytes, section: str = ".nv_fatbin") -> bytes:
    return elf_with_sections({".text": b"\xc3", section: b"".join(containers)})


def ar_archive(members: dict[str, bytes]) -> bytes:
    """A GNU ``ar`` archive (names over 15 bytes go through the ``//`` table)."""
    long_names = b""
    out = bytearray(b"!<arch>\n")
    headers = []
    for name, data in members.items():
        raw = name.encode()
        if len(raw) > 15:
            field = f"/{len(long_names)}".encode()
            long_names += raw + b"/\n"
        else:
            field = raw + b"/"
        headers.append((field, data))
    if long_names:
        out += _ar_header(b"//", len(long_names)) + long_names + b"\n" * (len(long_names) & 1)
    for field, data in headers:
        out += _ar_header(field, len(data)) + data + b"\n" * (len(data) & 1)
    return bytes(out)


def _ar_header(name: bytes, size: int) -> bytes:
    return (name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
            + str(size).encode().ljust(10) + b"`\n")
