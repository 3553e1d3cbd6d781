"""Where each output lives once the run is over: decided before the first member, then frozen.

A :class:`LayoutSpec` is what the caller knows up front (``--output-dir``, ``$outputs``,
``--prefix``); :meth:`LayoutSpec.resolve` turns it into the frozen
:class:`Layout` once the package identity is read. ``repack --prefix``'s
default root (``/<pname>-<platform>-<version>``) needs the identity, which is why the spec and
the layout are two values. Every planner (links, ``.pc`` files, RUNPATHs, nix-support) asks the
layout; no one asks a sink, so ``inspect``, ``--dry-run`` and every sink plan the same roots.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cudasplit._argcheck import check_fields, checked
from cudasplit._model import OUTPUT_NAMES, PackageId

__all__ = ["Layout", "LayoutSpec", "archive_stem"]


@dataclass(frozen=True, slots=True)
class Layout:
    """Output name -> final root, fixed before the first member (``/${out}`` when unknown).

    Attributes:
        roots: (output, final root) pairs.
        base: outputs not in ``roots`` live at ``<base>/<output>`` (a profile whose packages
            name their own outputs); ``None``: they are unknown.

    Raises:
        Nothing: a value.
    """

    roots: tuple[tuple[str, str], ...]
    base: str | None = None

    def root(self, output: str) -> str:
        found = dict(self.roots).get(output)
        if found is not None:
            return found
        if self.base is not None:
            return f"{self.base.rstrip('/')}/{output}"
        return "/${" + output + "}"


def archive_stem(package: PackageId) -> str:
    """``<pname>-<platform>-<version>[_cudaNN]``; just the name when the rest is unknown."""
    parts = [package.name]
    if package.platform:
        parts.append(package.platform)
    if package.version:
        parts.append(package.version + (f"_cuda{package.cuda_variant}"
                                        if package.cuda_variant else ""))
    return "-".join(parts)


@checked
@dataclass(frozen=True, slots=True)
class LayoutSpec:
    """Fixed roots (``roots``), or archive roots ``<prefix>/<output>`` (``archives``) whose
    default prefix ``/<stem>`` comes from the identity. No roots: ``/${output}`` placeholders
    (``inspect``).

    Attributes:
        roots: fixed (output, root) pairs.
        archives: roots are ``<prefix>/<output>`` inside archives.
        prefix: the archive prefix (default ``/<stem>``).
        base: outputs not in ``roots`` live at ``<base>/<output>`` (a profile's own output
            names); ``None``: unknown.

    Raises:
        Nothing: a value.
    """

    roots: tuple[tuple[str, str], ...] = ()
    archives: bool = False
    prefix: str | None = None
    base: str | None = None   # other outputs: <base>/<output> (see Layout.base)

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def placeholders(cls) -> LayoutSpec:
        return cls()

    @classmethod
    def fixed(cls, roots: Mapping[str, str | os.PathLike[str]],
              base: str | os.PathLike[str] | None = None) -> LayoutSpec:
        return cls(tuple((name, os.path.abspath(path)) for name, path in roots.items()),
                   base=None if base is None else os.path.abspath(base))

    @classmethod
    def under(cls, directory: str | os.PathLike[str]) -> LayoutSpec:
        """``--output-dir DIR``: every output at ``DIR/<output>`` (a profile's own output
        names too)."""
        base = os.path.abspath(directory)
        return cls.fixed({name: os.path.join(base, name) for name in OUTPUT_NAMES}, base)

    @classmethod
    def unpacked_at(cls, prefix: str | None) -> LayoutSpec:
        """``repack --prefix``: archives unpacked at ``<prefix>/<output>``."""
        return cls(archives=True, prefix=None if prefix is None else prefix.rstrip("/") or "/")

    def resolve(self, package: PackageId) -> Layout:
        if not self.archives:
            return Layout(self.roots, self.base)
        prefix = self.prefix if self.prefix is not None else "/" + archive_stem(package)
        return Layout(tuple((name, f"{prefix.rstrip('/')}/{name}") for name in OUTPUT_NAMES),
                      prefix.rstrip("/") or "/")
