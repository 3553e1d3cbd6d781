"""``repack``: reproducible per-output tarballs that unpack to exactly a direct split."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from cudasplit import RepackOptions, SplitOptions, repack_to_dir, split_to_dir
from cudasplit._sinks import TarballSink, mtime_from_env
from cudasplit._sinks import tarball as tarball_sink
from cudasplit.cli import main
from cudasplit.errors import CorruptArchiveError, OutputError
from tests.support.builders import Compression
from tests.support.tarutil import write_archive

STEM = "cuda_demo-linux-x86_64-12.9.79"
FAST = RepackOptions(level=1)


def _archives(directory: Path) -> dict[str, Path]:
    """Output name -> archive, from ``<stem>-<output>.tar.zst`` names."""
    return {p.name[len(STEM) + 1:-len(".tar.zst")]: p for p in directory.glob("*.tar.zst")}


def _tar_members(path: Path) -> list[tarfile.TarInfo]:
    with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream, \
            tarfile.open(fileobj=stream, mode="r|") as tar:
        return list(tar)


def _unpack(path: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream, \
            tarfile.open(fileobj=stream, mode="r|") as tar:
        # Debian bookworm's Python 3.11.2 predates extraction filters (3.11.4).
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(dest, filter="tar")
        else:
            tar.extractall(dest)  # our own archive, written by the test


def _snapshot(root: Path) -> dict[str, tuple[str, object]]:
    """Relative path -> (type, link text | bytes+exec bit) for every entry below ``root``."""
    result: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                result[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                result[rel] = ("dir", None)
            else:
                result[rel] = ("file", (path.read_bytes(), bool(st.st_mode & 0o100)))
    return result


def _hardlink_groups(root: Path) -> set[frozenset[str]]:
    groups: dict[tuple[int, int], set[str]] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                groups.setdefault((st.st_dev, st.st_ino), set()).add(
                    path.relative_to(root).as_posix())
    return {frozenset(g) for g in groups.values()}


@pytest.fixture(scope="module")
def tarball(redist_tarballs: dict[Compression, Path]) -> Path:
    return redist_tarballs["xz"]


def test_two_runs_give_identical_bytes_and_the_epoch_changes_them(
        tmp_path: Path, tarball: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = repack_to_dir(tarball, tmp_path / "a", repack=FAST)
    repack_to_dir(tarball, tmp_path / "b", repack=FAST)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    repack_to_dir(tarball, tmp_path / "c", repack=FAST)
    a, b, c = (_archives(tmp_path / d) for d in "abc")
    assert sorted(a) == sorted(p.name[len(STEM) + 1:-8] for p in first.archives)
    assert {"out", "lib", "static", "stubs", "include", "dev", "bin"} <= set(a)
    assert sorted(a) == sorted(b) == sorted(c)
    for output in a:
        assert a[output].read_bytes() == b[output].read_bytes(), output
        assert a[output].read_bytes() != c[output].read_bytes(), output
    assert {m.mtime for m in _tar_members(c["lib"])} == {1700000000}
    assert {m.mtime for m in _tar_members(a["lib"])} == {tarball_sink.DEFAULT_MTIME}


def test_members_are_sorted_owned_by_root_with_normalised_modes(
        tmp_path: Path, tarball: Path) -> None:
    repack_to_dir(tarball, tmp_path, repack=FAST)
    umask = os.umask(0o022)
    os.umask(umask)
    for output, path in _archives(tmp_path).items():
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0o600
        members = _tar_members(path)
        names = [m.name for m in members]
        assert names == sorted(names, key=lambda n: n.split("/")), output
        for m in members:
            assert (m.uid, m.gid, m.uname, m.gname) == (0, 0, "", ""), m.name
            assert not m.name.startswith(("/", "./")) and ".." not in m.name.split("/")
            if m.isdir():
                assert m.mode == 0o755
            elif m.issym():
                assert m.mode == 0o777
            else:
                assert m.mode in (0o644, 0o755), m.name
    lib = {m.name: m for m in _tar_members(_archives(tmp_path)["lib"])}
    assert lib["lib/libdemo.so.12.9.79"].mode == 0o755
    assert lib["lib/libdemo.so"].issym()


def test_unpacked_archives_equal_a_direct_split_byte_for_byte(
        tmp_path: Path, tarball: Path) -> None:
    direct = tmp_path / "direct"
    report = split_to_dir(tarball, direct)
    # With the prefix the direct split used, RUNPATHs and .pc files name the same roots.
    result = repack_to_dir(tarball, tmp_path / "archives",
                           repack=RepackOptions(prefix=str(direct), level=1))
    unpacked = tmp_path / "unpacked"
    archives = _archives(tmp_path / "archives")
    for output, path in archives.items():
        _unpack(path, unpacked / output)
    assert sorted(archives) == sorted(p.name for p in direct.iterdir())
    for output in archives:
        assert _snapshot(unpacked / output) == _snapshot(direct / output), output
        assert _hardlink_groups(unpacked / output) == _hardlink_groups(direct / output)
    assert [(m.path, m.output, m.dest) for m in result.report.members] == \
        [(m.path, m.output, m.dest) for m in report.members]
    assert result.report.outputs["lib"].directory == f"{direct}/lib"


def test_default_prefix_and_runpaths_name_the_unpack_location(
        tmp_path: Path, tarball: Path) -> None:
    result = repack_to_dir(tarball, tmp_path, repack=FAST)
    assert result.report.outputs["lib"].directory == f"/{STEM}/lib"
    patched = [m for m in result.report.members if m.runpath_after]
    assert patched
    assert all(str(tmp_path) not in (m.runpath_after or "") for m in patched)
    assert any(f"/{STEM}/lib/lib" in (m.runpath_after or "") for m in patched)


def test_re_split_of_each_archive_gives_the_direct_split(tmp_path: Path, tarball: Path) -> None:
    direct = tmp_path / "direct"
    split_to_dir(tarball, direct, SplitOptions(patch=False))
    repack_to_dir(tarball, tmp_path / "archives", SplitOptions(patch=False), FAST)
    again: dict[str, tuple[str, object]] = {}
    for output, path in _archives(tmp_path / "archives").items():
        dest = tmp_path / "again" / output
        # The archives have no NVIDIA top directory: name the package explicitly.
        split_to_dir(path, dest, SplitOptions(patch=False, package=_package(),
                                                  strip_components=0, default_rules=True))
        for sub in dest.iterdir():
            again.update({f"{sub.name}/{k}": v for k, v in _snapshot(sub).items()})
    assert _comparable(again) == _comparable(_union(direct))


def _comparable(entries: dict[str, tuple[str, object]]) -> dict[str, tuple[str, object]]:
    # .pc files name their output roots, which differ between the two layouts by design.
    return {k: ("pc", None) if k.endswith(".pc") and v[0] == "file" else v
            for k, v in entries.items() if v[0] != "dir"}


def _package():  # type: ignore[no-untyped-def]
    from cudasplit import PackageId
    return PackageId("cuda_demo", "linux-x86_64", "12.9.79")


def _union(root: Path) -> dict[str, tuple[str, object]]:
    return {f"{o.name}/{k}": v for o in root.iterdir() for k, v in _snapshot(o).items()}


def test_failure_while_packing_leaves_no_archive(
        tmp_path: Path, tarball: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    original = TarballSink._pack

    def failing(self: TarballSink, root: Path, dest: Path) -> None:
        calls.append(dest)
        if len(calls) == 3:
            raise OutputError(f"{dest}: cannot write archive (disk full)")
        original(self, root, dest)

    monkeypatch.setattr(TarballSink, "_pack", failing)
    with pytest.raises(OutputError, match="disk full"):
        repack_to_dir(tarball, tmp_path, repack=FAST)
    assert len(calls) == 3
    assert list(tmp_path.iterdir()) == []  # no archive, no temp file, no staging dir


def test_existing_archive_is_refused_without_overwrite(tmp_path: Path, tarball: Path) -> None:
    existing = tmp_path / f"{STEM}-lib.tar.zst"
    existing.write_bytes(b"keep me")
    staged: list[str] = []
    real_write = TarballSink.write_file

    def spy(self: TarballSink, *args: object, **kw: object) -> object:
        staged.append(str(args[0]))
        return real_write(self, *args, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TarballSink, "write_file", spy)
        with pytest.raises(OutputError, match="already exists"):
            repack_to_dir(tarball, tmp_path, repack=FAST)
    assert staged == []  # refused before the first byte was staged
    assert existing.read_bytes() == b"keep me"
    assert [p.name for p in tmp_path.iterdir()] == [existing.name]
    repack_to_dir(tarball, tmp_path, SplitOptions(overwrite=True), FAST)
    assert existing.read_bytes() != b"keep me"


def test_corrupt_source_leaves_nothing(tmp_path: Path, tarball: Path) -> None:
    broken = tmp_path / "src" / tarball.name
    broken.parent.mkdir()
    broken.write_bytes(tarball.read_bytes()[: tarball.stat().st_size // 2])
    out = tmp_path / "out"
    with pytest.raises(CorruptArchiveError):
        repack_to_dir(broken, out, repack=FAST)
    assert not out.exists()  # not even an empty output dir (issue 14)


def test_other_formats_and_the_cli(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{STEM}-archive.tar.xz", [
        ("file", "lib/libdemo_static.a", b"!<arch>\n"),
        ("file", "include/demo.h", b"#pragma once\n"),
        ("file", "LICENSE", b"license"),
    ])
    for fmt, opener in (("xz", "r:xz"), ("gz", "r:gz")):
        result = repack_to_dir(archive, tmp_path / fmt, SplitOptions(patch=False),
                               RepackOptions(fmt=fmt))
        for path in result.archives:
            assert path.name.endswith(f".tar.{fmt}")
            with tarfile.open(path, opener) as tar:
                assert tar.getnames()
    runner = CliRunner()
    args = ["repack", str(archive), "-o", str(tmp_path / "cli"), "--level", "3", "-j",
            "2", "--prefix", "/opt/demo", "--nix-support", "--no-patch"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    archives = _archives(tmp_path / "cli")
    assert set(result.stdout.split()) == {str(p) for p in archives.values()}
    out = {m.name: m for m in _tar_members(archives["out"])}
    assert "nix-support/include-in-cudatoolkit-root" in out
    again = runner.invoke(main, args)
    assert again.exit_code == 2 and "already exists" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_threads_is_a_deprecated_spelling_and_jobs_counts_the_compressor(tmp_path: Path) -> None:
    """The compressor's threads are the cores of --jobs; --threads still works, with a
    warning, and the bytes are those of any thread count from 1."""
    archive = write_archive(tmp_path / f"{STEM}-archive.tar.xz", [
        ("file", "lib/libdemo.so.1", b"\x7fELF" + bytes(200)),
        ("file", "include/demo.h", b"int demo;\n")])
    runner = CliRunner()
    by_jobs = runner.invoke(main, ["repack", str(archive), "-o", str(tmp_path / "j"), "-j", "2",
                                   "--no-patch"])
    by_threads = runner.invoke(main, ["repack", str(archive), "-o", str(tmp_path / "t"),
                                      "--threads", "3", "--no-patch"])
    assert by_jobs.exit_code == 0 and by_threads.exit_code == 0, by_threads.output
    assert "--threads" not in by_jobs.stderr
    assert "--threads is deprecated" in by_threads.stderr
    assert "--threads" not in runner.invoke(main, ["repack", "--help"]).stdout
    jobs, threads = _archives(tmp_path / "j"), _archives(tmp_path / "t")
    assert {o: p.read_bytes() for o, p in jobs.items()} == {
        o: p.read_bytes() for o, p in threads.items()}


def test_source_date_epoch_must_be_an_integer() -> None:
    assert mtime_from_env({}) == tarball_sink.DEFAULT_MTIME
    assert mtime_from_env({"SOURCE_DATE_EPOCH": "42"}) == 42
    with pytest.raises(OutputError, match="SOURCE_DATE_EPOCH"):
        mtime_from_env({"SOURCE_DATE_EPOCH": "yesterday"})
