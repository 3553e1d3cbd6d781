"""Which decoder decodes a tarball: the system binary in its own process, or a library here.

This is the one place the choice is made; ``benchmarks/bench_scaling.py --only choices``
measures every alternative it passes over in one run (benchmarks/README.md §16 has the tables,
from the 2-core VM and the 16-core GPU host). The rule:

============  =====================================  =============================================
codec         decoder                                why
============  =====================================  =============================================
plain tar     none: the file itself                  members move with ``copy_file_range``
zstd          ``zstd -dc`` (a pipe)                  the ``zstandard`` wheel's libzstd is built
                                                     without zstd's assembly Huffman decoder (C
                                                     loops only, GCC 10): 1.2-1.4x slower than the
                                                     binary on CUDA libraries, on both machines
xz            ``xz -dc -TN`` (a pipe)                the same liblzma as the library, but in a
                                                     process of its own: it decodes beside the
                                                     split instead of sharing its interpreter, and
                                                     its pipe is what ``splice`` moves into files
xz, N > 1     in-process threads, when the ``xz`` on  an older xz takes ``-T`` and decodes on one
multi-block   PATH is older than 5.4                 thread
xz            in-process, when ``--memory-limit`` is  the library streams a block through a window
              below one thread's dictionary           within any limit; ``xz`` would refuse
gzip, bzip2   in-process (zlib, libbz2)              no NVIDIA archive uses them; ``gzip``'s own
                                                     inflate is slower than zlib
no binary     in-process                             always correct, never faster
============  =====================================  =============================================

``external=True`` / ``False`` (tests, benchmarks, ``--decoder``) overrides the rule; decoding
in the caller's thread (``background=False``) is always in-process.
"""

from __future__ import annotations

import enum
import shutil

from cudasplit._source.codecs.detect import Codec
from cudasplit._source.codecs.external import xz_decodes_in_parallel

__all__ = ["Decoder", "choose_decoder"]


class Decoder(enum.StrEnum):
    BINARY = "binary"          # the system tool, its output a pipe
    IN_PROCESS = "in-process"  # the library, on threads of this process
    FILE = "file"              # plain tar: the file is the stream


_BINARY_OF = {Codec.XZ: "xz", Codec.ZSTD: "zstd"}


def choose_decoder(codec: Codec, *, jobs: int, blocks: int = 1,
                   external: bool | None = None, background: bool | None = None,
                   memory_limit: int | None = None, one_thread_needs: int = 0) -> Decoder:
    """The decoder for ``codec`` (see the module's table).

    ``blocks``: the xz blocks the index lists; ``one_thread_needs``: the memory one ``xz``
    thread needs (its dictionary and buffers), compared with ``memory_limit``.
    """
    if codec is Codec.NONE:
        return Decoder.FILE
    binary = _BINARY_OF.get(codec)
    if background is False or external is False or binary is None:
        return Decoder.IN_PROCESS
    if shutil.which(binary) is None:
        return Decoder.IN_PROCESS
    if external:
        return Decoder.BINARY
    if codec is Codec.XZ:
        if blocks > 1 and jobs > 1 and not xz_decodes_in_parallel():
            return Decoder.IN_PROCESS
        if memory_limit is not None and memory_limit < one_thread_needs:
            return Decoder.IN_PROCESS
    return Decoder.BINARY
