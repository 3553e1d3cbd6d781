"""Issue 24: one trailing-data rule for every codec, and data after the tar end marker.

After the last complete compressed stream, null bytes (any number) are accepted and ignored
for xz, gzip, bzip2 and zstd alike, in-process and through the system binaries; any other
byte is trailing garbage and refuses the archive. Members or other data after the tar
end-of-archive marker are ignored (as tar does) with a ``data-after-end`` warning.
"""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest

import cudasplit
from cudasplit._source import open_decompressed
from cudasplit.errors import CorruptArchiveError
from tests.support.tarutil import TOP, compress, tar_bytes
from tests.unit.source.test_codecs import xz_multiblock

DATA = bytes(range(256)) * 4000
CODECS = {
    "xz": lambda d: lzma.compress(d),
    "xz-multi": lambda d: xz_multiblock(d, 300_000)[0],
    "gz": lambda d: compress(d, "gz"),
    "bz2": lambda d: compress(d, "bz2"),
    "zst": lambda d: compress(d, "zst"),
}
MODES = [{"jobs": 1, "external": False}, {"jobs": 3, "external": False},
         {"jobs": 2, "external": True}]


def _read(path: Path, **kw: object) -> bytes:
    with open_decompressed(path, **kw) as fh:  # type: ignore[arg-type]
        return fh.read()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("zeros", [1, 3, 4, 4096, 100_001])
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_null_padding_is_accepted_for_every_codec(tmp_path: Path, codec: str, zeros: int,
                                                  mode: dict[str, object]) -> None:
    path = tmp_path / "a"
    path.write_bytes(CODECS[codec](DATA) + b"\0" * zeros)
    assert _read(path, **mode) == DATA


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tail", [b"x", b"\0\0\0\0\0\0\0\x01", b"\0" * 5000 + b"garbage",
                                  b"PK\x03\x04"])
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_other_trailing_bytes_are_refused_for_every_codec(tmp_path: Path, codec: str,
                                                           tail: bytes,
                                                           mode: dict[str, object]) -> None:
    path = tmp_path / "a"
    path.write_bytes(CODECS[codec](DATA) + tail)
    with pytest.raises(CorruptArchiveError):
        _read(path, **mode)


def test_external_binaries_see_only_what_they_accept(tmp_path: Path) -> None:
    """zstd refuses any trailing nulls and xz those not a multiple of four: such files are
    decoded in-process instead, so the answer does not depend on the binary."""
    if not (shutil.which("zstd") and shutil.which("xz")):
        pytest.skip("needs the xz and zstd binaries")
    for codec, zeros in (("zst", 4), ("xz", 3)):
        path = tmp_path / f"a.{codec}"
        path.write_bytes(CODECS[codec](DATA) + b"\0" * zeros)
        assert _read(path, jobs=2, external=True) == DATA


def _archive_with(tmp_path: Path, after: bytes, codec: str = "xz") -> Path:
    first = tar_bytes([("file", "lib/a.txt", b"a\n")])
    # tarfile pads to a 10 KiB record: keep just the two zero blocks of the end marker.
    body = first.rstrip(b"\0")
    body += b"\0" * (-len(body) % 512) + b"\0" * 1024
    path = tmp_path / f"{TOP}.tar.{codec}"
    path.write_bytes(compress(body + after, codec))
    return path


@pytest.mark.parametrize("codec", ["xz", "gz", "zst"])
def test_members_after_the_end_marker_are_ignored_with_a_warning(tmp_path: Path,
                                                                 codec: str) -> None:
    later = tar_bytes([("file", "lib/b.txt", b"b\n")])
    report = cudasplit.inspect(_archive_with(tmp_path, later, codec),
                               options=cudasplit.SplitOptions(jobs=2))
    assert "lib/b.txt" not in {m.path for m in report.members}
    warnings = [w for w in report.warnings if w.code == "data-after-end"]
    assert len(warnings) == 1
    assert f"member '{TOP}/'" in warnings[0].message


def test_other_data_after_the_end_marker_is_named_as_such(tmp_path: Path) -> None:
    report = cudasplit.inspect(_archive_with(tmp_path, b"\0" * 700 + b"junk" + b"\0" * 300))
    (warning,) = [w for w in report.warnings if w.code == "data-after-end"]
    assert "not a tar header" in warning.message


@pytest.mark.parametrize("jobs", [1, 2])
def test_zero_padding_after_the_end_marker_is_silent(tmp_path: Path, jobs: int) -> None:
    report = cudasplit.inspect(_archive_with(tmp_path, b"\0" * 20480),
                               options=cudasplit.SplitOptions(jobs=jobs))
    assert not [w for w in report.warnings if w.code == "data-after-end"]
    assert "lib/a.txt" in {m.path for m in report.members}
