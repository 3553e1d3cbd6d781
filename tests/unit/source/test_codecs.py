"""Tests of cudasplit._source.codecs: every codec round-trips, damage is reported, nothing leaks."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudasplit._source.codecs.external as _codecexternal
from cudasplit._source import Codec, detect_codec, open_decompressed, read_xz_layout
from cudasplit.errors import CorruptArchiveError, SourceError

HAVE_XZ = shutil.which("xz") is not None
HAVE_ZSTD = shutil.which("zstd") is not None
needs_xz = pytest.mark.skipif(not HAVE_XZ, reason="no xz binary")
needs_zstd = pytest.mark.skipif(not HAVE_ZSTD, reason="no zstd binary")
# tmp_path is shared across hypothesis examples; every example overwrites its files.
FIXTURE_OK = [HealthCheck.function_scoped_fixture]

# Every way of reading a file that must give the same bytes.
MODES: list[dict[str, object]] = [
    {"jobs": 1, "external": False},
    {"jobs": 1, "external": False, "background": False},  # decoded in the caller's thread
    {"jobs": 2, "external": False},
    {"jobs": 3, "external": False, "memory_limit": 1},  # tiny read-ahead: maximal back-pressure
    {"jobs": 1, "external": False, "background": True},
    {"jobs": 2, "external": True},
]


def payload(size: int, seed: int = 0) -> bytes:
    """Half text-like (compressible), half random (like code sections of a library)."""
    rng = random.Random(seed)
    text = b"".join(b"line %d of a header %d\n" % (i, rng.randrange(1000)) for i in range(size))
    return (text[: size // 2] + rng.randbytes(size - size // 2))[:size]


def read_all(path: Path, chunk: int = 10240, **kw: object) -> bytes:
    out = bytearray()
    with open_decompressed(path, **kw) as fh:  # type: ignore[arg-type]
        while data := fh.read(chunk):
            out += data
    return bytes(out)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def cudasplit_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("cudasplit-")]


def child_pids() -> list[int]:
    """Our child processes, zombies included (from /proc)."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                out.append(int(entry))
    return out


# --- a python-side multi-block .xz writer, independent of the code under test ----------


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def xz_multiblock(data: bytes, block_size: int, check: int = lzma.CHECK_CRC64,
                  preset: int = 0) -> tuple[bytes, list[int]]:
    """One .xz stream with a block per ``block_size`` bytes; returns it and block offsets.

    Each block is cut out of a single-block stream made by ``lzma.compress``.
    """
    pieces = [data[i:i + block_size] for i in range(0, len(data), block_size)]
    header = b""
    blocks, records, offsets = [], [], []
    offset = 12
    for piece in pieces:
        one = lzma.compress(piece, format=lzma.FORMAT_XZ, check=check, preset=preset)
        header = one[:12]
        index_size = (struct.unpack("<I", one[-8:-4])[0] + 1) * 4
        index = one[-12 - index_size:-12]
        unpadded, pos = _read_varint(index, 2)
        uncompressed, _ = _read_varint(index, pos)
        block = one[12:-12 - index_size]
        blocks.append(block)
        records.append(_varint(unpadded) + _varint(uncompressed))
        offsets.append(offset)
        offset += len(block)
    if not header:
        return lzma.compress(b"", format=lzma.FORMAT_XZ, check=check), []
    body = b"\0" + _varint(len(records)) + b"".join(records)
    body += b"\0" * (-len(body) % 4)
    index = body + struct.pack("<I", zlib.crc32(body))
    flags = header[6:8]
    backward = struct.pack("<I", len(index) // 4 - 1) + flags
    footer = struct.pack("<I", zlib.crc32(backward)) + backward + b"YZ"
    return header + b"".join(blocks) + index + footer, offsets


# --- round trips -------------------------------------------------------------------------

DATA = payload(300_000)


def _xz_cli(data: bytes, *args: str) -> bytes:
    return subprocess.run(["xz", "-c", *args], input=data, capture_output=True, check=True).stdout


def _variants() -> Iterator[tuple[str, bytes, bytes]]:
    """(name, file bytes, expected output) for every format the tests round-trip."""
    yield "xz-single", lzma.compress(DATA), DATA
    yield "xz-python-multi", xz_multiblock(DATA, 50_000)[0], DATA
    for check in (lzma.CHECK_NONE, lzma.CHECK_CRC32, lzma.CHECK_SHA256):
        yield f"xz-multi-check{check}", xz_multiblock(DATA, 70_000, check)[0], DATA
    concatenated = lzma.compress(DATA[:1000]) + b"\0" * 8 + xz_multiblock(DATA, 64_000)[0]
    yield "xz-concatenated-padded", concatenated + b"\0" * 4, DATA[:1000] + DATA
    yield "xz-empty", lzma.compress(b""), b""
    yield "zstd", zstandard.ZstdCompressor().compress(DATA), DATA
    no_size = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True)
    yield "zstd-no-content-size", no_size.compress(DATA), DATA
    frames = zstandard.ZstdCompressor().compress(DATA[:5]) + no_size.compress(DATA)
    yield "zstd-two-frames", frames, DATA[:5] + DATA
    yield "gzip", gzip.compress(DATA), DATA
    yield "bzip2", bz2.compress(DATA), DATA
    yield "gzip-two-members", gzip.compress(DATA[:7]) + gzip.compress(DATA), DATA[:7] + DATA
    yield "bzip2-two-streams", bz2.compress(DATA[:9]) + bz2.compress(DATA), DATA[:9] + DATA
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as tf:
        info = tarfile.TarInfo("a")
        info.size = len(DATA)
        tf.addfile(info, io.BytesIO(DATA))
    yield "plain-tar", tar.getvalue(), tar.getvalue()
    if HAVE_XZ:
        yield "xz-cli-T2-64KiB", _xz_cli(DATA, "-T2", "--block-size=64KiB"), DATA
        yield "xz-cli-sha256", _xz_cli(DATA, "--check=sha256", "-T2", "--block-size=100KiB"), DATA
    if HAVE_ZSTD:
        stdin = subprocess.run(["zstd", "-q", "-c"], input=DATA, capture_output=True, check=True)
        yield "zstd-cli-stdin-no-size", stdin.stdout, DATA


VARIANTS = list(_variants())
BY_NAME = {v[0]: v for v in VARIANTS}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()))
@pytest.mark.parametrize(("name", "blob", "expected"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_round_trip(tmp_path: Path, name: str, blob: bytes, expected: bytes,
                    mode: dict[str, object]) -> None:
    path = write(tmp_path, name, blob)
    assert read_all(path, **mode) == expected
    assert not cudasplit_threads()


@needs_xz
def test_cli_multiblock_layout_matches_xz_list(tmp_path: Path) -> None:
    path = write(tmp_path, "m.xz", _xz_cli(DATA, "-T2", "--block-size=64KiB"))
    with open(path, "rb") as fh:
        streams = read_xz_layout(fh.fileno(), path.stat().st_size)
    blocks = [b for s in streams for b in s.blocks]
    assert len(blocks) == -(-len(DATA) // 65536)
    assert sum(b.uncompressed_size for b in blocks) == len(DATA)
    assert read_all(path, jobs=2) == subprocess.run(["xz", "-dc", str(path)],
                                                    capture_output=True).stdout


def test_read_semantics(tmp_path: Path) -> None:
    path = write(tmp_path, "m.xz", xz_multiblock(DATA, 40_000)[0])
    with open_decompressed(path, jobs=2) as fh:
        assert fh.read(0) == b""
        assert fh.read(123_457) == DATA[:123_457]  # exact length across block boundaries
        buf = bytearray(1000)
        assert fh.readinto(buf) == 1000 and bytes(buf) == DATA[123_457:124_457]
        assert fh.read() == DATA[124_457:]
        assert fh.read(10) == b""


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
@given(
    data=st.binary(min_size=0, max_size=20_000) | st.builds(payload, st.integers(0, 60_000)),
    block_size=st.integers(1, 9_000),
    jobs=st.integers(1, 4),
    memory_limit=st.sampled_from([1, 4096, 1 << 20]),
    chunk=st.integers(1, 70_000),
    check=st.sampled_from([lzma.CHECK_NONE, lzma.CHECK_CRC32, lzma.CHECK_CRC64]),
)
def test_random_multiblock_xz(tmp_path: Path, data: bytes, block_size: int, jobs: int,
                              memory_limit: int, chunk: int, check: int) -> None:
    path = write(tmp_path, "h.xz", xz_multiblock(data, block_size, check)[0])
    assert read_all(path, chunk=chunk, jobs=jobs, memory_limit=memory_limit,
                    external=False) == data
    assert lzma.decompress(path.read_bytes()) == data  # the generator itself is sound


# --- damage ------------------------------------------------------------------------------

DAMAGEABLE = [v for v in VARIANTS if v[0] != "plain-tar" and v[2]]
IN_PROCESS = [m for m in MODES if not m["external"]]


def _damage_raises(path: Path, mode: dict[str, object]) -> None:
    with pytest.raises(CorruptArchiveError) as info:
        read_all(path, chunk=65536, **mode)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert not cudasplit_threads()


@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURE_OK)
@given(which=st.sampled_from([v[0] for v in DAMAGEABLE]), cut=st.floats(0.0, 0.9999),
       mode=st.sampled_from(MODES))
def test_truncation_is_corrupt(tmp_path: Path, which: str, cut: float,
                               mode: dict[str, object]) -> None:
    _, blob, _ = BY_NAME[which]
    length = max(1, int(len(blob) * cut))  # at least the magic byte survives: not "empty"
    path = write(tmp_path, "t", blob[:length])
    if detect_codec_or_none(blob[:length]) is None:
        with pytest.raises(SourceError):
            read_all(path, **mode)
        return
    _damage_raises(path, mode)


def detect_codec_or_none(head: bytes) -> Codec | None:
    try:
        return detect_codec(head)
    except SourceError:
        return None


# gzip headers (mtime, OS) and the last byte of bzip2 (bit padding) are not covered by any
# check, so flips there are legitimately invisible; xz and checksummed zstd cover all bytes.
FLIPPABLE = [
    name for name, _, _ in DAMAGEABLE
    if (name.startswith(("xz", "zstd-no-content", "zstd-cli")) or name in ("gzip", "bzip2"))
    and name != f"xz-multi-check{lzma.CHECK_NONE}"
]


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(which=st.sampled_from(FLIPPABLE), where=st.floats(0.0, 0.9999),
       bit=st.integers(0, 7), mode=st.sampled_from(MODES))
def test_flipped_bit_is_corrupt(tmp_path: Path, which: str, where: float,
                                bit: int, mode: dict[str, object]) -> None:
    name, blob, _ = BY_NAME[which]
    lo = 0 if name.startswith("xz") else 32
    hi = len(blob) - (1 if name.startswith("bzip2") else 0)
    pos = lo + int((hi - lo) * where)
    damaged = bytearray(blob)
    damaged[pos] ^= 1 << bit
    path = write(tmp_path, "f", bytes(damaged))
    if detect_codec_or_none(bytes(damaged)) is not detect_codec(blob):
        with pytest.raises(SourceError):
            read_all(path, **mode)
        return
    _damage_raises(path, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["xz-single", "xz-python-multi", "zstd", "gzip-two-members",
                                  "bzip2-two-streams"])
@pytest.mark.parametrize("garbage", [b"x", b"garbage!", b"\0\0\0\0GARBAGE\0"])
def test_trailing_garbage(tmp_path: Path, name: str, garbage: bytes,
                          mode: dict[str, object]) -> None:
    # (Null bytes alone are accepted for every codec: tests/test_trailing_data.py.)
    blob = BY_NAME[name][1]
    _damage_raises(write(tmp_path, name, blob + garbage), mode)


def test_bad_block_check_reports_after_good_blocks(tmp_path: Path) -> None:
    blob, offsets = xz_multiblock(DATA, 50_000, lzma.CHECK_CRC32)
    # The CRC32 check follows the block padding: it is the last 4 bytes before block 3.
    damaged = bytearray(blob)
    damaged[offsets[3] - 1] ^= 0x40
    path = write(tmp_path, "c.xz", bytes(damaged))
    for mode in MODES:
        got = bytearray()
        with pytest.raises(CorruptArchiveError, match="corrupt") as info, \
                open_decompressed(path, **mode) as fh:  # type: ignore[arg-type]
            while data := fh.read(4096):
                got += data
        assert bytes(got) == DATA[: len(got)]
        threaded = not mode["external"] and mode.get("background") is not False
        if threaded:  # errors surface in block order: blocks 0 and 1 come out first
            assert 100_000 - 4096 < len(got) <= 100_000  # (the straddling read raises)
            assert f"block at offset {offsets[2]}" in str(info.value)


@pytest.mark.parametrize("external", [False, True])
def test_empty_and_unknown(tmp_path: Path, external: bool) -> None:
    with pytest.raises(SourceError, match="empty"):
        read_all(write(tmp_path, "e", b""), external=external)
    with pytest.raises(SourceError, match="magic"):
        read_all(write(tmp_path, "u", b"hello" * 200), external=external)
    with pytest.raises(SourceError, match="cannot open"):
        read_all(tmp_path / "missing.tar.xz", external=external)
    with pytest.raises(CorruptArchiveError):
        read_all(write(tmp_path, "m", b"\xfd7zXZ\x00"), external=external)


# --- external and in-process agree; cleanup ---------------------------------------------


@needs_xz
@needs_zstd
@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.binary(max_size=50_000), cut=st.none() | st.integers(1, 200))
def test_external_agrees_with_in_process(tmp_path: Path, data: bytes, cut: int | None) -> None:
    for name, blob in [("x.xz", _xz_cli(data, "-T2", "--block-size=4KiB")),
                       ("x.zst", zstandard.ZstdCompressor(write_checksum=True).compress(data))]:
        if cut is not None:
            blob = blob[:-cut] if cut < len(blob) else blob[:1]
        path = write(tmp_path, name, blob)
        outcomes = []
        for external in (False, True):
            try:
                outcomes.append(read_all(path, jobs=2, external=external))
            except SourceError as exc:  # CorruptArchiveError, or "unknown magic" if cut short
                outcomes.append(type(exc).__name__.encode())
        assert outcomes[0] == outcomes[1]
        assert outcomes[0] == data if cut is None else outcomes[0].endswith(b"Error")


def test_external_falls_back_without_binary(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_codecexternal.shutil, "which", lambda _name: None)
    path = write(tmp_path, "x.xz", xz_multiblock(DATA, 30_000)[0])
    assert read_all(path, jobs=2, external=True) == DATA


@pytest.fixture(scope="module")
def big_xz(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """Enough blocks that the decoders are still busy when the reader closes."""
    big = payload(2_000_000, seed=1)
    path = tmp_path_factory.mktemp("big") / "big.xz"
    path.write_bytes(xz_multiblock(big, 100_000, preset=0)[0])
    return path, big


@pytest.mark.parametrize("mode", MODES)
def test_close_mid_stream_cleans_up(big_xz: tuple[Path, bytes], mode: dict[str, object]) -> None:
    path, big = big_xz
    before = set(child_pids())
    with open_decompressed(path, **mode) as fh:  # type: ignore[arg-type]
        assert fh.read(150_000) == big[:150_000]
    assert fh.closed
    assert not cudasplit_threads()
    assert set(child_pids()) <= before  # killed and reaped: not even a zombie

    with pytest.raises(RuntimeError, match="boom"), \
            open_decompressed(path, **mode) as fh:  # type: ignore[arg-type]
        fh.read(10)
        raise RuntimeError("boom")
    assert not cudasplit_threads()
    assert set(child_pids()) <= before


def test_jobs_zero_means_all_cpus(tmp_path: Path) -> None:
    path = write(tmp_path, "x.xz", xz_multiblock(DATA, 30_000)[0])
    assert read_all(path, jobs=0, external=False) == DATA


def test_detect_codec() -> None:
    assert detect_codec(b"\xfd7zXZ\x00rest") is Codec.XZ
    assert detect_codec(b"\x28\xb5\x2f\xfd") is Codec.ZSTD
    assert detect_codec(b"\x1f\x8b\x08") is Codec.GZIP
    assert detect_codec(b"BZh9") is Codec.BZIP2
    assert detect_codec(b"\0" * 257 + b"ustar") is Codec.NONE
    with pytest.raises(SourceError, match=r"x\.tar: empty"):
        detect_codec(b"", source="x.tar")


# --- zstd: bounded output per chunk, structure checked before decoding -------------------


def _zstd_bomb(path: Path, gib: int) -> Path:
    cctx = zstandard.ZstdCompressor(level=3)
    with open(path, "wb") as fh, cctx.stream_writer(fh) as writer:
        zeros = b"\0" * (1 << 20)
        for _ in range(gib << 10):
            writer.write(zeros)
    return path


def test_zstd_bomb_is_decoded_in_bounded_chunks(tmp_path: Path) -> None:
    # 64 KiB of RLE blocks that expand to 2 GiB: decompressobj would return it in one piece.
    bomb = _zstd_bomb(tmp_path / "bomb.zst", 2)
    assert bomb.stat().st_size < 1 << 20
    with open_decompressed(bomb) as stream:
        sizes = {len(stream.read(1 << 20)) for _ in range(64)}
    assert sizes == {1 << 20}
    probe = "\n".join([
        "import re",
        "from pathlib import Path",
        "from cudasplit._source.codecs import open_decompressed",
        f"with open_decompressed(Path({str(bomb)!r})) as s:",
        "    n = sum(len(s.read(1 << 20)) for _ in range(2048))",
        # VmHWM: this process's own peak (ru_maxrss would inherit pytest's across exec)
        "print(n, re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])",
    ])
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) == 2 << 30
    assert int(out[1]) < 200 * 1024, f"peak RSS {int(out[1]) >> 10} MiB"


@pytest.mark.parametrize("cut", [1, 3, 100, 2000])
def test_zstd_cut_inside_a_frame_is_reported_before_any_output(tmp_path: Path, cut: int) -> None:
    data = os.urandom(50_000) + b"x" * 200_000
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    path = tmp_path / "cut.zst"
    path.write_bytes(frame + frame[:-cut])
    with pytest.raises(CorruptArchiveError, match="truncated zstd"), open_decompressed(path) as s:
        s.read(1)


def test_zstd_skippable_frames_and_checksums(tmp_path: Path) -> None:
    data = os.urandom(10_000)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"meta!"
    path = tmp_path / "ok.zst"
    path.write_bytes(skippable + frame + skippable + frame)
    with open_decompressed(path) as s:
        assert s.read() == data + data
    broken = bytearray(frame)
    broken[-1] ^= 0xFF  # the content checksum
    path.write_bytes(bytes(broken))
    with pytest.raises(CorruptArchiveError), open_decompressed(path) as s:
        s.read()
