"""The tar header reader (cudasplit/_tarheaders.py) against tarfile, and its hostile-input caps.

tarfile writes the archives (ustar, GNU and pax formats, long names, links, non-ASCII names);
the reader must list the same members with the same sizes and data. Linear-time claims are
checked against a deadline on inputs that make CPython 3.11.7's tarfile quadratic.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudasplit import SplitOptions, split_to_dir
from cudasplit._source import (
    DIRECTORY,
    HARDLINK,
    REGULAR,
    SYMLINK,
    Limits,
    TarFormatError,
    TarReader,
    open_source,
    parse_pax,
)
from cudasplit.errors import LimitExceededError, UnsafeMemberError
from tests.support.hostile import (
    deep_tree,
    ext_header,
    member_after,
    pax_record,
    raw_tar,
    remove_deep,
)

_KIND = {tarfile.REGTYPE: REGULAR, tarfile.DIRTYPE: DIRECTORY, tarfile.SYMTYPE: SYMLINK,
         tarfile.LNKTYPE: HARDLINK}
_name_part = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x2FF,
                                   exclude_characters="/"), min_size=1, max_size=60)
_member = st.tuples(
    st.sampled_from(list(_KIND)),
    st.lists(_name_part, min_size=1, max_size=6).map("/".join),
    st.binary(max_size=1500),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=150),
    st.integers(0, 0o7777),
)


def _write(members: list[tuple[bytes, str, bytes, str, int]], fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as archive:
        for kind, name, data, link, mode in members:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, 1700000000
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = link
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                archive.addfile(info)
    return buf.getvalue()


def _read_all(data: bytes) -> list[tuple[str, str, bytes, int, int, bytes]]:
    charged: list[int] = []
    reader = TarReader(io.BytesIO(data), charged.append)  # type: ignore[arg-type]
    out = []
    while (header := reader.next()) is not None:
        body = reader.data(header.size).read() if header.type == REGULAR else b""
        out.append((header.name, header.linkname, header.type, header.mode, header.mtime, body))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(_member, max_size=8),
       st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
def test_reader_lists_what_tarfile_wrote(members: list[tuple[bytes, str, bytes, str, int]],
                                         fmt: int) -> None:
    try:
        data = _write(members, fmt)
    except ValueError:  # ustar cannot hold every name; nothing to compare then
        return
    expected = []
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for info in archive:
            body = archive.extractfile(info).read() if info.isreg() else b""  # type: ignore[union-attr]
            link = info.linkname if (info.issym() or info.islnk()) else ""
            expected.append((info.name, link, _KIND[info.type], info.mode, info.mtime, body))
    got = [(n, link if kind in (SYMLINK, HARDLINK) else "", kind, mode, mtime, body)
           for n, link, kind, mode, mtime, body in _read_all(data)]
    assert got == expected


def test_reader_skips_unread_member_data() -> None:
    data = _write([(tarfile.REGTYPE, "a", b"x" * 5000, "", 0o644),
                   (tarfile.REGTYPE, "b", b"y" * 10, "", 0o644)], tarfile.GNU_FORMAT)
    reader = TarReader(io.BytesIO(data), lambda n: None)  # type: ignore[arg-type]
    first = reader.next()
    assert first is not None and first.name == "a"
    assert reader.data(first.size).read(7) == b"xxxxxxx"
    second = reader.next()
    assert second is not None and second.name == "b"
    assert reader.data(second.size).read() == b"y" * 10
    assert reader.next() is None


def test_extended_headers_are_charged_before_they_are_read() -> None:
    record = pax_record("comment", b"c" * 3000)
    data = raw_tar(ext_header(b"x", record), member_after())

    def refuse(size: int) -> None:
        raise LimitExceededError(f"charged {size}")

    reader = TarReader(io.BytesIO(data), refuse)  # type: ignore[arg-type]
    reader.next()  # the top dir
    with pytest.raises(LimitExceededError, match=f"charged {len(record)}"):
        reader.next()


@pytest.mark.parametrize("buf", [
    b"1" * 1_000_000,                                    # CVE-2024-6232's digits
    b"9" * 11 + b" " + b"1" * 1_000_000,                 # a length field, then digits
    pax_record("comment", b"1" * 1_000_000),             # a valid record of digits
    pax_record("a", b"b") * 50_000,                      # many small records
])
def test_pax_parser_is_linear(buf: bytes) -> None:
    start = time.perf_counter()
    with contextlib.suppress(TarFormatError):
        parse_pax(buf)
    assert time.perf_counter() - start < 1.0


def test_pax_parser_reads_records() -> None:
    buf = pax_record("path", "dir/é".encode()) + pax_record("size", b"12") + b"\0" * 40
    assert parse_pax(buf) == {"path": "dir/é".encode(), "size": b"12"}


@pytest.mark.parametrize("buf", [b"5 a=b\n", b"6 ab\n\n", b"x path=a\n", b"100 a=b\n",
                                 b"0 =\n", b"6 a=b\n\0z"])
def test_pax_parser_refuses_bogus_records(buf: bytes) -> None:
    with pytest.raises(TarFormatError):
        parse_pax(buf)


# -- directory sources (issue 15, item 9) -------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 1500])
def test_directory_source_refuses_deep_trees(tmp_path: Path, depth: int) -> None:
    top = deep_tree(tmp_path, depth)
    try:
        with pytest.raises(UnsafeMemberError, match="too deep"):
            split_to_dir(top, tmp_path / "out", SplitOptions(jobs=1))
        assert not (tmp_path / "out").exists()
    finally:
        remove_deep(top)


def test_directory_source_refuses_long_paths(tmp_path: Path) -> None:
    top = tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive"
    deep = top / "/".join(["n" * 200] * 6)
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"x")
    with pytest.raises(UnsafeMemberError, match="too long"):
        list(open_source(top).members())


def test_directory_source_refuses_long_link_targets(tmp_path: Path) -> None:
    top = tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive"
    (top / "lib").mkdir(parents=True)
    (top / "lib" / "l.so").symlink_to("x/" * 1000 + "a.so")
    with pytest.raises(UnsafeMemberError, match="link target too long"):
        list(open_source(top).members())


def test_directory_source_counts_members(tmp_path: Path) -> None:
    top = tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive"
    (top / "share").mkdir(parents=True)
    for i in range(20):
        (top / "share" / f"e{i}").write_bytes(b"")
    assert len(list(open_source(top, limits=Limits(max_members=21)).members())) == 21
    with pytest.raises(LimitExceededError, match="raise max_members"):
        list(open_source(top, limits=Limits(max_members=20)).members())


def test_directory_source_refuses_a_huge_listing_while_reading_it(tmp_path: Path) -> None:
    top = tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive"
    (top / "share").mkdir(parents=True)
    for i in range(50):
        (top / "share" / f"e{i}").write_bytes(b"")
    with pytest.raises(LimitExceededError, match="member 'share': more than 10 members"):
        list(open_source(top, limits=Limits(max_members=10)).members())


def test_directory_walk_order_is_sorted_preorder(tmp_path: Path) -> None:
    top = tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive"
    for rel in ["b/z", "a/y/x", "c"]:
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_bytes(b"")
    paths = [m.path for m, _ in open_source(top).members()]
    assert paths == ["a", "a/y", "a/y/x", "b", "b/z", "c"]


# -- mutated archives -----------------------------------------------------------------------------

_SEED = _write([(tarfile.REGTYPE, "top/lib/" + "n" * 120 + ".so", b"\x7fELF" + b"e" * 900, "", 0o755),
                (tarfile.SYMTYPE, "top/lib/link.so", b"", "n" * 120 + ".so", 0o777),
                (tarfile.LNKTYPE, "top/lib/hard.so", b"", "top/lib/" + "n" * 120 + ".so", 0o644),
                (tarfile.DIRTYPE, "top/include", b"", "", 0o755),
                (tarfile.REGTYPE, "top/include/ü.h", b"#pragma once\n" * 50, "", 0o644)],
               tarfile.PAX_FORMAT)
_SEED_GNU = _write([(tarfile.REGTYPE, "top/" + "g" * 150, b"data" * 300, "", 0o644),
                    (tarfile.SYMTYPE, "top/l", b"", "x" * 140, 0o777)], tarfile.GNU_FORMAT)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([_SEED, _SEED_GNU]),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8),
       st.integers(0, 20_000))
def test_mutated_archives_raise_only_tar_format_errors(seed: bytes,
                                                       flips: list[tuple[int, int]],
                                                       cut: int) -> None:
    data = bytearray(seed)
    for position, value in flips:
        data[position % len(data)] = value
    charged: list[int] = []
    reader = TarReader(io.BytesIO(bytes(data[:cut] if cut < len(data) else data)),  # type: ignore[arg-type]
                       charged.append)
    start = time.perf_counter()
    with contextlib.suppress(TarFormatError):
        while (header := reader.next()) is not None:
            if header.type == REGULAR:
                stream = reader.data(header.size)
                while stream.read(1 << 16):
                    pass
    assert time.perf_counter() - start < 1.0
    assert all(0 <= size <= 1 << 20 for size in charged)
