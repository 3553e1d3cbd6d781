"""What the pipeline reads from: the Source protocol, and the head every file record carries.

A source is read once, front to back. ``Source.members()`` yields ``(Member, stream)`` pairs;
the stream (regular files only, else ``None``) is valid until the next pair is requested and
replays ``Member.head`` first, so the consumer copies it from the start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Protocol

from cudasplit._model import Member, PackageId

__all__ = ["HEAD_SIZE", "Source"]

# Bytes of a file's start a member record carries: classification reads the file's kind
# from them (ELF header, ar magic) without a second pass over the stream.
HEAD_SIZE = 4096


class Source(Protocol):
    """What the pipeline reads from."""

    description: str

    @property
    def package(self) -> PackageId: ...

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]: ...
