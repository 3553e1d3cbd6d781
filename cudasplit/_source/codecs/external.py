"""The system-tool fallback: the ``xz``/``zstd`` binaries piped, killed and reaped on close."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

from cudasplit._source.codecs.chunks import CHUNK
from cudasplit._source.codecs.detect import Codec
from cudasplit.errors import CorruptArchiveError

__all__ = ["ExternalDecompressor", "external_command", "xz_decodes_in_parallel"]

log = logging.getLogger(__name__)


def external_command(codec: Codec, jobs: int, memlimit: int | None = None) -> list[str] | None:
    """The system command line that decompresses its standard input to stdout, if the binary
    exists. ``memlimit``: xz's ``--memlimit-decompress`` (threads and buffers together: fewer
    threads where more would not fit)."""
    if codec is Codec.XZ and (exe := shutil.which("xz")):
        limit = [] if memlimit is None else [f"--memlimit-decompress={memlimit}"]
        return [exe, "-dc", f"-T{jobs}", *limit]
    if codec is Codec.ZSTD and (exe := shutil.which("zstd")):
        # -T0, as tar -I 'zstd -T0' runs it (zstd 1.5 decodes a frame on one thread anyway).
        return [exe, "-dcq", "-T0"]
    return None


# xz decodes multi-block files on several threads only from 5.4.0 (older ones take -T and
# decode on one); a builder with such an xz keeps the in-process decoder.
XZ_PARALLEL_DECODE = (5, 4)


@functools.cache
def xz_decodes_in_parallel() -> bool:
    """Whether the ``xz`` on PATH decodes multi-block files with several threads (>= 5.4)."""
    exe = shutil.which("xz")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    found = re.search(r"^xz \(XZ Utils\) (\d+)\.(\d+)", out, re.MULTILINE)
    return found is not None and (int(found[1]), int(found[2])) >= XZ_PARALLEL_DECODE


class ExternalDecompressor:
    """A decompressor process reading ``path`` on its standard input (a descriptor of its
    own: the parent's file offsets are untouched, and ``/proc/self/fd/N`` paths work) and
    writing into a pipe; killed and reaped on close.

    The pipe is read through :attr:`fd` (an :class:`~.fdreader.FdReader`: member bytes move
    into their files by ``splice``) or :meth:`chunks`; :meth:`check` is called once the pipe
    says end of file and raises for a failed decoder."""

    def __init__(self, argv: list[str], path: str, source: str) -> None:
        self._source = source
        # stderr goes to a file, not a pipe: nothing to drain, so no deadlock either way.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        archive = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._proc = subprocess.Popen(argv, stdin=archive, stdout=subprocess.PIPE,
                                          stderr=self._stderr)
        except BaseException:
            self._stderr.close()
            raise
        finally:
            os.close(archive)
        assert self._proc.stdout is not None
        self._out = self._proc.stdout
        self.fd = self._out.fileno()
        with contextlib.suppress(OSError):  # a bigger pipe means fewer context switches
            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, CHUNK)
        log.debug("started %s on %s (pid %d)", argv, path, self._proc.pid)

    def chunks(self) -> Iterator[bytes]:
        while chunk := os.read(self.fd, CHUNK):
            yield chunk
        self.check()

    def check(self) -> None:
        """After the end of its output: the decoder's exit status and stderr, or an error."""
        rc = self._proc.wait()
        self._stderr.seek(0)
        message = self._stderr.read().decode(errors="replace").strip()
        if rc != 0 or message:
            first = message.splitlines()[0] if message else f"exit status {rc}"
            raise CorruptArchiveError(f"external decompressor failed: {first}",
                                      source=self._source)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()
        self._stderr.close()
