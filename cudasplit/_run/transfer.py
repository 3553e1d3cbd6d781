"""Moving a member's bytes into a file descriptor: inside the kernel where the stream can.

A stream that sits on a file descriptor (the decoder binary's pipe, a plain tar file, a file
of an unpacked directory) has a ``transfer_to(fd, size)`` method: it moves at most ``size``
bytes into ``fd`` at its offset with ``splice`` or ``copy_file_range`` and returns how many,
0 only at its end, so the bytes never become Python objects on the one thread that feeds
every write. Every other stream is read (``read1``: a view of the decoder's chunk where it can)
and written with ``os.write``.

The method is looked up on the stream's *type*, never through the instance: wrappers that
forward unknown attributes with ``__getattr__`` (a meter, a hashing wrapper) would otherwise
hand out their inner stream's ``transfer_to`` and be bypassed. A wrapper that counts or
checks what passes defines ``transfer_to`` itself (:func:`transfer` is the step it calls).
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

__all__ = ["COPY_STEP", "copy_into", "transfer", "write_all"]

# The most one step asks for. A pipe hands over at most its buffer (1 MiB) per ``splice``
# anyway; a file moves up to this much per ``copy_file_range``, and a read-and-write step
# reads this much (one decoder chunk).
COPY_STEP = 1 << 20


def transfer(stream: BinaryIO | Any, fd: int, size: int = COPY_STEP) -> int:
    """Move at most ``size`` (> 0) bytes of ``stream`` into ``fd``; 0 at the end of the
    stream. In the kernel where the stream's type has ``transfer_to``."""
    method = getattr(type(stream), "transfer_to", None)
    if method is not None:
        return int(method(stream, fd, size))
    read = getattr(stream, "read1", None) or stream.read
    data = read(size)
    write_all(fd, data)
    return len(data)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte of ``data`` is written (a write may take fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def copy_into(fd: int, stream: BinaryIO | Any) -> int:
    """Every remaining byte of ``stream`` into ``fd``; how many."""
    total = 0
    while moved := transfer(stream, fd):
        total += moved
    return total
