"""Reading written files in a process of its own, beside the split that writes them.

What a split reads in its one pass beyond the bytes it writes (GPU code and glibc floors:
:func:`~cudasplit._elf.read.gpucode.read_inside`; the names a library may ``dlopen``:
:func:`~cudasplit._elf.read.dlopen.scan_dlopen`) is Python work: struct unpacking, a regex
over a library's read-only data. On a thread of the split it holds the interpreter lock while
the thread that moves member bytes waits for it, and the decoder's pipe fills up (a zstd split
of libcublas lost 15-20 % to it). :class:`ReaderProcess` runs those reads in a child
interpreter instead: they overlap the decoding for real, and the split's threads only wait in
the kernel.

The child reads each file from the page cache right after (or while) the split writes it: a
request names the staged file, the size it will have and whether it may be read as it grows
(a static archive: each member's headers as soon as they are there). It learns that a file is
complete (perhaps shorter than announced) from a ``written`` message, and stops with its
parent: end of its standard input, ``PR_SET_PDEATHSIG``, or its parent gone while it waits.

The protocol is pickles with a 4-byte length, between this module's two ends only: requests
``("read", id, path, size, grows, want_inside, want_dlopen)`` and ``("written", path, size)``;
answers ``(id, Inside | None, dlopen targets, error | None)``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cudasplit._elf.read.dlopen import DlopenTarget, scan_dlopen
from cudasplit._elf.read.gpucode import Inside, read_inside
from cudasplit._elf.read.info import read_elf_info
from cudasplit.errors import ElfError

__all__ = ["FileRead", "ReaderProcess", "read_written", "serve"]

_LENGTH = struct.Struct(">I")
_MAX_MESSAGE = 64 << 20      # an answer is a summary (capped rows); a request a path
_POLL = 0.001                # how often a read waits for a growing file to grow (seconds)


@dataclass(frozen=True, slots=True)
class FileRead:
    """What the reading process found in one file.

    Attributes:
        inside: GPU code and version floors (``None``: not asked, or neither ELF nor archive).
        dlopen: the names it may ``dlopen`` (when asked and it is an ELF file).
        error: why it could not be read at all (``None``: it could).
        lost: the reading process ended, or could not start, before it read this file (the
            caller may read it itself).
    """

    inside: Inside | None = None
    dlopen: tuple[DlopenTarget, ...] = ()
    error: str | None = None
    lost: bool = False     # the process ended (or never ran) before it read the file


def read_written(path: str, *, size: int | None = None, wait: Callable[[int], None] | None = None,
                 want_inside: bool = True, want_dlopen: bool = True) -> FileRead:
    """Read one written file (in whichever process runs this): its inside and dlopen names.
    ``size``/``wait``: a file still growing (see :func:`read_inside`)."""
    try:
        inside = read_inside(path, size=size, wait=wait) if want_inside else None
        dlopen: tuple[DlopenTarget, ...] = ()
        if want_dlopen:
            if wait is not None and size is not None:
                wait(size)   # the scan reads section headers, at the end of the file
            dlopen = _dlopen_of(path)
    except OSError as exc:
        return FileRead(error=exc.strerror or str(exc))
    return FileRead(inside, dlopen)


def _dlopen_of(path: str) -> tuple[DlopenTarget, ...]:
    # The scan is a report, never a reason to fail: section headers the loader ignores may
    # be damaged in a file that loads fine.
    try:
        info = read_elf_info(path)
        return scan_dlopen(path, info) if info is not None else ()
    except ElfError:
        return ()


# -- the parent's end -------------------------------------------------------------------------


class ReaderProcess:
    """A child interpreter reading written files on request (started on the first one)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, Future[FileRead]] = {}
        self._next = 0
        self._failed: str | None = None
        self._closed = False
        self._starter: threading.Thread | None = None
        self._queued: list[bytes] = []       # sent once the child runs
        self._replies: threading.Thread | None = None

    def submit(self, path: str, *, size: int, grows: bool, want_inside: bool,
               want_dlopen: bool) -> Future[FileRead]:
        """Read ``path`` once it is written (as it grows when ``grows``: it will hold
        ``size`` bytes); the future's value is the :class:`FileRead`. Never blocks: the
        child is started on a thread of its own (its ``fork`` and ``exec`` cost the caller
        nothing) and takes the requests made meanwhile once it runs."""
        future: Future[FileRead] = Future()
        with self._lock:
            if self._failed is None:
                ident = self._next
                self._next += 1
                self._pending[ident] = future
                self._send_locked(("read", ident, path, size, grows, want_inside, want_dlopen))
                if self._starter is None:
                    self._starter = threading.Thread(target=self._start,
                                                     name="cudasplit-reader-start", daemon=True)
                    self._starter.start()
                return future
            future.set_result(FileRead(error=self._failed, lost=True))
        return future

    def written(self, path: str, size: int) -> None:
        """``path`` is complete at ``size`` bytes (a read waiting for more stops waiting)."""
        with self._lock:
            if self._failed is None:
                self._send_locked(("written", path, size))

    def close(self) -> None:
        """Stop the child (it is killed: a read it is in the middle of is not needed) and
        fail what was not answered."""
        with self._lock:
            self._closed = True
            starter = self._starter
        if starter is not None and starter is not threading.current_thread():
            starter.join()
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
            self._fail_locked("the split ended before the file was read")
        if self._replies is not None and self._replies is not threading.current_thread():
            self._replies.join()
            self._replies = None

    # -- internals ------------------------------------------------------------------------

    def _start(self) -> None:
        """The starter thread: the child, then the requests queued meanwhile."""
        here = str(Path(__file__).resolve().parents[3])   # the directory holding cudasplit
        path = [here, *(p for p in sys.path if p and p != here)]
        code = (f"import sys; sys.path[:0] = {path!r}; "
                f"from cudasplit._elf.read.worker import serve; serve({os.getpid()})")
        try:
            # -S: sys.path is the parent's (the site step would only cost start-up time).
            proc = subprocess.Popen([sys.executable, "-S", "-c", code],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    close_fds=True)
        except OSError as exc:
            with self._lock:
                self._fail_locked(f"the reading process cannot run ({exc})")
            return
        with self._lock:
            if self._closed:
                proc.kill()
                proc.wait()
                for stream in (proc.stdin, proc.stdout):
                    if stream is not None:
                        stream.close()
                return
            self._proc = proc
            self._replies = threading.Thread(target=self._read_replies, args=(proc,),
                                             name="cudasplit-reader-replies", daemon=True)
            self._replies.start()
            queued, self._queued = self._queued, []
            self._write_locked(b"".join(queued))

    def _send_locked(self, message: tuple[Any, ...]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        framed = _LENGTH.pack(len(data)) + data
        if self._proc is None:
            self._queued.append(framed)
        else:
            self._write_locked(framed)

    def _write_locked(self, data: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except OSError as exc:
            self._fail_locked(f"the reading process ended ({exc})")

    def _read_replies(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        while True:
            try:
                message = _receive(proc.stdout)
            except (OSError, ValueError, EOFError, pickle.UnpicklingError):
                message = None
            if message is None:
                with self._lock:
                    self._fail_locked("the reading process ended before it answered")
                return
            ident, inside, dlopen, error = message
            with self._lock:
                future = self._pending.pop(ident, None)
            if future is not None:
                future.set_result(FileRead(inside, dlopen, error))

    def _fail_locked(self, why: str) -> None:
        self._failed = self._failed or why
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result(FileRead(error=why, lost=True))


def _receive(stream: IO[bytes]) -> Any:
    head = _read_exact(stream, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > _MAX_MESSAGE:
        raise ValueError(f"message of {length} bytes")
    body = _read_exact(stream, length)
    if body is None:
        raise EOFError("message cut short")
    return pickle.loads(body)


def _read_exact(stream: IO[bytes], size: int) -> bytes | None:
    parts, left = [], size
    while left:
        piece = stream.read(left)
        if not piece:
            return None
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


# -- the child's end --------------------------------------------------------------------------


class _Written:
    """What the parent said is complete (path -> final size), and whether it is gone."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.sizes: dict[str, int] = {}
        self.gone = False
        self.changed = threading.Condition()

    def waiter(self, path: str) -> Callable[[int], None]:
        """``wait(offset)`` for :func:`read_inside`: returns once ``path`` holds ``offset``
        bytes or is complete; OSError when it will never hold them."""
        def wait(offset: int) -> None:
            while True:
                final = self.sizes.get(path)
                if final is not None:
                    if offset > final:
                        raise OSError(f"the file ended at {final} bytes")
                    return
                with contextlib.suppress(OSError):
                    if os.stat(path).st_size >= offset:
                        return
                if self.gone or os.getppid() != self.parent:
                    raise OSError("the split ended before the file was written")
                with self.changed:
                    self.changed.wait(_POLL)
        return wait


def _listen(written: _Written, jobs: list[tuple[Any, ...]], ready: threading.Condition) -> None:
    stdin = sys.stdin.buffer
    while True:
        try:
            message = _receive(stdin)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):
            message = None
        if message is None:
            with written.changed:
                written.gone = True
                written.changed.notify_all()
            with ready:
                jobs.append(("quit",))
                ready.notify()
            return
        if message[0] == "written":
            with written.changed:
                written.sizes[message[1]] = message[2]
                written.changed.notify_all()
        else:
            with ready:
                jobs.append(message)
                ready.notify()


def serve(parent: int) -> None:
    """The child: answer read requests until the parent closes its end."""
    _die_with_parent()
    if os.getppid() != parent:   # it died before the signal was asked for
        return
    written = _Written(parent)
    jobs: list[tuple[Any, ...]] = []
    ready = threading.Condition()
    threading.Thread(target=_listen, args=(written, jobs, ready), daemon=True).start()
    out = sys.stdout.buffer
    while True:
        with ready:
            while not jobs:
                ready.wait()
            job = jobs.pop(0)
        if job[0] != "read":
            return
        _, ident, path, size, grows, want_inside, want_dlopen = job
        wait = written.waiter(path)
        try:
            wait(1 if grows else size)   # it exists (and is complete, unless it may grow)
            found = read_written(path, size=size if grows else None,
                                 wait=wait if grows else None,
                                 want_inside=want_inside, want_dlopen=want_dlopen)
        except OSError as exc:
            found = FileRead(error=str(exc))
        reply = pickle.dumps((ident, found.inside, found.dlopen, found.error),
                             protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_LENGTH.pack(len(reply)) + reply)
        out.flush()


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the kernel kills this process when its parent dies (a SIGKILLed
    split leaves no reader behind, even one waiting for a file to grow)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        import signal
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # 1 = PR_SET_PDEATHSIG
