"""From 8 decoder threads, multi-block xz goes through ``xz -TN`` unless a memory cap is asked
(measured faster on 16 cores: benchmarks/README.md §12); the data is the same either way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cudasplit._source import codecs
from cudasplit._source.codecs import Codec, open_decompressed
from tests.support.builders import compressed_writer


def test_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "xz_decodes_in_parallel", lambda: True)
    rule = codecs._use_external
    assert rule(Codec.XZ, None, 8, None) and rule(Codec.XZ, None, 64, None)
    assert not rule(Codec.XZ, None, 7, None)
    assert not rule(Codec.XZ, None, 16, 256 << 20)  # a cap: the in-process budget
    assert not rule(Codec.ZSTD, None, 16, None)
    assert not rule(Codec.XZ, False, 16, None) and rule(Codec.XZ, True, 1, None)
    monkeypatch.setattr(codecs, "xz_decodes_in_parallel", lambda: False)
    assert not rule(Codec.XZ, None, 16, None)  # an xz that would decode on one thread


@pytest.mark.parametrize(("banner", "parallel"), [
    ("xz (XZ Utils) 5.4.5\nliblzma 5.4.5\n", True),
    ("xz (XZ Utils) 5.8.1\nliblzma 5.8.1\n", True),
    ("xz (XZ Utils) 5.2.5\nliblzma 5.2.5\n", False),  # takes -T, decodes on one thread
    ("something else 9.9\n", False),
])
def test_only_an_xz_that_decodes_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             banner: str, parallel: bool) -> None:
    fake = tmp_path / "xz"
    fake.write_text(f"#!/bin/sh\nprintf '{banner}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    codecs.xz_decodes_in_parallel.cache_clear()
    try:
        assert codecs.xz_decodes_in_parallel() is parallel
    finally:
        codecs.xz_decodes_in_parallel.cache_clear()


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz program")
def test_multiblock_xz_on_eight_jobs_reads_the_same_bytes(tmp_path: Path) -> None:
    data = os.urandom(200_000) * 3
    path = tmp_path / "t.tar.xz"
    with compressed_writer(path, "xz-multiblock", xz_block_size=64 * 1024) as out:
        out.write(data)
    with open_decompressed(path, jobs=8) as stream:
        assert stream.read() == data
        assert getattr(stream, "stats", None) is None  # the binary's pipe, not the pipeline
    with open_decompressed(path, jobs=8, memory_limit=8 << 20) as stream:
        assert stream.read() == data
        assert getattr(stream, "stats", None) is not None  # the capped in-process decoder
