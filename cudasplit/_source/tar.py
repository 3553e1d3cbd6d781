"""The tarball source: one pass over a (compressed) tar stream, member by member.

Each member is checked and charged against the bomb limits before its data is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, cast

from cudasplit._model import Member, MemberType, PackageId
from cudasplit._run import ByteGrid, transfer, write_all
from cudasplit._source.base import HEAD_SIZE
from cudasplit._source.codecs import CHUNK, open_decompressed
from cudasplit._source.limits import Guard, Limits, deliverable
from cudasplit._source.names import MAX_PATH_BYTES, check_text, normalise_member_path, short_name
from cudasplit._source.tarheaders import (
    BLOCK,
    DIRECTORY,
    HARDLINK,
    REGULAR,
    SPECIAL,
    SYMLINK,
    TarFormatError,
    TarHeader,
    TarReader,
    check_checksum,
)
from cudasplit._source.topdir import TopDir, decide_top_dir, package_from_filename
from cudasplit.errors import CorruptArchiveError, LimitExceededError, UnsafeMemberError

__all__ = ["TarSource"]

# What the codec stream under the tar reader raises for damaged input besides
# CorruptArchiveError (the codecs translate their own errors; these are the stragglers).
_TAR_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, ValueError)
_MEMBER_ERRORS: tuple[type[BaseException], ...] = (TarFormatError, *_TAR_ERRORS)


class TarSource:
    """A (compressed) tarball, streamed in one pass."""

    def __init__(self, path: Path, *, package: PackageId | None = None, jobs: int = 1,
                 limits: Limits | None = None, strip_components: int | None = None,
                 memory_limit: int | None = None) -> None:
        self.strip_components = strip_components
        self.memory_limit = memory_limit
        self.keep_alive: object = None
        self.path = path
        self.description = str(path)
        self.jobs = jobs
        self._override = package
        self._package: PackageId | None = package
        self.last_good_member: str | None = None
        self.limits = limits or Limits()
        self._guard = Guard(self.limits, self.description, self._compressed_size)
        # member path -> size, to charge hard links; empty files are left out (a million
        # empty members must not cost a million entries)
        self._sizes: dict[str, int] = {}
        # Said about the archive as a whole, for the run's report (data after the end).
        self.warnings: list[str] = []
        # The decoder, once started (start() or the first members()), and its progress meter.
        self._decoding: contextlib.ExitStack | None = None
        self._stream: BinaryIO | None = None
        self._on_bytes: Callable[[int], None] | None = None
        # Called once the decoder has delivered its last byte (a batch hands its cores on).
        self.on_decoded: Callable[[], None] | None = None

    @property
    def package(self) -> PackageId:
        """Known once the first member was read (or from the file name / override)."""
        if self._package is None:
            return package_from_filename(self.path)
        return self._package

    def start(self) -> None:
        """Start decoding now (the decoder threads, or the ``xz``/``zstd`` child), before
        :meth:`members` is asked: a caller with work left before the first member (loading the
        rest of a split) does it while the archive decodes. Idempotent; :meth:`close` stops
        a decoder that :meth:`members` never took over.

        Raises:
            SourceError: the file cannot be opened or its structure is damaged (as
                :meth:`members` would on its first member).
        """
        if self._decoding is not None:
            return
        decoding = contextlib.ExitStack()
        with decoding:
            self._stream = decoding.enter_context(open_decompressed(
                self.path, jobs=self.jobs, memory_limit=self.memory_limit,
                deliverable=deliverable(self.limits, self._compressed_size())))
            self._decoding = decoding.pop_all()
        self._attach_meter()

    def meter(self, on_bytes: Callable[[int], None] | None) -> None:
        """Report the tar bytes read so far (members' data, skipped data and headers alike)
        to ``on_bytes``, every :data:`~cudasplit._run.STEP` bytes, from now on."""
        self._on_bytes = on_bytes
        self._attach_meter()

    def _attach_meter(self) -> None:
        grid = getattr(self._stream, "grid", False)
        if grid is not False:
            self._stream.grid = (  # type: ignore[union-attr]
                None if self._on_bytes is None else ByteGrid(self._on_bytes))

    def close(self) -> None:
        """Stop the decoder (threads stopped, child killed and reaped); idempotent."""
        decoding, self._decoding, self._stream = self._decoding, None, None
        if decoding is not None:
            decoding.close()

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        self.start()
        decoding, stream = self._decoding, self._stream
        assert decoding is not None and stream is not None
        try:
            with decoding:
                reader = TarReader(stream, self._charge_extended)
                yield from self._iterate(reader)
                self.warnings += after_end(stream, self._guard, self._located)
                if self.on_decoded is not None:
                    self.on_decoded()
        finally:
            if self._decoding is decoding:  # done or abandoned: a later members() starts anew
                self._decoding = self._stream = None

    def _iterate(self, reader: TarReader) -> Iterator[tuple[Member, BinaryIO | None]]:
        top = TopDir()
        while True:
            info = self._next(reader)
            if info is None:
                return
            self._guard.count_member(info.name)
            raw_path = normalise_member_path(info.name, source=self.description)
            self._charge(info, raw_path)
            if not top.decided:
                self._decide_top(top, raw_path)
            path = top.strip(raw_path, source=self.description)
            if path:
                yield self._member(reader, info, path, top)
            self.last_good_member = info.name

    def _next(self, reader: TarReader) -> TarHeader | None:
        try:
            return reader.next()
        except CorruptArchiveError as exc:  # from the codec, while skipping data
            raise self._located(exc) from exc
        except TarFormatError as exc:
            if exc.limit:
                raise LimitExceededError(f"{exc}{self._after()} (header bomb guard)",
                                         source=self.description) from exc
            raise CorruptArchiveError(f"corrupt or truncated tar data{self._after()} ({exc})",
                                      source=self.description) from exc
        except _TAR_ERRORS as exc:
            raise CorruptArchiveError(f"corrupt or truncated tar data{self._after()} ({exc})",
                                      source=self.description) from exc

    def _after(self) -> str:
        return (f" after member {self.last_good_member!r}" if self.last_good_member
                else " before the first member")

    def _located(self, exc: CorruptArchiveError) -> CorruptArchiveError:
        """The codec's error, naming the last good member (the codec cannot know it)."""
        message = str(exc).removeprefix(f"{self.description}: ")
        return CorruptArchiveError(f"{message}{self._after()}", source=self.description)

    def _charge_extended(self, size: int) -> None:
        """pax and GNU long-name headers expand in memory: they count like member data."""
        self._guard.charge(size, self.last_good_member or "(extended header)")

    def _charge(self, info: TarHeader, path: str) -> None:
        """Count a member against the bomb limits before any of its data is read."""
        if info.sparse_size is not None:
            self._guard.charge(info.sparse_size, info.name)
            raise UnsafeMemberError("GNU sparse file (not supported: no redistributable "
                                    "uses them)", source=self.description,
                                    member=short_name(info.name))
        if info.type == REGULAR:
            size = info.size
            if size:
                self._sizes[path] = size
        elif info.type == HARDLINK:
            size = self._sizes.get(normalise_member_path(info.linkname,
                                                         source=self.description), 0)
        else:
            return
        self._guard.charge(size, info.name)

    def _compressed_size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _decide_top(self, top: TopDir, first: str) -> None:
        top.decided = True
        top.name, top.count, parsed = decide_top_dir(
            first, strip_components=self.strip_components, override=self._override,
            source=self.description)
        if parsed is not None and self._override is None:
            self._package = parsed

    def _member(
        self, reader: TarReader, info: TarHeader, path: str, top: TopDir
    ) -> tuple[Member, BinaryIO | None]:
        mode = info.mode
        if info.type == REGULAR:
            raw = cast(BinaryIO, reader.data(info.size))
            head = self._read_head(raw, info.name)
            member = Member(path, MemberType.FILE, mode, info.size, None, info.mtime, head)
            guarded = _Guarded(raw, self, info.name)
            return member, cast(BinaryIO, _Replay(head, cast(BinaryIO, guarded)))
        if info.type == DIRECTORY:
            return Member(path, MemberType.DIR, mode, 0, None, info.mtime), None
        if info.type == SYMLINK:
            check_text(info.linkname, source=self.description, what="link target",
                       member=info.name)
            if len(info.linkname.encode()) > MAX_PATH_BYTES:  # resolving it costs O(length^2)
                raise UnsafeMemberError("link target too long", source=self.description,
                                        member=short_name(info.name))
            return Member(path, MemberType.SYMLINK, mode, 0, info.linkname, info.mtime), None
        if info.type == HARDLINK:
            target = normalise_member_path(info.linkname, source=self.description)
            stripped = top.strip(target, source=self.description) or ""
            return Member(path, MemberType.HARDLINK, mode, 0, stripped, info.mtime), None
        if info.type in SPECIAL:
            raise UnsafeMemberError("device node, FIFO or other special file",
                                    source=self.description, member=short_name(info.name))
        raise UnsafeMemberError(f"unsupported member type {info.type!r}",
                                source=self.description, member=short_name(info.name))

    def _read_head(self, raw: BinaryIO, name: str) -> bytes:
        try:
            return raw.read(HEAD_SIZE)
        except CorruptArchiveError as exc:
            raise _in_member(exc, self.description, name) from exc
        except _MEMBER_ERRORS as exc:
            raise CorruptArchiveError(f"truncated member data ({exc})", source=self.description,
                                      member=short_name(name)) from exc


class _Guarded:
    """Member stream that turns truncation into CorruptArchiveError naming the member."""

    def __init__(self, raw: BinaryIO, source: TarSource, name: str) -> None:
        self._raw = raw
        self._source = source
        self._name = name

    def read(self, n: int = -1) -> bytes:
        return self._guard(self._raw.read, n)  # type: ignore[return-value]

    def read1(self, n: int = -1) -> bytes | memoryview:
        """As ``read``, at most ``n`` bytes and without a copy where possible."""
        return self._guard(self._raw.read1, n)  # type: ignore[attr-defined]

    def transfer_to(self, fd: int, n: int) -> int:
        """As ``read1``, the bytes moved into ``fd``. An ``OSError`` is the writer's (a full
        disk): it passes untranslated, for the sink to name its file."""
        try:
            return transfer(self._raw, fd, n)
        except CorruptArchiveError as exc:
            raise _in_member(exc, self._source.description, self._name) from exc
        except (TarFormatError, EOFError, ValueError) as exc:
            raise CorruptArchiveError(f"truncated member data ({exc})",
                                      source=self._source.description,
                                      member=short_name(self._name)) from exc

    def _guard(self, read: Callable[[int], bytes | memoryview], n: int) -> bytes | memoryview:
        try:
            return read(n)
        except CorruptArchiveError as exc:
            raise _in_member(exc, self._source.description, self._name) from exc
        except _MEMBER_ERRORS as exc:
            raise CorruptArchiveError(f"truncated member data ({exc})",
                                      source=self._source.description,
                                      member=short_name(self._name)) from exc


def after_end(stream: BinaryIO, guard: Guard,
              located: Callable[[CorruptArchiveError], CorruptArchiveError]) -> list[str]:
    """Read the decoded stream to its end after the end-of-archive marker; a warning if
    anything but null bytes is there (``located`` names the last member in errors).

    This verifies the compressed data to its last byte (a damaged tail is an error, as in
    ``tar``), and tells members or other data there apart from the null padding ``tar``
    writes: GNU tar ignores them silently; we ignore them too, but say so. The bytes count
    against the bomb guard like member data.
    """
    ignored, first, what = 0, None, ""
    offset = 0
    try:
        while chunk := stream.read(CHUNK):
            guard.charge(len(chunk), "(after the end-of-archive marker)")
            if first is None and chunk.count(0) != len(chunk):
                at = len(chunk) - len(chunk.lstrip(b"\0"))  # blocks align to chunks
                first, ignored = offset + at, len(chunk) - at
                what = _header_name(chunk[at - at % BLOCK:])
            elif first is not None:
                ignored += len(chunk)
            offset += len(chunk)
    except CorruptArchiveError as exc:
        raise located(exc) from exc
    except _TAR_ERRORS as exc:
        raise located(CorruptArchiveError(f"corrupt data after the end-of-archive marker "
                                          f"({exc})", source=guard.source)) from exc
    if first is None:
        return []
    return [f"{ignored} bytes after the tar end-of-archive marker ignored "
            f"(starting with {what}); tar ignores them too"]


def _header_name(block: bytes) -> str:
    """How to name what starts ``block``: a tar member's name, or plain "other data"."""
    block = block[:BLOCK]
    try:
        if len(block) < BLOCK:
            raise TarFormatError("short")
        check_checksum(block)
    except (TarFormatError, ValueError):
        return "data that is not a tar header"
    name = block[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
    return f"member {short_name(name)!r}"


def _in_member(exc: CorruptArchiveError, source: str, name: str) -> CorruptArchiveError:
    """A codec error raised while a member's data was read: name that member."""
    if exc.member is not None:
        return exc
    message = str(exc).removeprefix(f"{source}: ")
    return CorruptArchiveError(message, source=source, member=short_name(name))


class _Replay:
    """A stream that returns ``head`` and then the rest of ``raw`` (the head was peeked)."""

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head = memoryview(head)
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0 or n >= len(self._head):
                out = bytes(self._head)
                self._head = memoryview(b"")
                rest = self._raw.read(-1 if n < 0 else n - len(out))
                return out + rest
            out = bytes(self._head[:n])
            self._head = self._head[n:]
            return out
        return self._raw.read(n)

    def read1(self, n: int = -1) -> bytes | memoryview:
        """The peeked head first (as ``read``), then the raw stream's ``read1``."""
        if self._head:
            return self.read(n)
        return self._raw.read1(n)  # type: ignore[attr-defined, no-any-return]

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def transfer_to(self, fd: int, n: int) -> int:
        """The peeked head written first, then the raw stream's bytes moved (in the kernel
        where it can)."""
        if self._head:
            head = self._head[:n]
            self._head = self._head[len(head):]
            write_all(fd, head)
            return len(head)
        return transfer(self._raw, fd, n)
