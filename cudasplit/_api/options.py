"""Option values as a command line gives them -> the typed values :class:`SplitOptions` holds.

A front end (the CLI, a build script) has strings: ``"rpath"``, ``"aarch64=/lib/ld.so"``,
``"aarch64-linux:8.7"``, a tarball's top directory. These functions know what the words mean,
so no front end has to; each raises a :class:`CudasplitError` for a value it cannot use.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudasplit._argcheck import checked
from cudasplit._elf.plan import DEFAULT_DRIVER_LINK, RunpathPolicy
from cudasplit._model import PackageId
from cudasplit._source import PLATFORMS, parse_top_dir
from cudasplit._split.options import unknown_platform
from cudasplit.errors import OptionsError, RunpathPolicyError

__all__ = ["package_id", "platform_name", "runpath_policy"]


@checked
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
    """A :class:`RunpathPolicy` from command-line words.

    Args:
        driver_link: the driver link directory (``None``: left out of RUNPATHs).
        cuda_compat: the ``cuda_compat`` directory searched before the driver.
        library_paths: directories where DT_NEEDED names outside the package are found.
        append: entries appended to every RUNPATH (absolute or ``$ORIGIN``-relative).
        keep_absolute: keep the absolute entries a file already has.
        tag: ``runpath`` or ``rpath`` (any case).
        interpreters: ``[ARCH=]PATH`` words (without ``ARCH=``: the arch of the loader at
            PATH) for the PT_INTERP of executables.
        ignore_missing: DT_NEEDED globs that may stay unresolved.

    Returns:
        The :class:`RunpathPolicy`.

    Raises:
        RunpathPolicyError: a directory is relative, holds ``:``, or is a stubs directory;
            ``tag`` is neither ``runpath`` nor ``rpath``.
    """
    if tag.upper() not in ("RUNPATH", "RPATH"):
        raise RunpathPolicyError(f"tag must be runpath or rpath, not {tag!r}")
    return RunpathPolicy(
        driver_link=driver_link,
        cuda_compat=cuda_compat,
        library_paths=tuple(library_paths),
        append=tuple(append),
        keep_absolute=keep_absolute,
        tag=tag.upper(),
        interpreters=_interpreters(interpreters),
        ignore_missing=tuple(ignore_missing),
    )


def _interpreters(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    if not values:
        return ()  # the usual case: the library resolver (and the ELF reader) load later
    from cudasplit._elf.plan import parse_interpreters

    return parse_interpreters(values)


@checked
def package_id(text: str) -> PackageId:
    """A package identity from a word, as ``SplitOptions.package`` takes it.

    Args:
        text: a pname (``cuda_cudart``), ``<pname>-<platform>-<version>``, or a whole top
            directory (``...-archive``).

    Returns:
        The :class:`PackageId`.

    Raises:
        Nothing: any other word is taken as a pname.
    """
    return parse_top_dir(text) or parse_top_dir(text + "-archive") or PackageId(text)


@checked
def platform_name(word: str, cuda_version: str | None = None) -> str:
    """NVIDIA's platform name for a platform word: ``x86_64-linux`` -> ``linux-x86_64``,
    ``aarch64-linux:8.7`` (Jetson capabilities) -> ``linux-aarch64`` or ``linux-sbsa``;
    NVIDIA's own names pass through unchanged.

    Args:
        word: a Nix system, an NVIDIA platform, or a Nix system with capabilities.
        cuda_version: decides between ``linux-aarch64`` and ``linux-sbsa`` for Jetson.

    Returns:
        The NVIDIA platform name.

    Raises:
        OptionsError: a word that names no platform (a typo such as ``linux-x86-64``).
    """
    # The manifest tools' word table, loaded only when a word is given: a split without
    # --platform does not import the release tools.
    from cudasplit._release.manifest import resolve_platform_word

    name = resolve_platform_word(word, cuda_version) or word
    if name not in PLATFORMS:  # a typo used to change the split silently
        raise OptionsError(unknown_platform(word, "platform"))
    return name
