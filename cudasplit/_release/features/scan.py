"""One tarball's output flags, member by member: the :class:`Features` value and its scanner.

The flags follow the rules of NVIDIA-manifest tooling in Nixpkgs
(cuda-redist-find-features), with these deliberate differences:

* ``bin`` needs a file under ``bin/`` that is executable (an ``x`` mode bit, an ELF executable
  header, or a PE header in a Windows zip), followed through symlinks and hard links inside the
  archive. The original check was always true, so a ``bin/`` holding only ``nvcc.profile`` or a
  ``.dll``-less config file counted as a ``bin`` output.
* "non-empty directory" means it holds at least one non-directory member somewhere below it
  (an ``include/`` with only empty subdirectories has nothing to install).
* ``lib``/``static`` also look under ``lib64/``, which the split merges into ``lib/``.

``lib`` keeps the original meaning "any ``*.so*`` under ``lib/``", stubs included
(``cuda_nvml_dev`` ships only ``lib/stubs/libnvidia-ml.so`` and is ``lib = true`` in NVIDIA's
feature manifests); the extended form reports ``stubs`` separately.

Extended form: ``include``, ``stubs``, ``python`` and the SONAMEs the package provides and the
DT_NEEDED names it uses. The dynamic section of a large library lies near its end and its string
table near its start, so it cannot be read from a bounded prefix of the stream; ELF members
(only they, only in the extended form) are therefore spooled to one reused temporary file and
read with :func:`~cudasplit._elf.read.info.read_elf_info`. Disk use is bounded by the largest ELF
member.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO

from cudasplit._elf.read import kind_from_head, read_elf_info
from cudasplit._model import Kind, Member, MemberType
from cudasplit.errors import ElfError

__all__ = ["BASIC_KEYS", "EXTENDED_KEYS", "FeatureScan", "Features"]

BASIC_KEYS = ("bin", "dev", "doc", "lib", "sample", "static")
EXTENDED_KEYS = (*BASIC_KEYS, "include", "python", "stubs")
_DEV_DIRS = ("include/", "lib/pkgconfig/", "share/pkgconfig/", "pkg-config/", "pkgconfig/",
             "lib/cmake/", "lib64/cmake/", "share/aclocal/")
# NVIDIA's feature manifests count only these (cuda_cupti's top-level doc/ is doc: false in
# feature_12.2.2.json on every platform); the split still puts doc/ into the doc output.
_DOC_DIRS = ("share/doc/", "share/info/", "share/man/", "share/gtk-doc/", "share/devhelp/")
_LIB_DIRS = ("lib/", "lib64/")
_STUB_DIRS = ("lib/stubs/", "lib64/stubs/", "stubs/")
_SHARED_NAME = re.compile(r"\.so(\.[^/]*)?$")
_PE_MAGIC = b"MZ"
_SYMLINK_HOPS = 40  # what the kernel allows before ELOOP


@dataclass(frozen=True, slots=True)
class Features:
    """The outputs one tarball has (see the module text for each flag's rule)."""

    bin: bool = False
    dev: bool = False
    doc: bool = False
    lib: bool = False
    sample: bool = False
    static: bool = False
    include: bool = False
    python: bool = False
    stubs: bool = False
    sonames: tuple[str, ...] = ()  # sorted; only filled by an extended scan
    needed: tuple[str, ...] = ()   # sorted; only filled by an extended scan
    problems: tuple[str, ...] = ()  # ELF members that could not be read (extended scan)

    def outputs(self, *, extended: bool = False) -> dict[str, bool]:
        keys = EXTENDED_KEYS if extended else BASIC_KEYS
        return {key: bool(getattr(self, key)) for key in keys}

    def entry(self, *, extended: bool = False) -> dict[str, Any]:
        """The per-platform object of ``feature_*.json`` (extended: plus sonames/needed)."""
        out: dict[str, Any] = {"outputs": self.outputs(extended=extended)}
        if extended:
            out["sonames"] = list(self.sonames)
            out["needed"] = list(self.needed)
        return out


@dataclass
class FeatureScan:
    """Accumulates flags member by member; links under ``bin/`` are resolved at the end."""

    extended: bool
    flags: set[str] = field(default_factory=set)
    executables: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)  # path -> target path (archive-relative)
    bin_candidates: list[str] = field(default_factory=list)  # bin/ links to resolve
    sonames: set[str] = field(default_factory=set)
    needed: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    spool: IO[bytes] | None = None

    def take(self, member: Member, stream: BinaryIO | None, source: str) -> None:
        if member.type is MemberType.DIR:
            return
        path = member.path
        self._by_place(path)
        if member.type is MemberType.FILE:
            self._file(member, stream, source)
        elif member.type is MemberType.SYMLINK and member.link is not None:
            self.links[path] = _resolve(path, member.link)
        elif member.type is MemberType.HARDLINK and member.link is not None:
            self.links[path] = member.link
        if path.startswith("bin/") and member.type is not MemberType.FILE:
            self.bin_candidates.append(path)

    def _by_place(self, path: str) -> None:
        name = posixpath.basename(path)
        if path.startswith(_DEV_DIRS):
            self.flags.add("dev")
        if path.startswith("include/"):
            self.flags.add("include")
        if path.startswith(_DOC_DIRS):
            self.flags.add("doc")
        if path.startswith("samples/"):
            self.flags.add("sample")
        if name.endswith(".whl"):
            self.flags.add("python")
        if path.startswith(_LIB_DIRS) and _SHARED_NAME.search(name):
            self.flags.add("lib")
        if path.startswith(_LIB_DIRS) and name.endswith(".a"):
            self.flags.add("static")
        if path.startswith(_STUB_DIRS) and (_SHARED_NAME.search(name) or name.endswith(".a")):
            self.flags.add("stubs")

    def _file(self, member: Member, stream: BinaryIO | None, source: str) -> None:
        kind = kind_from_head(member.head)
        if member.mode & 0o111 or kind is Kind.ELF_EXEC or member.head.startswith(_PE_MAGIC):
            self.executables.add(member.path)
            if member.path.startswith("bin/"):
                self.flags.add("bin")
        if self.extended and kind is not None and stream is not None:
            self._elf(member, stream, source)

    def _elf(self, member: Member, stream: BinaryIO, source: str) -> None:
        if self.spool is None:
            self.spool = tempfile.NamedTemporaryFile(prefix="cudasplit-elf-")  # noqa: SIM115
        spool = self.spool
        spool.seek(0)
        spool.truncate()
        shutil.copyfileobj(stream, spool, 1 << 20)
        spool.flush()
        try:
            info = read_elf_info(spool.name)
        except ElfError as exc:
            # One damaged member should not hide the flags of the rest; it is reported.
            self.problems.append(f"{source}: member {member.path!r}: "
                                 f"{str(exc).split(': ', 1)[-1]}")
            return
        if info is None:
            return
        if info.soname:
            self.sonames.add(info.soname)
        self.needed.update(info.needed)

    def result(self) -> Features:
        if "bin" not in self.flags and any(self._is_executable(p) for p in self.bin_candidates):
            self.flags.add("bin")
        return Features(
            **{key: key in self.flags for key in EXTENDED_KEYS},
            sonames=tuple(sorted(self.sonames)),
            needed=tuple(sorted(self.needed)),
            problems=tuple(self.problems),
        )

    def _is_executable(self, path: str) -> bool:
        for _ in range(_SYMLINK_HOPS):
            if path in self.executables:
                return True
            target = self.links.get(path)
            if target is None:
                return False
            path = target
        return False

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()


def _resolve(path: str, target: str) -> str:
    """An archive-relative symlink target; absolute targets leave the archive (never match)."""
    if target.startswith("/"):
        return target
    return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
