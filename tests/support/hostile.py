"""A catalog of hostile archives, built in code, each with the outcome cudasplit must produce.

Every case is a function of a :class:`Ctx` (where the canary file and an outside directory
lie, so the archive can aim at them) that returns the archive's bytes, plus the expected
outcome: :class:`Refuse` (the whole archive is rejected with that error class; nothing is
left in the output directory) or :class:`Accept` (the split completes; the named problem or
warning codes are reported and ``check`` passes on the output directory).

``tests/tarutil.py`` writes well-formed archives; this module also writes the malformed ones
(raw headers, bad checksums, truncation, pax records tarfile would never produce).
"""

from __future__ import annotations

import io
import lzma
import os
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from cudasplit import Report
from cudasplit.errors import (
    CorruptArchiveError,
    CudasplitError,
    LimitExceededError,
    OutputError,
    SourceError,
    UnsafeMemberError,
)
from tests.support.tarutil import TOP, compress

BLOCK = 512
ELF64_DYN = (b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00\x3e\x00\x01\0\0\0"
             + b"\0" * 8)  # e_ident + e_type=ET_DYN + e_machine=x86_64 + e_version + e_entry


@dataclass(frozen=True)
class Ctx:
    canary: Path    # a file next to the output directory that must stay untouched
    outside: Path   # a directory next to the output directory that must stay empty

    @property
    def climb(self) -> str:
        """A relative path that reaches the canary from any directory of the output tree."""
        return "../" * 40 + str(self.canary).lstrip("/")


@dataclass(frozen=True)
class Refuse:
    error: type[CudasplitError]
    fragment: str = ""              # must appear in the one-line message


Check = Callable[[Path, Report], None]


@dataclass(frozen=True)
class Accept:
    codes: tuple[str, ...] = ()     # problem/warning codes that must be reported
    check: Check | None = None      # (output dir, report) -> assertions


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Ctx], bytes]
    expect: Refuse | Accept
    options: dict[str, Any] = field(default_factory=dict)  # SplitOptions overrides
    suffix: str = ".tar"

    def write(self, directory: Path, ctx: Ctx) -> Path:
        path = directory / f"{TOP}{self.suffix}"
        path.write_bytes(self.build(ctx))
        return path


# -- writing tar members -----------------------------------------------------------------------


@dataclass
class M:
    """One member as raw as tarfile lets us write it; ``name`` gets the top dir unless raw."""

    name: str
    type: bytes = tarfile.REGTYPE
    data: bytes = b""
    link: str = ""
    mode: int = 0o644
    pax: dict[str, str] | None = None
    raw: bool = False
    size: int | None = None         # declared size, when it should lie


def F(name: str, data: bytes = b"x", mode: int = 0o644) -> M:
    return M(name, data=data, mode=0o755 if data.startswith(b"\x7fELF") else mode)


def D(name: str) -> M:
    return M(name, tarfile.DIRTYPE, mode=0o755)


def S(name: str, target: str) -> M:
    return M(name, tarfile.SYMTYPE, link=target, mode=0o777)


def H(name: str, target: str, *, raw_target: bool = False) -> M:
    return M(name, tarfile.LNKTYPE, link=target if raw_target else f"{TOP}/{target}")


def tar(*members: M, top: bool = True, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    buf = io.BytesIO()
    archive = tarfile.open(fileobj=buf, mode="w", format=fmt)  # noqa: SIM115 - closed below
    if top:
        info = tarfile.TarInfo(TOP)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        archive.addfile(info)
    for m in members:
        info = tarfile.TarInfo(m.name if m.raw else f"{TOP}/{m.name}")
        info.type, info.mode, info.linkname, info.mtime = m.type, m.mode, m.link, 1700000000
        info.size = len(m.data) if m.type == tarfile.REGTYPE else 0
        if m.pax:
            info.pax_headers = dict(m.pax)
        archive.addfile(info, io.BytesIO(m.data) if m.type == tarfile.REGTYPE else None)
    archive.close()
    return buf.getvalue()


def headers(data: bytes) -> list[int]:
    """Offsets of the member headers of an uncompressed tar (walks the size fields)."""
    offsets, pos = [], 0
    while pos + BLOCK <= len(data) and data[pos:pos + BLOCK] != b"\0" * BLOCK:
        offsets.append(pos)
        size = int(data[pos + 124:pos + 136].rstrip(b"\0 ") or b"0", 8)
        pos += BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK
    return offsets


def bad_checksum(data: bytes, index: int) -> bytes:
    pos = headers(data)[index]
    out = bytearray(data)
    out[pos + 148:pos + 156] = b"0000001\0"
    return bytes(out)


def set_size(data: bytes, index: int, size: int) -> bytes:
    """Rewrite a header's size field (fixing the checksum) so the member lies about its size."""
    pos = headers(data)[index]
    out = bytearray(data)
    out[pos + 124:pos + 136] = b"%011o\0" % size
    out[pos + 148:pos + 156] = b" " * 8
    out[pos + 148:pos + 156] = b"%06o\0 " % sum(out[pos:pos + BLOCK])
    return bytes(out)


def raw_header(name: bytes, typeflag: bytes = b"0", size: int = 0, link: bytes = b"") -> bytes:
    """A ustar header with arbitrary name bytes (tarfile would refuse or re-encode some)."""
    h = bytearray(BLOCK)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"%011o\0" % 1700000000
    h[156:157] = typeflag
    h[157:157 + len(link)] = link
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def raw_tar(*blocks: bytes) -> bytes:
    """Top-dir header + the given raw blocks + the end-of-archive marker."""
    top = raw_header(TOP.encode() + b"/", b"5")
    return top + b"".join(blocks) + b"\0" * (2 * BLOCK)


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % BLOCK)


# -- checks ------------------------------------------------------------------------------------


def files_in(out: Path) -> dict[str, Path]:
    """Every non-directory entry of the finished outputs, by relative path."""
    return {str(p.relative_to(out)): p for p in out.rglob("*") if not p.is_dir() or p.is_symlink()}


def no_entry(*rels: str) -> Check:
    def check(out: Path, report: Report) -> None:
        for rel in rels:
            assert not any(k.endswith(rel) for k in files_in(out)), rel
    return check


def content(rel: str, data: bytes) -> Check:
    def check(out: Path, report: Report) -> None:
        path = out / rel
        assert path.is_file() and not path.is_symlink(), rel
        assert path.read_bytes() == data, rel
    return check


def mode(rel: str, expected: int) -> Check:
    def check(out: Path, report: Report) -> None:
        assert (out / rel).stat().st_mode & 0o7777 == expected, oct((out / rel).stat().st_mode)
    return check


def every(*checks: Check) -> Check:
    def check(out: Path, report: Report) -> None:
        for c in checks:
            c(out, report)
    return check


def elf_left_alone(rel: str, data: bytes) -> Check:
    def check(out: Path, report: Report) -> None:
        content(rel, data)(out, report)
        record = report.member(rel.split("/", 1)[1])
        assert record.patch == "skipped", record
    return check


# -- compressed cases --------------------------------------------------------------------------

SMALL = tar(F("lib/libdemo.so.1", b"demo" * 3000), F("include/demo.h", b"#pragma once\n" * 500))


def xz_truncated(_: Ctx) -> bytes:
    data = lzma.compress(SMALL)
    return data[: len(data) // 2]


def xz_trailing_garbage(_: Ctx) -> bytes:
    return lzma.compress(SMALL) + b"GARBAGE!"


def xz_bitflip(_: Ctx) -> bytes:
    data = bytearray(lzma.compress(SMALL))
    data[len(data) // 2] ^= 0x40
    return bytes(data)


def zst_truncated(_: Ctx) -> bytes:
    data = zstandard.ZstdCompressor().compress(SMALL)
    return data[: len(data) - 7]


def gz_truncated(_: Ctx) -> bytes:
    data = compress(SMALL, "gz")
    return data[: len(data) * 2 // 3]


def zst_bomb(_: Ctx) -> bytes:
    """32 MiB of zeros compress to a few KiB."""
    return zstandard.ZstdCompressor().compress(tar(F("share/zeros.bin", b"\0" * (32 << 20))))


def sparse_bomb(_: Ctx) -> bytes:
    """A GNU sparse (pax 0.1) member that claims 1 TiB from 512 bytes of data."""
    member = M("lib/sparse.bin", data=b"s" * BLOCK, pax={
        "GNU.sparse.map": "0,512", "GNU.sparse.size": str(1 << 40),
        "GNU.sparse.numblocks": "1"}, type=tarfile.REGTYPE)
    return tar(member, fmt=tarfile.PAX_FORMAT)


def hardlink_bomb(_: Ctx) -> bytes:
    links = [H(f"bin/copy{i}", "lib/big.bin") for i in range(40)]
    return tar(F("lib/big.bin", b"\1" * (1 << 20)), *links)


# -- header bombs (issue 15, item 2) -------------------------------------------------------------


def pax_record(key: str, value: bytes) -> bytes:
    """One well-formed pax record: the length field counts itself."""
    body = b" " + key.encode() + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def ext_header(typeflag: bytes, data: bytes, declared: int | None = None) -> bytes:
    """An extended header ('x', 'g', 'L', 'K') with its data, declaring any size we like."""
    size = len(data) if declared is None else declared
    return raw_header(b"././@PaxHeader" if typeflag in b"xg" else b"././@LongLink", typeflag,
                      size) + padded(data)


def member_after(name: str = "lib/a.so", data: bytes = b"a") -> bytes:
    return raw_header(f"{TOP}/{name}".encode(), b"0", len(data)) + padded(data)


def pax_bomb(size: int) -> Callable[[Ctx], bytes]:
    """A pax header of ``size`` bytes (one long path record) before an ordinary member;
    compresses to almost nothing."""
    def build(_: Ctx) -> bytes:
        record = pax_record("comment", b"a" * (size - 20))
        record = pax_record("comment", b"a" * (size - 20 - (len(record) - size)))
        return zstandard.ZstdCompressor(level=19).compress(
            raw_tar(ext_header(b"x", record), member_after()))
    return build


def pax_digits(_: Ctx) -> bytes:
    """CVE-2024-6232: a pax header of digits makes CPython 3.11.7's regex quadratic (22 s for
    300 bytes of .tar.xz in tarfile)."""
    return lzma.compress(raw_tar(ext_header(b"x", b"1" * 500_000), member_after()))


def pax_digits_in_value(_: Ctx) -> bytes:
    """Well-formed records whose value is a long digit run (the other quadratic pattern)."""
    return lzma.compress(raw_tar(
        ext_header(b"x", pax_record("comment", b"7" * 500_000)), member_after()))


def longname_bomb(_: Ctx) -> bytes:
    """A GNU long name of 8 GiB declared (tarfile would try to read it whole)."""
    return zstandard.ZstdCompressor().compress(
        raw_header(b"././@LongLink", b"L", 8 << 30) + b"a" * (1 << 20))


def negative_size(_: Ctx) -> bytes:
    """A base-256 size field of -1: tarfile would read the rest of the stream as data."""
    header = bytearray(raw_header(f"{TOP}/lib/n.so".encode(), b"0", 0))
    header[124:136] = b"\xff" * 12
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return raw_tar(bytes(header), member_after())


def garbage_size(_: Ctx) -> bytes:
    header = bytearray(raw_header(f"{TOP}/lib/g.so".encode(), b"0", 0))
    header[124:136] = b"12x45\0      "
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return raw_tar(bytes(header))


def many_members(count: int) -> Callable[[Ctx], bytes]:
    def build(_: Ctx) -> bytes:
        return raw_tar(*(member_after(f"share/e{i}", b"") for i in range(count)))
    return build


def old_gnu_sparse(_: Ctx) -> bytes:
    header = bytearray(raw_header(f"{TOP}/lib/sp.bin".encode(), b"S", BLOCK))
    header[257:265] = b"ustar  \0"
    header[483:495] = b"%011o\0" % (1 << 33)       # realsize: 8 GiB
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return raw_tar(bytes(header) + b"s" * BLOCK)


# -- deep directory trees (issue 15, item 9) ----------------------------------------------------


def deep_tree(root: Path, depth: int) -> Path:
    """``depth`` nested directories, created relative to a moving cwd-free fd (paths this
    long exceed PATH_MAX)."""
    top = root / "cuda_demo-linux-x86_64-12.9.79-archive"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            new = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return top


def remove_deep(top: Path) -> None:
    """Take the chain apart one level at a time, lifting the rest up (shutil.rmtree, and so
    pytest's cleanup, recurses once per level)."""
    while (top / "d").exists():
        level = top / "d"
        if (level / "d").exists():
            os.rename(level / "d", top / "rest")
        for leftover in level.iterdir():
            leftover.unlink()
        level.rmdir()
        if (top / "rest").exists():
            os.rename(top / "rest", top / "d")


# -- the catalog -------------------------------------------------------------------------------


def _elf(body: bytes) -> bytes:
    return ELF64_DYN + body


def _phdr_elf(phoff: int, phnum: int, phentsize: int = 56, size: int = 256) -> bytes:
    """An ELF64 header whose program header table is wherever and however large we say."""
    head = bytearray(ELF64_DYN.ljust(64, b"\0"))
    head[32:40] = phoff.to_bytes(8, "little")
    head[52:54] = (64).to_bytes(2, "little")
    head[54:56] = phentsize.to_bytes(2, "little")
    head[56:58] = phnum.to_bytes(2, "little")
    return bytes(head).ljust(size, b"\0")


def _overlapping_elf() -> bytes:
    """PT_DYNAMIC that overlaps the program header table and points at itself."""
    data = bytearray(_phdr_elf(64, 2, size=512))
    for i, (ptype, off) in enumerate(((1, 0), (2, 64))):  # PT_LOAD at 0, PT_DYNAMIC at 64
        base = 64 + i * 56
        data[base:base + 4] = ptype.to_bytes(4, "little")
        data[base + 8:base + 16] = off.to_bytes(8, "little")    # p_offset
        data[base + 16:base + 24] = off.to_bytes(8, "little")   # p_vaddr
        data[base + 32:base + 40] = (1 << 40).to_bytes(8, "little")  # p_filesz: huge
        data[base + 40:base + 48] = (1 << 40).to_bytes(8, "little")
    return bytes(data)


TRUNCATED_ELF = _elf(b"\0" * 8)
BOGUS_PHOFF_ELF = _phdr_elf(1 << 60, 4)
HUGE_PHNUM_ELF = _phdr_elf(64, 0xFFFF)
OVERLAPPING_ELF = _overlapping_elf()
LIB = "lib/lib"  # the lib output's root holds lib/...


# Issue 24: an escaping symlink fails the run unless skipped
# (tests/security/test_hostile_archive_data_and_escaping_links.py checks the refusal); these
# cases check what skipping leaves.
SKIP_UNSAFE: dict[str, Any] = {"skip_unsafe_members": True}


def catalog() -> list[Case]:
    return [
        # --- paths -------------------------------------------------------------------------
        Case("dotdot-top-level", lambda x: tar(F("../escaped", b"x"), top=False),
             Refuse(UnsafeMemberError, "'..'")),
        Case("dotdot-climbs-to-canary", lambda x: tar(F(x.climb, b"pwned"), top=False),
             Refuse(UnsafeMemberError, "'..'")),
        Case("dotdot-inside-top", lambda x: tar(F("lib/../../escaped", b"x")),
             Refuse(UnsafeMemberError, "'..'")),
        Case("absolute-path-to-canary", lambda x: tar(M(str(x.canary), data=b"pwned", raw=True),
                                                      top=False),
             Refuse(UnsafeMemberError, "absolute")),
        Case("member-outside-top-dir", lambda x: tar(F("lib/a.so", b"x"),
                                                     M("other-dir/b", data=b"y", raw=True)),
             Refuse(SourceError, "outside the top directory")),
        Case("name-with-newline", lambda x: tar(F("lib/evil\nname.so", b"x")),
             Refuse(UnsafeMemberError, "control character")),
        Case("name-invalid-utf8", lambda x: raw_tar(
            raw_header(TOP.encode() + b"/lib/\xff\xfe.so", size=1) + padded(b"x")),
             Refuse(UnsafeMemberError, "UTF-8")),
        Case("name-nul-via-pax", lambda x: tar(
            M("lib/placeholder", data=b"x", pax={"path": f"{TOP}/lib/a\x00../../b"}),
            fmt=tarfile.PAX_FORMAT),
             Refuse(UnsafeMemberError, "NUL")),
        Case("component-too-long", lambda x: tar(F("lib/" + "n" * 300, b"x")),
             Refuse(UnsafeMemberError, "too long")),
        Case("deep-nesting", lambda x: tar(F("d/" * 3000 + "f", b"x")),
             Refuse(UnsafeMemberError, "too deep")),
        # --- special files and modes -------------------------------------------------------
        Case("char-device", lambda x: tar(M("lib/null", tarfile.CHRTYPE)),
             Refuse(UnsafeMemberError, "special file")),
        Case("block-device", lambda x: tar(M("lib/sda", tarfile.BLKTYPE)),
             Refuse(UnsafeMemberError, "special file")),
        Case("fifo", lambda x: tar(M("lib/pipe", tarfile.FIFOTYPE)),
             Refuse(UnsafeMemberError, "special file")),
        Case("setuid-setgid-sticky-bits", lambda x: tar(F("bin/tool", b"#!/bin/sh\n", 0o7777),
                                                        F("include/w.h", b"x", 0o666)),
             Accept(check=every(mode("bin/bin/tool", 0o755), mode("include/include/w.h", 0o644)))),
        # --- symlinks ----------------------------------------------------------------------
        Case("symlink-absolute-to-canary", lambda x: tar(F("lib/libz.so.1", b"z"),
                                                         S("lib/libz.so", str(x.canary))),
             Accept(("unsafe-symlink",), no_entry("libz.so")), options=SKIP_UNSAFE),
        Case("symlink-relative-climbs-to-canary", lambda x: tar(F("lib/libz.so.1", b"z"),
                                                                S("lib/libz.so", x.climb)),
             Accept(("unsafe-symlink",), no_entry("libz.so")), options=SKIP_UNSAFE),
        Case("file-through-escaping-dir-symlink", lambda x: tar(
            S("lib/sub", str(x.outside)), F("lib/sub/pwned.so", b"pwned")),
             Accept(("unsafe-symlink",), content(f"{LIB}/sub/pwned.so", b"pwned")),
             options=SKIP_UNSAFE),
        Case("file-through-in-archive-dir-symlink", lambda x: tar(
            F("include/a.h", b"a"), S("lib/sub", "../include"), F("lib/sub/b.so", b"b")),
             Accept(("duplicate-member",), content(f"{LIB}/sub/b.so", b"b"))),
        Case("symlink-through-kernel-climbing-chain", lambda x: tar(
            F("zzz/a/b/f", b"f"), F("x", b"x"),
            S("zzz/a/b/up", "../.."),
            S("zzz/a/b/esc", "up/../../../.."),     # lexically the root, for the kernel 2 above
            S("zzz/a/b/esc/canary", "x"),            # would replace <tmp>/canary
            S("zzz/a/b/esc/outside/new", "x")),
             Accept(("under-symlink",))),
        Case("symlink-loop", lambda x: tar(F("lib/real.so", b"r"), S("lib/a.so", "b.so"),
                                           S("lib/b.so", "a.so")),
             Accept(("dangling-symlink",), no_entry("a.so", "b.so"))),
        Case("symlink-target-with-nul-via-pax", lambda x: tar(
            F("lib/a.so", b"a"),
            M("lib/l.so", tarfile.SYMTYPE, link="a.so", pax={"linkpath": "a.so\x00/etc"})
            , fmt=tarfile.PAX_FORMAT),
             Refuse(UnsafeMemberError, "NUL")),
        Case("symlink-target-huge", lambda x: tar(F("lib/a.so", b"a"),
                                                  S("lib/l.so", "x/" * 5000 + "a.so")),
             Refuse(UnsafeMemberError, "too long")),
        # --- duplicates --------------------------------------------------------------------
        Case("file-then-symlink-same-name", lambda x: tar(
            F("lib/libq.so", b"real"), F("lib/libr.so", b"other"), S("lib/libq.so", "libr.so")),
             Accept(("duplicate-member",), content(f"{LIB}/libq.so", b"real"))),
        Case("symlink-then-file-same-name", lambda x: tar(
            S("lib/libq.so", str(x.canary)), F("lib/libq.so", b"real")),
             Accept(("unsafe-symlink",), content(f"{LIB}/libq.so", b"real")),
             options=SKIP_UNSAFE),
        Case("file-then-file-same-name", lambda x: tar(
            F("lib/libq.so", b"first"), F("lib/libq.so", b"second")),
             Accept(check=content(f"{LIB}/libq.so", b"second"))),
        Case("file-then-dir-content-same-name", lambda x: tar(
            F("lib/d", b"file"), F("lib/d/inner.so", b"inner")),
             Refuse(OutputError, "earlier member")),
        Case("dir-content-then-file-same-name", lambda x: tar(
            F("lib/d/inner.so", b"inner"), F("lib/d", b"file")),
             Refuse(OutputError, "earlier member")),
        # --- hard links --------------------------------------------------------------------
        Case("hardlink-absolute-to-canary", lambda x: tar(
            H("lib/h.so", str(x.canary), raw_target=True)),
             Refuse(UnsafeMemberError, "absolute")),
        Case("hardlink-climbs-to-canary", lambda x: tar(
            H("lib/h.so", x.climb, raw_target=True)),
             Refuse(UnsafeMemberError, "'..'")),
        Case("hardlink-to-member-not-yet-seen", lambda x: tar(
            H("lib/h.so", "lib/later.so"), F("lib/later.so", b"later")),
             Accept(("dangling-hardlink",), no_entry("h.so"))),
        Case("hardlink-to-symlink", lambda x: tar(
            S("lib/s.so", str(x.canary)), H("lib/h.so", "lib/s.so")),
             Accept(("dangling-hardlink",), no_entry("h.so")), options=SKIP_UNSAFE),
        Case("hardlink-to-itself", lambda x: tar(H("lib/h.so", "lib/h.so")),
             Accept(("dangling-hardlink",), no_entry("h.so"))),
        Case("hardlink-to-directory", lambda x: tar(D("lib/d"), F("lib/d/a.so", b"a"),
                                                    H("lib/h.so", "lib/d")),
             Accept(("dangling-hardlink",), no_entry("h.so"))),
        # --- tar structure -----------------------------------------------------------------
        Case("empty-file", lambda x: b"", Refuse(SourceError, "empty")),
        Case("wrong-magic", lambda x: b"PK\x03\x04" + b"\0" * 600, Refuse(SourceError, "magic")),
        Case("bad-checksum-first-header", lambda x: bad_checksum(SMALL, 0),
             Refuse(CorruptArchiveError, "before the first member")),
        Case("bad-checksum-later-header", lambda x: bad_checksum(SMALL, 2),
             Refuse(CorruptArchiveError, "libdemo.so.1")),
        Case("size-runs-past-end", lambda x: set_size(SMALL, 2, 1 << 20)[:-2 * BLOCK],
             Refuse(CorruptArchiveError, "include/demo.h")),
        Case("truncated-at-header-boundary", lambda x: SMALL[:headers(SMALL)[2]],
             Refuse(CorruptArchiveError, "libdemo.so.1")),
        Case("truncated-mid-data", lambda x: SMALL[:headers(SMALL)[1] + 3 * BLOCK],
             Refuse(CorruptArchiveError, "libdemo.so.1")),
        Case("pax-record-bogus-length", lambda x: raw_tar(
            raw_header(b"././@PaxHeader", b"x", 20) + padded(b"99999 path=zzz\n")),
             Refuse(CorruptArchiveError)),
        Case("pax-bogus-sparse-map", lambda x: tar(M("lib/s.bin", data=b"x" * BLOCK, pax={
            "GNU.sparse.map": "zero,one", "GNU.sparse.size": "10"}), fmt=tarfile.PAX_FORMAT),
             Refuse(UnsafeMemberError, "sparse")),
        Case("pax-negative-size", lambda x: tar(
            M("lib/n.bin", data=b"x", pax={"size": "-4096"}), F("lib/after.so", b"a"),
            fmt=tarfile.PAX_FORMAT),
             Refuse(CorruptArchiveError)),
        # --- header bombs and hostile header fields (issue 15, item 2) -----------------------
        Case("pax-header-over-1MiB", pax_bomb((1 << 20) + 4096),
             Refuse(LimitExceededError, "pax extended headers"), suffix=".tar.zst"),
        Case("pax-header-counts-against-max-size", pax_bomb(900 << 10),
             Refuse(LimitExceededError, "max_total_bytes"), options={"max_total_bytes": 512 << 10},
             suffix=".tar.zst"),
        Case("pax-header-digits-cve-2024-6232", pax_digits, Refuse(CorruptArchiveError, "pax"),
             suffix=".tar.xz"),
        Case("pax-value-long-digit-run", pax_digits_in_value,
             Accept(check=content(f"{LIB}/a.so", b"a")), suffix=".tar.xz"),
        Case("pax-chain-of-empty-headers", lambda x: raw_tar(
            *[ext_header(b"x", b"")] * 40, member_after()),
             Refuse(CorruptArchiveError, "in a row")),
        Case("pax-global-header-over-cap", lambda x: raw_tar(
            *[ext_header(b"g", pax_record("comment", b"g" * 200_000))] * 6, member_after()),
             Refuse(LimitExceededError, "global pax")),
        Case("pax-record-trailing-garbage", lambda x: raw_tar(
            ext_header(b"x", pax_record("path", f"{TOP}/lib/p.so".encode()) + b"junk"),
            member_after()),
             Refuse(CorruptArchiveError, "pax record")),
        Case("pax-record-nul-then-garbage", lambda x: raw_tar(
            ext_header(b"x", pax_record("path", f"{TOP}/lib/p.so".encode()) + b"\0junk"),
            member_after()),
             Refuse(CorruptArchiveError, "garbage")),
        Case("pax-size-not-a-number", lambda x: raw_tar(
            ext_header(b"x", pax_record("size", b"1e9")), member_after()),
             Refuse(CorruptArchiveError, "not a number")),
        Case("pax-path-applies", lambda x: raw_tar(
            ext_header(b"x", pax_record("path", f"{TOP}/include/{'p' * 150}.h".encode())),
            member_after("lib/ignored.so", b"pax")),
             Accept(check=content(f"include/include/{'p' * 150}.h", b"pax"))),
        Case("gnu-longname-8GiB-declared", longname_bomb,
             Refuse(LimitExceededError, "GNU long name"), suffix=".tar.zst"),
        Case("gnu-longlink-over-64KiB", lambda x: raw_tar(
            ext_header(b"K", b"l" * (65 << 10)),
            raw_header(f"{TOP}/lib/l.so".encode(), b"2")),
             Refuse(LimitExceededError, "GNU long name")),
        Case("gnu-longname-applies", lambda x: raw_tar(
            ext_header(b"L", f"{TOP}/lib/{'n' * 200}.so\0".encode()),
            member_after("lib/short.so", b"long")),
             Accept(check=content(f"{LIB}/{'n' * 200}.so", b"long"))),
        Case("size-negative-base256", negative_size, Refuse(CorruptArchiveError, "negative")),
        Case("size-field-garbage", garbage_size, Refuse(CorruptArchiveError, "octal")),
        Case("old-gnu-sparse-8GiB", old_gnu_sparse, Refuse(LimitExceededError, "max_total_bytes"),
             options={"max_total_bytes": 1 << 30}),
        Case("old-gnu-sparse-within-limits", old_gnu_sparse, Refuse(UnsafeMemberError, "sparse"),
             options={"max_ratio": 1e12}),
        Case("unknown-member-type", lambda x: raw_tar(
            raw_header(f"{TOP}/lib/v".encode(), b"V", 0)),
             Refuse(UnsafeMemberError, "unsupported member type")),
        # --- member count (issue 15, item 8) ---------------------------------------------------
        Case("members-over-max-members", many_members(101),
             Refuse(LimitExceededError, "max_members"), options={"max_members": 100}),
        Case("members-at-max-members", many_members(99), Accept(),
             options={"max_members": 100}),
        # --- compression ---------------------------------------------------------------------
        Case("xz-truncated", xz_truncated, Refuse(CorruptArchiveError), suffix=".tar.xz"),
        Case("xz-trailing-garbage", xz_trailing_garbage, Refuse(CorruptArchiveError),
             suffix=".tar.xz"),
        Case("xz-bit-flip", xz_bitflip, Refuse(CorruptArchiveError), suffix=".tar.xz"),
        Case("zst-truncated", zst_truncated, Refuse(CorruptArchiveError), suffix=".tar.zst"),
        Case("gz-truncated", gz_truncated, Refuse(CorruptArchiveError), suffix=".tar.gz"),
        # --- decompression bombs ---------------------------------------------------------------
        Case("bomb-total-size", zst_bomb, Refuse(LimitExceededError, "max_total_bytes"),
             options={"max_total_bytes": 8 << 20}, suffix=".tar.zst"),
        Case("bomb-ratio", zst_bomb, Refuse(LimitExceededError, "max_ratio"),
             options={"max_ratio": 50.0}, suffix=".tar.zst"),
        Case("bomb-gnu-sparse", sparse_bomb, Refuse(LimitExceededError)),
        Case("bomb-hardlink-copies", hardlink_bomb, Refuse(LimitExceededError),
             options={"max_total_bytes": 8 << 20}),
        # --- corrupt ELF files: never patched, left byte-identical, reported -----------------
        Case("elf-truncated", lambda x: tar(F("lib/libt.so.1", TRUNCATED_ELF)),
             Accept(check=elf_left_alone(f"{LIB}/libt.so.1", TRUNCATED_ELF))),
        Case("elf-bogus-phoff", lambda x: tar(F("lib/libp.so.1", BOGUS_PHOFF_ELF)),
             Accept(("patch-failed",), elf_left_alone(f"{LIB}/libp.so.1", BOGUS_PHOFF_ELF))),
        Case("elf-huge-phnum", lambda x: tar(F("lib/libh.so.1", HUGE_PHNUM_ELF)),
             Accept(("patch-failed",), elf_left_alone(f"{LIB}/libh.so.1", HUGE_PHNUM_ELF))),
        Case("elf-overlapping-phdrs", lambda x: tar(F("lib/libo.so.1", OVERLAPPING_ELF)),
             Accept(("patch-failed",), elf_left_alone(f"{LIB}/libo.so.1", OVERLAPPING_ELF))),
    ]


def case_names(cases: Sequence[Case]) -> list[str]:
    return [case.name for case in cases]
