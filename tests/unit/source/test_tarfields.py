"""The fields of one tar header block (cudasplit/_tarfields.py), against what tarfile writes."""

from __future__ import annotations

import io
import tarfile

import pytest

from cudasplit._source import (
    BLOCK,
    DIRECTORY,
    REGULAR,
    Extended,
    TarFormatError,
    check_checksum,
    header_from_block,
    number,
    padded_size,
)


def _block(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")[:BLOCK]


def test_header_from_a_ustar_block() -> None:
    info = tarfile.TarInfo("top/lib/libx.so.12")
    info.size, info.mode, info.mtime = 1234, 0o4755, 1700000000
    block = _block(info)
    check_checksum(block)
    header = header_from_block(block, block[156:157], number(block[124:136], "size"),
                               Extended({}))
    assert (header.name, header.type, header.size) == ("top/lib/libx.so.12", REGULAR, 1234)
    assert (header.mode, header.mtime, header.sparse_size) == (0o4755, 1700000000, None)


def test_extended_headers_override_the_block() -> None:
    info = tarfile.TarInfo("short")
    block = _block(info)
    ext = Extended({"path": b"a/much/longer/name", "size": b"99", "mtime": b"12.5"})
    header = header_from_block(block, block[156:157], 0, ext)
    assert (header.name, header.size, header.mtime) == ("a/much/longer/name", 99, 12)
    ext = Extended({}, longname=b"gnu/long/name", longlink=b"gnu/target")
    header = header_from_block(block, block[156:157], 0, ext)
    assert (header.name, header.linkname) == ("gnu/long/name", "gnu/target")


def test_v7_directory_is_named_by_its_slash() -> None:
    block = bytearray(_block(tarfile.TarInfo("old/dir/")))
    block[156:157] = b"\0"
    header = header_from_block(bytes(block), b"\0", 0, Extended({}))
    assert (header.type, header.name) == (DIRECTORY, "old/dir")


def test_sparse_member_needs_its_expanded_size() -> None:
    block = _block(tarfile.TarInfo("sparse"))
    ext = Extended({"GNU.sparse.realsize": b"4096"})
    assert header_from_block(block, block[156:157], 0, ext).sparse_size == 4096
    with pytest.raises(TarFormatError, match="expanded size"):
        header_from_block(block, block[156:157], 0, Extended({"GNU.sparse.major": b"1"}))


@pytest.mark.parametrize(("field", "value"), [
    (b"0000644\0", 0o644), (b"   17 \0", 0o17), (b"\0" * 8, 0),
    (b"\x80" + (5).to_bytes(11, "big"), 5),
])
def test_number_fields(field: bytes, value: int) -> None:
    assert number(field, "size") == value


@pytest.mark.parametrize("field", [b"12x4\0", b"\xff" * 12, b"9\0"])
def test_bad_number_fields(field: bytes) -> None:
    with pytest.raises(TarFormatError):
        number(field, "size")


def test_checksum_and_padding() -> None:
    block = bytearray(_block(tarfile.TarInfo("x")))
    check_checksum(bytes(block))
    block[0] ^= 1
    with pytest.raises(TarFormatError, match="checksum"):
        check_checksum(bytes(block))
    assert [padded_size(n) for n in (0, 1, 512, 513)] == [0, 512, 512, 1024]


def test_fields_agree_with_tarfile_on_a_whole_archive() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("d")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    block = buf.getvalue()[:BLOCK]
    assert header_from_block(block, block[156:157], 0, Extended({})).type == DIRECTORY
