"""Frozen values shared by the stages: members, package identity, decisions."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class MemberType(enum.StrEnum):
    """What a source member is on the filesystem level."""

    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"


class Kind(enum.StrEnum):
    """Kinds used by rules and the report (content-aware refinement of :class:`MemberType`)."""

    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    ELF_SHARED = "elf-shared"
    ELF_EXEC = "elf-exec"
    ELF_OTHER = "elf-other"
    STATIC = "static"


@dataclass(frozen=True, slots=True)
class Member:
    """One entry of a source, top directory already stripped.

    ``path`` is a normalised relative POSIX path (no ``.``/``..`` components, no leading ``/``).
    ``link`` is the symlink target as stored (symlinks) or the archive path of the earlier
    member (hardlinks, top directory stripped). ``head`` holds the first bytes of a regular
    file's content (up to 4 KiB), enough to recognise ELF files and ``ar`` archives before the
    destination is chosen.

    Attributes:
        path: the normalised relative POSIX path.
        type: the :class:`MemberType`.
        mode: the permission bits.
        size: the content's size.
        link: a symlink's target, or a hard link's earlier member.
        mtime: the modification time.
        head: the first bytes of a regular file (up to 4 KiB).

    Raises:
        Nothing: a value.
    """

    path: str
    type: MemberType
    mode: int = 0o644
    size: int = 0
    link: str | None = None
    mtime: int = 0
    head: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class PackageId:
    """Parsed from ``<pname>-<platform>-<version>[_cudaNN]-archive``.

    Attributes:
        name: the pname (``cuda_cudart``).
        platform: ``linux-x86_64``, ...; ``None``: unknown.
        version: the package version; ``None``: unknown.
        cuda_variant: ``"12"`` for ``..._cuda12-archive`` (cuDNN style).

    Raises:
        Nothing: a value.
    """

    name: str
    platform: str | None = None
    version: str | None = None
    cuda_variant: str | None = None  # "12" for ``..._cuda12-archive`` (cuDNN style)

    def as_dict(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "platform": self.platform,
            "version": self.version,
            "cuda_variant": self.cuda_variant,
        }


# The profile whose rules are rules/ itself (Nixpkgs' outputs, OUTPUT_NAMES); any other is
# rules/profiles/<name>/ and names its own outputs.
DEFAULT_PROFILE = "default"
OUTPUT_NAMES: tuple[str, ...] = (
    "out", "doc", "samples", "python", "bin", "dev", "include", "lib", "static", "stubs",
)
