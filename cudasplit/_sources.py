"""Sources: archives and unpacked directories -> immutable member records plus content streams.

A source is read once, front to back. ``Source.members()`` yields ``(Member, stream)`` pairs;
the stream (regular files only, else ``None``) is valid until the next pair is requested and
replays ``Member.head`` first, so the consumer copies it from the start.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol, cast

from ._codecs import open_decompressed
from ._model import Member, MemberType, PackageId
from ._tarheaders import (
    DIRECTORY,
    HARDLINK,
    REGULAR,
    SPECIAL,
    SYMLINK,
    TarFormatError,
    TarHeader,
    TarReader,
)
from .errors import CorruptArchiveError, LimitExceededError, SourceError, UnsafeMemberError

HEAD_SIZE = 4096
TAR_BUFFER = 1 << 20

# Names a genuine redistributable never comes near (its longest paths are ~200 bytes, ~12
# levels deep). Refusing beyond them keeps hostile names from reaching the filesystem as
# ENAMETOOLONG or from recursing in ``Path.mkdir(parents=True)``.
MAX_COMPONENT_BYTES = 255   # NAME_MAX on Linux
MAX_PATH_BYTES = 1024
MAX_DEPTH = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Decompression bomb guard defaults (``--max-size`` / ``--max-ratio`` raise them). The ratio
# only counts once the archive has expanded past ``RATIO_GRACE``: tiny archives of small
# files have high ratios without being dangerous.
DEFAULT_MAX_TOTAL_BYTES = 64 << 30
DEFAULT_MAX_RATIO = 200.0
RATIO_GRACE = 16 << 20
# Member count guard (``--max-members``). The largest redistributables hold a few thousand
# members (cuda_cccl 13.0: 1,845 entries; nsight's Qt and Python trees fewer than 10,000);
# every member costs a report record, a file and ~1.1 KB of memory in the pipeline, so a
# million empty ones (3.5 MB of .tar.zst) is a bomb of its own.
DEFAULT_MAX_MEMBERS = 100_000

# What the codec stream under the tar reader raises for damaged input besides
# CorruptArchiveError (the codecs translate their own errors; these are the stragglers).
_TAR_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, ValueError)
_MEMBER_ERRORS: tuple[type[BaseException], ...] = (TarFormatError, *_TAR_ERRORS)

PLATFORMS = (
    "linux-x86_64", "linux-sbsa", "linux-aarch64", "linux-ppc64le", "windows-x86_64",
    "linux-all", "source",
)
_TOP_DIR = re.compile(
    r"^(?P<name>.+?)-(?P<platform>" + "|".join(re.escape(p) for p in PLATFORMS) + r")"
    r"-(?P<version>[0-9][^-/]*?)(?:_cuda(?P<cuda>\d+(?:\.\d+)?))?-archive$"
)


_TENSORRT_TOP_DIR = re.compile(r"^TensorRT-([0-9][0-9.]*[0-9])$")


def parse_top_dir(name: str) -> PackageId | None:
    """``cuda_cudart-linux-x86_64-12.9.79-archive`` -> PackageId; None when it does not fit.

    TensorRT's own tarballs use ``TensorRT-<version>`` instead.
    """
    tensorrt = _TENSORRT_TOP_DIR.match(name)
    if tensorrt is not None:
        return PackageId("tensorrt", None, tensorrt[1])
    match = _TOP_DIR.match(name)
    if match is None:
        return None
    return PackageId(match["name"], match["platform"], match["version"], match["cuda"])


def package_from_filename(path: Path) -> PackageId:
    """Fallback identity for archives without an NVIDIA-style top directory."""
    name = path.name
    for suffix in (".tar.xz", ".tar.gz", ".tgz", ".tar.bz2", ".tar.zst", ".tar", ".txz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return parse_top_dir(name) or PackageId(name)


def normalise_member_path(raw: str, *, source: str) -> str:
    """Archive path -> safe relative POSIX path, or UnsafeMemberError.

    Absolute paths and ``..`` components are refused rather than "fixed": an archive that
    contains them is not a genuine NVIDIA redistributable, and guessing would hide an attack.
    """
    check_text(raw, source=source, what="name")
    if raw.startswith("/"):
        raise UnsafeMemberError("absolute path", source=source, member=raw)
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeMemberError("path climbs with '..'", source=source, member=raw)
    if len(parts) > MAX_DEPTH:
        raise UnsafeMemberError(f"path too deep (more than {MAX_DEPTH} levels)", source=source,
                                member=_short(raw))
    if (len(raw.encode()) > MAX_PATH_BYTES
            or any(len(p.encode()) > MAX_COMPONENT_BYTES for p in parts)):
        raise UnsafeMemberError("name too long", source=source, member=_short(raw))
    return "/".join(parts)


def check_text(raw: str, *, source: str, what: str, member: str | None = None) -> None:
    """Refuse a name or link target with NUL, control characters or invalid UTF-8.

    tarfile decodes names with ``surrogateescape``; such names cannot be printed or put in
    the JSON report faithfully, and a newline would forge lines in every line-based listing.
    """
    shown = _short(member if member is not None else raw)
    if "\x00" in raw:
        raise UnsafeMemberError(f"{what} contains a NUL byte", source=source, member=shown)
    if _CONTROL.search(raw):
        raise UnsafeMemberError(f"{what} contains a control character", source=source,
                                member=shown)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeMemberError(f"{what} is not valid UTF-8", source=source,
                                member=shown) from None


def _short(name: str) -> str:
    """Keep error messages one short line even for 100 KB names."""
    return name if len(name) <= 120 else name[:100] + "..." + name[-16:]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bomb guards: bytes the members may expand to (absolute and per input byte), and how
    many members a source may have (archives and directories).

    Sizes are charged from the headers, before a member's data is read, so nothing of a
    member that would cross a limit is written. Hard links count again (they may be copied
    between outputs), GNU sparse members count with their expanded size (and are then
    refused), pax and GNU long-name headers count with their size.
    """

    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO
    max_members: int = DEFAULT_MAX_MEMBERS


class Source(Protocol):
    """What the pipeline reads from."""

    description: str

    @property
    def package(self) -> PackageId: ...

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]: ...


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

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


TOP_DIR_HELP = ("name the package with --package PNAME and say how many leading directories "
                "to drop with --strip-components N (0: the members are not under a top "
                "directory)")


@dataclass
class _TopDir:
    """Top-directory stripping state, decided by the first member.

    Either the NVIDIA top directory ``name`` (parsed from the first member), or an explicit
    ``--strip-components`` count. Anything else is refused: an archive without the expected
    top directory would otherwise be split with nothing stripped and the wrong rules.
    """

    name: str | None = None
    decided: bool = False
    count: int = 0

    def strip(self, path: str, *, source: str) -> str | None:
        """The path below the top dir; None for the top dir itself."""
        if self.count:
            parts = path.split("/", self.count)
            return parts[self.count] if len(parts) > self.count else None
        if self.name is None:
            return path
        if path == self.name:
            return None
        prefix = self.name + "/"
        if not path.startswith(prefix):
            raise SourceError(f"member outside the top directory {self.name!r} (two top "
                              f"directories: not a single redistributable); {TOP_DIR_HELP}",
                              source=source, member=path)
        return path[len(prefix):]


def decide_top_dir(first: str, *, strip_components: int | None, override: PackageId | None,
                   source: str) -> tuple[str | None, int, PackageId | None]:
    """From the first member: (top dir to strip, component count to strip, parsed identity).

    Refuses an archive whose first component is not ``<pname>-<platform>-<version>-archive``
    (or TensorRT's form) unless ``--strip-components`` says what to strip.
    """
    if strip_components is not None:
        if override is None:
            raise SourceError(f"--strip-components needs --package: {TOP_DIR_HELP}",
                              source=source)
        return None, strip_components, None
    first_component = first.split("/", 1)[0]
    parsed = parse_top_dir(first_component)
    if parsed is None:
        raise SourceError(f"no <pname>-<platform>-<version>-archive top directory (first "
                          f"member {first!r}); {TOP_DIR_HELP}", source=source)
    return first_component, 0, parsed


class TarSource:
    """A (compressed) tarball, streamed in one pass."""

    def __init__(self, path: Path, *, package: PackageId | None = None, jobs: int = 1,
                 limits: Limits | None = None, strip_components: int | None = None) -> None:
        self.strip_components = strip_components
        self.keep_alive: object = None
        self.path = path
        self.description = str(path)
        self.jobs = jobs
        self._override = package
        self._package: PackageId | None = package
        self.last_good_member: str | None = None
        self.limits = limits or Limits()
        self._guard = _Guard(self.limits, self.description, self._compressed_size)
        # member path -> size, to charge hard links; empty files are left out (a million
        # empty members must not cost a million entries)
        self._sizes: dict[str, int] = {}

    @property
    def package(self) -> PackageId:
        """Known once the first member was read (or from the file name / override)."""
        if self._package is None:
            return package_from_filename(self.path)
        return self._package

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        with open_decompressed(self.path, jobs=self.jobs) as stream:
            reader = TarReader(stream, self._charge_extended)
            yield from self._iterate(reader)

    def _iterate(self, reader: TarReader) -> Iterator[tuple[Member, BinaryIO | None]]:
        top = _TopDir()
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
                                    member=_short(info.name))
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

    def _decide_top(self, top: _TopDir, first: str) -> None:
        top.decided = True
        top.name, top.count, parsed = decide_top_dir(
            first, strip_components=self.strip_components, override=self._override,
            source=self.description)
        if parsed is not None and self._override is None:
            self._package = parsed

    def _member(
        self, reader: TarReader, info: TarHeader, path: str, top: _TopDir
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
                                        member=_short(info.name))
            return Member(path, MemberType.SYMLINK, mode, 0, info.linkname, info.mtime), None
        if info.type == HARDLINK:
            target = normalise_member_path(info.linkname, source=self.description)
            stripped = top.strip(target, source=self.description) or ""
            return Member(path, MemberType.HARDLINK, mode, 0, stripped, info.mtime), None
        if info.type in SPECIAL:
            raise UnsafeMemberError("device node, FIFO or other special file",
                                    source=self.description, member=_short(info.name))
        raise UnsafeMemberError(f"unsupported member type {info.type!r}",
                                source=self.description, member=_short(info.name))

    def _read_head(self, raw: BinaryIO, name: str) -> bytes:
        try:
            return raw.read(HEAD_SIZE)
        except CorruptArchiveError as exc:
            raise _in_member(exc, self.description, name) from exc
        except _MEMBER_ERRORS as exc:
            raise CorruptArchiveError(f"truncated member data ({exc})", source=self.description,
                                      member=_short(name)) from exc


class _Guard:
    """The bomb limits of one source: expanded bytes (absolute and per input byte) and the
    member count, each refused with a one-line LimitExceededError naming its option."""

    def __init__(self, limits: Limits, source: str, compressed_size: Callable[[], int]) -> None:
        self.limits = limits
        self.source = source
        self._compressed_size = compressed_size
        self.expanded = 0
        self.members = 0

    def count_member(self, name: str, *, at_least: int = 0) -> None:
        """One more member (or, for a directory listing, at least ``at_least`` in all)."""
        self.members = max(self.members + 1, at_least)
        if self.members > self.limits.max_members:
            raise LimitExceededError(
                f"more than {self.limits.max_members} members "
                "(member count guard; raise it with --max-members)",
                source=self.source, member=_short(name))

    def charge(self, size: int, name: str) -> None:
        self.expanded += size
        limits = self.limits
        if self.expanded > limits.max_total_bytes:
            raise LimitExceededError(
                f"archive expands to more than {limits.max_total_bytes} bytes "
                "(decompression bomb guard; raise it with --max-size)",
                source=self.source, member=_short(name))
        if self.expanded > RATIO_GRACE:
            ratio = self.expanded / max(self._compressed_size(), 1)
            if ratio > limits.max_ratio:
                raise LimitExceededError(
                    f"archive expands {ratio:.0f} times its size, more than {limits.max_ratio:g} "
                    "(decompression bomb guard; raise it with --max-ratio)",
                    source=self.source, member=_short(name))


class _Guarded:
    """Member stream that turns truncation into CorruptArchiveError naming the member."""

    def __init__(self, raw: BinaryIO, source: TarSource, name: str) -> None:
        self._raw = raw
        self._source = source
        self._name = name

    def read(self, n: int = -1) -> bytes:
        try:
            return self._raw.read(n)
        except CorruptArchiveError as exc:
            raise _in_member(exc, self._source.description, self._name) from exc
        except _MEMBER_ERRORS as exc:
            raise CorruptArchiveError(f"truncated member data ({exc})",
                                      source=self._source.description,
                                      member=_short(self._name)) from exc


def _in_member(exc: CorruptArchiveError, source: str, name: str) -> CorruptArchiveError:
    """A codec error raised while a member's data was read: name that member."""
    if exc.member is not None:
        return exc
    message = str(exc).removeprefix(f"{source}: ")
    return CorruptArchiveError(message, source=source, member=_short(name))


class DirectorySource:
    """An unpacked redistributable (the ``*-archive`` dir itself, or a dir holding only it)."""

    def __init__(self, path: Path, *, package: PackageId | None = None,
                 strip_components: int | None = None, limits: Limits | None = None) -> None:
        self.root = _find_top(path, package, strip_components)
        self.description = str(path)
        self._package = package or parse_top_dir(self.root.name) or PackageId(self.root.name)
        # Only the member count applies (the bytes are on disk already, nothing expands).
        self._guard = _Guard(limits or Limits(), self.description, lambda: 0)

    @property
    def package(self) -> PackageId:
        return self._package

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        inodes: dict[tuple[int, int], str] = {}
        for rel in self._walk():
            self._guard.count_member(rel)
            # The same depth, length and character rules as for archive members; checked
            # before the walk descends, so a 100,000-level tree is refused at level 65.
            normalise_member_path(rel, source=self.description)
            yield from self._member(rel, inodes)

    def _walk(self) -> Iterator[str]:
        """Relative paths in sorted pre-order, walked with an explicit stack (no recursion:
        a deep tree must not end in RecursionError)."""
        stack: list[tuple[str, Iterator[os.DirEntry[str]]]] = [("", self._list(self.root, ""))]
        while stack:
            prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            rel = prefix + entry.name
            yield rel
            if entry.is_dir(follow_symlinks=False):
                stack.append((rel + "/", self._list(Path(entry.path), rel)))

    def _list(self, directory: Path, rel: str) -> Iterator[os.DirEntry[str]]:
        # Sorting needs the whole listing in memory: a directory holding more entries than
        # the member limit is refused while it is read, not after.
        most = self._guard.limits.max_members
        try:
            with os.scandir(directory) as scan:
                listed = list(itertools.islice(scan, most + 1))
        except OSError as exc:
            raise SourceError(f"cannot list directory ({exc.strerror})",
                              source=self.description, member=_short(rel or ".")) from exc
        if len(listed) > most:
            self._guard.count_member(rel or ".", at_least=most + 1)
        return iter(sorted(listed, key=lambda e: e.name))

    def _member(
        self, rel: str, inodes: dict[tuple[int, int], str]
    ) -> Iterator[tuple[Member, BinaryIO | None]]:
        full = self.root / rel
        check_text(rel, source=self.description, what="name")  # same rules as for tarballs
        st = full.lstat()
        mode, mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            check_text(target, source=self.description, what="link target", member=rel)
            if len(target.encode()) > MAX_PATH_BYTES:  # as for archives: O(length^2) to resolve
                raise UnsafeMemberError("link target too long", source=self.description,
                                        member=_short(rel))
            yield Member(rel, MemberType.SYMLINK, mode, 0, target, mtime), None
        elif stat.S_ISDIR(st.st_mode):
            yield Member(rel, MemberType.DIR, mode, 0, None, mtime), None
        elif stat.S_ISREG(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if st.st_nlink > 1 and key in inodes:
                yield Member(rel, MemberType.HARDLINK, mode, 0, inodes[key], mtime), None
                return
            inodes[key] = rel
            with self._open(full, rel) as fh:
                head = fh.read(HEAD_SIZE)
                fh.seek(0)
                yield Member(rel, MemberType.FILE, mode, st.st_size, None, mtime, head), fh
        else:
            raise UnsafeMemberError("device node, FIFO or other special file",
                                    source=self.description, member=rel)

    @contextlib.contextmanager
    def _open(self, full: Path, rel: str) -> Iterator[BinaryIO]:
        try:
            fh = open(full, "rb")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise SourceError(f"cannot read ({exc.strerror})", source=self.description,
                              member=rel) from exc
        with fh:
            yield fh


def _find_top(path: Path, package: PackageId | None, strip_components: int | None) -> Path:
    """The directory holding the package's own tree (bin/, lib/, ...).

    Accepted without options: the ``*-archive`` dir itself, or a dir holding only it. With
    ``--package`` the given dir is the top dir; ``--strip-components N`` descends N levels
    of single subdirectories first.
    """
    if strip_components is not None:
        return _descend(path, strip_components)
    if parse_top_dir(path.name) is not None:
        return path
    children = _children(path)
    if len(children) == 1 and children[0].is_dir() and parse_top_dir(children[0].name):
        return children[0]
    if package is not None:
        return path
    raise SourceError(f"directory name {path.name!r} is not <pname>-<platform>-<version>-archive "
                      "(an unpacked redistributable); name the package with --package PNAME",
                      source=str(path))


def _descend(path: Path, levels: int) -> Path:
    for _ in range(levels):
        children = _children(path)
        if len(children) != 1 or not children[0].is_dir() or children[0].is_symlink():
            raise SourceError(f"--strip-components: {path} does not hold exactly one "
                              "directory", source=str(path))
        path = children[0]
    return path


def _children(path: Path) -> list[Path]:
    try:
        return [c for c in path.iterdir() if not c.name.startswith(".")]
    except OSError as exc:
        raise SourceError(f"cannot list directory ({exc.strerror})", source=str(path)) from exc


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
STDIN = "-"


def open_source(path: str | os.PathLike[str], *, package: PackageId | None = None,
                jobs: int = 1, limits: Limits | None = None,
                strip_components: int | None = None) -> Source:
    """A tarball (recognised by magic bytes in the codec layer), an unpacked directory, or
    ``-``: a tarball on standard input."""
    if os.fspath(path) == STDIN:
        return _stdin_source(package, jobs, limits, strip_components)
    p = Path(path)
    if p.is_dir():
        return DirectorySource(p, package=package, strip_components=strip_components,
                               limits=limits)
    if not p.exists():
        raise SourceError("no such file or directory", source=str(p))
    _refuse_zip(p)
    return TarSource(p, package=package, jobs=jobs, limits=limits,
                     strip_components=strip_components)


def _refuse_zip(path: Path) -> None:
    """A zip (a wheel, NVIDIA's Windows download) is a common mix-up: say so plainly."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return  # the codec layer reports unreadable files with their reason
    if head.startswith(ZIP_MAGIC):
        raise SourceError("zip archives are not redist tarballs (zip magic bytes; NVIDIA's Linux "
                          "redistributables "
                          "are .tar.xz; a .whl or Windows .zip needs unpacking first)",
                          source=str(path))


def _stdin_source(package: PackageId | None, jobs: int, limits: Limits | None,
                  strip_components: int | None) -> TarSource:
    """Standard input (``curl ... | cudasplit split -``), spooled to an unlinked temporary
    file first: the decoders seek (xz's index, zstd's frame walk), a pipe cannot."""
    spool = tempfile.TemporaryFile(prefix="cudasplit-stdin-")  # noqa: SIM115 - kept by source
    cap = (limits or Limits()).max_total_bytes
    copied = 0
    while chunk := sys.stdin.buffer.read(1 << 20):
        copied += len(chunk)
        if copied > cap:
            spool.close()
            raise LimitExceededError(f"standard input is larger than {cap} bytes (raise it "
                                     "with --max-size)", source="<stdin>")
        spool.write(chunk)
    spool.flush()
    source = TarSource(Path(f"/proc/self/fd/{spool.fileno()}"), package=package, jobs=jobs,
                       limits=limits, strip_components=strip_components)
    source.description = "<stdin>"
    source.keep_alive = spool  # the /proc path reopens this file while the source lives
    _refuse_zip(source.path)
    return source


def member_parent(path: str) -> str:
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent
