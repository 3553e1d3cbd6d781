"""Which decoder decodes a tarball: the system binary in its own process, or a library here.

This is the one place the choice is made; ``benchmarks/bench_scaling.py --only choices`` and
``--only decode`` measure every alternative it passes over, in one run (benchmarks/README.md
§19 has the tables, from the 2-core VM and the 16-core GPU host). The rule:

================  ==================================  =========================================
codec             decoder                             why (measured)
================  ==================================  =========================================
plain tar         none: the file itself               members move with ``copy_file_range``
multi-block xz,   ``xz -dc -TN`` (a pipe, ``splice``  N Python threads driving liblzma contend
``-j`` above 1    into the files)                     for the interpreter: on 16 cores the
                                                      library's split took 1.07x the binary's
multi-block xz    the library, in threads             an xz older than 5.4 takes ``-T`` and
(old ``xz``)                                          decodes on one thread
single-block xz,  the library (liblzma), on a thread  one thread either way; the pipe's hop
multi-block -j1                                       costs what the process saves (host:
                                                      2.20 s against 2.32 at -j16; VM equal)
zstd              the library (``zstandard``), on a   alone it decodes as fast as the binary
                  thread                              (quiet host: 0.23 s against 0.27 for a
                                                      91 MB frame); the binary's pipe hop cost
                                                      more: 1.79 s against 2.04 on the host,
                                                      0.96 against 1.06 on the VM
gzip, bzip2       the library (zlib, libbz2)          no NVIDIA archive uses them
``--memory-limit``  the library, when below one xz     it streams a block through a window
                  thread's dictionary                 within any limit; ``xz`` would refuse
no binary         the library                         always correct
================  ==================================  =========================================

``external=True`` / ``False`` (tests, benchmarks) overrides the rule; decoding in the
caller's thread (``background=False``) is always in-process.
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
    if (codec is Codec.XZ and blocks > 1 and jobs > 1 and xz_decodes_in_parallel()
            and (memory_limit is None or memory_limit >= one_thread_needs)):
        return Decoder.BINARY
    return Decoder.IN_PROCESS
