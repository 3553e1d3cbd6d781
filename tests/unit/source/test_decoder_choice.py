"""Which decoder runs (``codecs.choice``, one table, by measurement): the binary through a pipe
for multi-block xz on several threads, the library for the rest (one thread either way: the
pipe's hop cost more than the binary saved); the data is the same either way, and member bytes
from the pipe move into files in the kernel."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudasplit._source import codecs
from cudasplit._source.codecs import Codec, Decoder, FdReader, choose_decoder, open_decompressed
from tests.support.builders import compressed_writer

needs_xz = pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz program (xz-utils)")
needs_zstd = pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd program")


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A PATH holding only the fake tools a test writes into it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    codecs.xz_decodes_in_parallel.cache_clear()
    yield bin_dir
    codecs.xz_decodes_in_parallel.cache_clear()


def _fake(bin_dir: Path, name: str, banner: str = "") -> None:
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\nprintf '{banner}'\n")
    tool.chmod(0o755)


def test_the_rule_with_both_binaries(fake_tools: Path) -> None:
    _fake(fake_tools, "xz", "xz (XZ Utils) 5.4.5\\nliblzma 5.4.5\\n")
    _fake(fake_tools, "zstd")
    assert choose_decoder(Codec.NONE, jobs=1) is Decoder.FILE
    assert choose_decoder(Codec.ZSTD, jobs=1) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.ZSTD, jobs=16) is Decoder.IN_PROCESS
    for jobs in (2, 8, 16):
        assert choose_decoder(Codec.XZ, jobs=jobs, blocks=62) is Decoder.BINARY
        assert choose_decoder(Codec.XZ, jobs=jobs, blocks=1) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.XZ, jobs=1, blocks=62) is Decoder.IN_PROCESS
    # gzip and bzip2: the library (no NVIDIA archive uses them)
    assert choose_decoder(Codec.GZIP, jobs=1) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.BZIP2, jobs=4) is Decoder.IN_PROCESS
    # a memory limit below one xz thread's dictionary: the library streams within it
    assert choose_decoder(Codec.XZ, jobs=4, blocks=9, memory_limit=8 << 20,
                          one_thread_needs=12 << 20) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.XZ, jobs=4, blocks=9, memory_limit=64 << 20,
                          one_thread_needs=12 << 20) is Decoder.BINARY
    assert choose_decoder(Codec.ZSTD, jobs=1, external=True) is Decoder.BINARY
    # overrides, and decoding in the caller's thread
    assert choose_decoder(Codec.XZ, jobs=4, external=False) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.XZ, jobs=4, background=False) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.NONE, jobs=4, external=True) is Decoder.FILE


def test_an_old_xz_keeps_parallel_multi_block_decoding_in_process(fake_tools: Path) -> None:
    _fake(fake_tools, "xz", "xz (XZ Utils) 5.2.5\\nliblzma 5.2.5\\n")  # takes -T, one thread
    assert choose_decoder(Codec.XZ, jobs=8, blocks=62) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.XZ, jobs=8, blocks=62, external=True) is Decoder.BINARY


def test_no_binary_no_pipe(fake_tools: Path) -> None:
    assert choose_decoder(Codec.XZ, jobs=8, blocks=9) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.ZSTD, jobs=1) is Decoder.IN_PROCESS
    assert choose_decoder(Codec.ZSTD, jobs=1, external=True) is Decoder.IN_PROCESS


@pytest.mark.parametrize(("banner", "parallel"), [
    ("xz (XZ Utils) 5.4.5\\nliblzma 5.4.5\\n", True),
    ("xz (XZ Utils) 5.8.1\\nliblzma 5.8.1\\n", True),
    ("xz (XZ Utils) 5.2.5\\nliblzma 5.2.5\\n", False),  # takes -T, decodes on one thread
    ("something else 9.9\\n", False),
])
def test_only_an_xz_that_decodes_in_parallel(fake_tools: Path, banner: str,
                                             parallel: bool) -> None:
    _fake(fake_tools, "xz", banner)
    assert codecs.xz_decodes_in_parallel() is parallel


@needs_xz
@pytest.mark.parametrize("jobs", [2, 8])
def test_multiblock_xz_reads_the_same_bytes_either_way(tmp_path: Path, jobs: int) -> None:
    data = os.urandom(200_000) * 3
    path = tmp_path / "t.tar.xz"
    with compressed_writer(path, "xz-multiblock", xz_block_size=64 * 1024) as out:
        out.write(data)
    with open_decompressed(path, jobs=jobs) as stream:
        assert isinstance(stream, FdReader)  # the binary's pipe
        assert stream.read() == data
    with open_decompressed(path, jobs=jobs, external=False) as stream:
        assert stream.read() == data
        assert getattr(stream, "stats", None) is not None  # the in-process pipeline
    with open_decompressed(path, jobs=jobs, memory_limit=1 << 20) as stream:
        assert stream.read() == data
        assert not isinstance(stream, FdReader)  # below one thread's dictionary


@needs_zstd
def test_member_bytes_from_the_pipe_move_in_the_kernel(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    path = tmp_path / "t.tar.zst"
    with compressed_writer(path, "zst") as out:
        out.write(data)
    target = tmp_path / "out"
    with open_decompressed(path, external=True) as stream, open(target, "wb") as out:
        assert isinstance(stream, FdReader)
        assert stream.read(100) == data[:100]
        moved = 0
        while step := stream.transfer_to(out.fileno(), 1 << 20):
            moved += step
        assert moved == len(data) - 100
        assert stream.moved_in_kernel == moved   # splice: no byte through Python
    assert target.read_bytes() == data[100:]


def test_a_plain_tar_is_its_own_stream(tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    path = tmp_path / "t.tar"
    path.write_bytes(b"\0" * 257 + b"ustar" + b"\0" * 250 + data)
    with open_decompressed(path) as stream:
        assert isinstance(stream, FdReader)
        assert stream.read(512)[257:262] == b"ustar"
        assert stream.skip(1000) == 1000
        with open(tmp_path / "out", "wb") as out:
            assert stream.transfer_to(out.fileno(), 1 << 30) == len(data) - 1000
            assert stream.transfer_to(out.fileno(), 1 << 30) == 0
    assert (tmp_path / "out").read_bytes() == data[1000:]
