"""Option values as a command line gives them -> the typed values :class:`SplitOptions` holds.

A front end (the CLI, a build script) has strings: ``"rpath"``, ``"aarch64=/lib/ld.so"``,
``"aarch64-linux:8.7"``, a tarball's top directory. These functions know what the words mean,
so no front end has to; each raises a :class:`CudasplitError` for a value it cannot use.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._manifest import resolve_platform_word
from ._model import PackageId
from ._options import unknown_platform
from ._resolve import parse_interpreters
from ._runpath import DEFAULT_DRIVER_LINK, RunpathPolicy
from ._source_topdir import PLATFORMS
from ._sources import parse_top_dir
from .errors import OptionsError, RunpathPolicyError

__all__ = ["package_id", "platform_name", "runpath_policy"]


def runpath_policy(
    *,
    driver_link: str | None = DEFAULT_DRIVER_LINK,
    cuda_compat: str | None = None,
    library_paths: Sequence[str] = (),
    append: Sequence[str] = (),
    keep_absolute: bool = False,
    tag: str = "runpath",
    interpreters: Sequence[str] = (),
    ignore_missing: Sequence[str] = (),
) -> RunpathPolicy:
    """A :class:`RunpathPolicy` from option values: ``tag`` is ``runpath`` or ``rpath`` (any
    case), ``interpreters`` are ``[ARCH=]PATH`` words (without ``ARCH=``: the arch of the
    loader at PATH), ``driver_link=None`` leaves the driver link out."""
    if tag.upper() not in ("RUNPATH", "RPATH"):
        raise RunpathPolicyError(f"tag must be runpath or rpath, not {tag!r}")
    return RunpathPolicy(
        driver_link=driver_link,
        cuda_compat=cuda_compat,
        library_paths=tuple(library_paths),
        append=tuple(append),
        keep_absolute=keep_absolute,
        tag=tag.upper(),
        interpreters=parse_interpreters(interpreters),
        ignore_missing=tuple(ignore_missing),
    )


def package_id(text: str) -> PackageId:
    """A package identity from a pname (``cuda_cudart``), ``<pname>-<platform>-<version>``,
    or a whole top directory (``...-archive``); what ``SplitOptions.package`` takes."""
    return parse_top_dir(text) or parse_top_dir(text + "-archive") or PackageId(text)


def platform_name(word: str, cuda_version: str | None = None) -> str:
    """NVIDIA's platform name for a platform word: ``x86_64-linux`` -> ``linux-x86_64``,
    ``aarch64-linux:8.7`` (Jetson capabilities) -> ``linux-aarch64`` or ``linux-sbsa`` as
    ``cuda_version`` decides; NVIDIA's own names pass through unchanged."""
    name = resolve_platform_word(word, cuda_version) or word
    if name not in PLATFORMS:  # issue 24: a typo (linux-x86-64) silently changed the split
        raise OptionsError(unknown_platform(word, "platform"))
    return name
