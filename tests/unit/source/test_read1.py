"""``read1``: a member's data handed from the decoder's chunks to ``write`` without a copy."""

from __future__ import annotations

import io
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cudasplit._sinks import directory
from cudasplit._source.codecs import CHUNK, ChunkReader


def _reader(chunks: list[bytes]) -> ChunkReader:
    return ChunkReader(iter(chunks), "t.tar")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), max_size=8),
       st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=20),
       st.integers(min_value=0, max_value=3))
def test_read1_and_read_mixed_return_the_stream_in_order(chunks: list[bytes], sizes: list[int],
                                                          exact_every: int) -> None:
    reader = _reader(chunks)
    got, i = b"", 0
    while True:
        size = sizes[i % len(sizes)]
        exact = exact_every and i % (exact_every + 1) == 0
        data = reader.read(size) if exact else reader.read1(size)
        assert len(data) <= size
        if not data:
            break
        got += bytes(data)
        i += 1
    assert got == b"".join(chunks)
    assert reader.read1(10) == b"" and reader.read(10) == b""


def test_read1_hands_over_a_whole_chunk_itself_and_views_of_parts() -> None:
    first, second = b"a" * 100, b"b" * 100
    reader = _reader([first, second])
    assert reader.read1(1000) is first  # a whole chunk: the very object, no copy
    part = reader.read1(30)
    assert isinstance(part, memoryview) and part.obj is second and bytes(part) == b"b" * 30
    rest = reader.read1(1000)  # never crosses into the next chunk: stops at its end
    assert bytes(rest) == b"b" * 70
    assert reader.read1() == b""


def test_write_stream_writes_every_byte_of_a_straddling_stream(tmp_path: Path) -> None:
    data = os.urandom(3 * CHUNK + 123)
    chunks = [data[i:i + CHUNK - 7] for i in range(0, len(data), CHUNK - 7)]
    target = tmp_path / "f"
    for stream in (_reader(chunks), io.BytesIO(data)):
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            directory.write_stream(fd, stream)  # type: ignore[arg-type]
        finally:
            os.close(fd)
        assert target.read_bytes() == data
