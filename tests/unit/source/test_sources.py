from pathlib import Path

import pytest

from cudasplit import MemberType, PackageId
from cudasplit._source import normalise_member_path, open_source, parse_top_dir
from cudasplit.errors import CorruptArchiveError, SourceError, UnsafeMemberError
from tests.support.tarutil import TOP, tar_bytes, write_archive

ENTRIES = [
    ("dir", "lib"),
    ("file", "lib/libx.so.1.2.3", b"\x7fELF" + b"\0" * 100),
    ("symlink", "lib/libx.so.1", "libx.so.1.2.3"),
    ("hardlink", "lib/libx-copy.so", "lib/libx.so.1.2.3"),
    ("file", "LICENSE", b"license text"),
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cuda_cudart-linux-x86_64-12.9.79-archive",
         PackageId("cuda_cudart", "linux-x86_64", "12.9.79")),
        ("cudnn-linux-sbsa-9.8.0.87_cuda12-archive", PackageId("cudnn", "linux-sbsa", "9.8.0.87", "12")),
        ("nsight_systems-linux-x86_64-2025.1.3.140-archive",
         PackageId("nsight_systems", "linux-x86_64", "2025.1.3.140")),
        ("cuda_compat-linux-aarch64-12.2.0-archive",
         PackageId("cuda_compat", "linux-aarch64", "12.2.0")),
        ("libcublas-linux-ppc64le-12.2.5.6-archive",
         PackageId("libcublas", "linux-ppc64le", "12.2.5.6")),
        ("random-dir", None),
    ],
)
def test_parse_top_dir(name: str, expected: PackageId | None) -> None:
    assert parse_top_dir(name) == expected


@pytest.mark.parametrize("codec", ["xz", "gz", "bz2", "zst", "none"])
def test_every_codec_streams_the_same_members(tmp_path: Path, codec: str) -> None:
    # The file name lies on purpose: codecs are recognised by magic bytes.
    archive = write_archive(tmp_path / "archive.bin", ENTRIES, codec)
    source = open_source(archive)
    seen = [(m.path, m.type, m.link, s.read() if s else None) for m, s in source.members()]
    assert source.package == PackageId("cuda_demo", "linux-x86_64", "12.9.79")
    assert seen == [
        ("lib", MemberType.DIR, None, None),
        ("lib/libx.so.1.2.3", MemberType.FILE, None, b"\x7fELF" + b"\0" * 100),
        ("lib/libx.so.1", MemberType.SYMLINK, "libx.so.1.2.3", None),
        ("lib/libx-copy.so", MemberType.HARDLINK, "lib/libx.so.1.2.3", None),
        ("LICENSE", MemberType.FILE, None, b"license text"),
    ]


def test_head_is_replayed_for_large_members(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 1000
    archive = write_archive(tmp_path / "a.tar.zst", [("file", "big.bin", payload)], "zst")
    ((member, stream),) = list((m, s.read() if s else b"") for m, s in open_source(archive).members())
    assert member.head == payload[:4096]
    assert stream == payload


def test_directory_source_matches_archive(tmp_path: Path) -> None:
    root = tmp_path / TOP
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "libx.so.1.2.3").write_bytes(b"\x7fELF" + b"\0" * 100)
    (root / "lib" / "libx.so.1").symlink_to("libx.so.1.2.3")
    (root / "LICENSE").write_text("license text")
    for start in (root, tmp_path):
        source = open_source(start)
        assert source.package.name == "cuda_demo"
        paths = {m.path: m.type for m, _ in source.members()}
        assert paths == {"lib": MemberType.DIR, "lib/libx.so.1.2.3": MemberType.FILE,
                         "lib/libx.so.1": MemberType.SYMLINK, "LICENSE": MemberType.FILE}


def test_archive_without_top_dir_keeps_paths(tmp_path: Path) -> None:
    # Issue 14: refused unless --package and --strip-components 0 say what it is.
    archive = write_archive(tmp_path / "plain.tar", [("file", "lib/a.so", b"x")], "none", top=None)
    with pytest.raises(SourceError, match="strip_components"):
        list(open_source(archive).members())
    source = open_source(archive, package=PackageId("plain"), strip_components=0)
    assert [m.path for m, _ in source.members()] == ["lib/a.so"]
    assert source.package.name == "plain"


def test_member_outside_top_dir_is_refused(tmp_path: Path) -> None:
    data = tar_bytes([("file", "x", b"1")]) + b""
    archive = tmp_path / "a.tar"
    import io
    import tarfile
    buf = io.BytesIO(data[:-1024])  # drop the end-of-archive blocks, then append a stray member
    with tarfile.open(fileobj=buf, mode="a") as tar:
        info = tarfile.TarInfo("elsewhere/file")
        tar.addfile(info, io.BytesIO(b""))
    archive.write_bytes(buf.getvalue())
    with pytest.raises(SourceError, match="outside the top directory"):
        list(open_source(archive).members())


@pytest.mark.parametrize("raw", ["/etc/passwd", "a/../../x", "../x", "a\x00b"])
def test_unsafe_paths_are_refused(raw: str) -> None:
    with pytest.raises(UnsafeMemberError):
        normalise_member_path(raw, source="s")


def test_normalise_member_path() -> None:
    assert normalise_member_path("./a//b/./c/", source="s") == "a/b/c"


def test_truncated_archive_names_last_good_member(tmp_path: Path) -> None:
    data = tar_bytes([*ENTRIES, ("file", "big", b"z" * 100000)])
    archive = tmp_path / "t.tar"
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArchiveError) as info:
        for _m, s in open_source(archive).members():
            if s:
                s.read()
    assert str(archive) in str(info.value)
    assert "big" in str(info.value)


def test_missing_and_empty_sources(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        open_source(tmp_path / "nope.tar.xz")
    empty = tmp_path / "empty.tar.xz"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match="empty"):
        list(open_source(empty).members())
    junk = tmp_path / "junk.tar.xz"
    junk.write_bytes(b"this is not an archive at all" * 40)
    with pytest.raises(SourceError, match="magic"):
        list(open_source(junk).members())
