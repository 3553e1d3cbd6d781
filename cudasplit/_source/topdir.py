"""A redistributable's top directory: the package identity it names, and stripping it.

The identity becomes Nix attribute names, conda package names, versions and match specs, and
file names, so only what NVIDIA's names hold is taken from it: a pname is an identifier
(:data:`PNAME`), a version ASCII letters, digits, ``.``, ``_`` and ``+`` starting with a digit,
at most 64 characters (:data:`VERSION`), a CUDA variant ``NN`` or ``NN.N``. A top directory of
the right shape with anything else in it (``cuda_x-linux-x86_64-13.0.96 *|<0-archive``: a
version that would be a conda match spec) is refused naming the part, never read as an
identity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cudasplit._model import PackageId
from cudasplit.errors import SourceError

__all__ = [
    "PLATFORMS",
    "TOP_DIR_HELP",
    "TopDir",
    "decide_top_dir",
    "package_from_filename",
    "parse_top_dir",
    "top_dir_fault",
]

PLATFORMS = (
    "linux-x86_64", "linux-sbsa", "linux-aarch64", "linux-ppc64le", "windows-x86_64",
    "linux-all", "source",
)
PNAME = r"[A-Za-z_][A-Za-z0-9_-]{0,127}"
VERSION = r"[0-9][0-9A-Za-z._+]{0,63}"
_PLATFORM = "|".join(re.escape(p) for p in PLATFORMS)
_TOP_DIR = re.compile(
    rf"^(?P<name>{PNAME}?)-(?P<platform>{_PLATFORM})"
    rf"-(?P<version>{VERSION}?)(?:_cuda(?P<cuda>[0-9]{{1,4}}(?:\.[0-9]{{1,4}})?))?-archive$"
)
# The same shape with any text in the parts: what is refused with a reason rather than read.
_TOP_DIR_SHAPE = re.compile(
    rf"^(?P<name>.+?)-(?P<platform>{_PLATFORM})-(?P<version>[0-9][^/]*?)(?:_cuda[^/]*)?"
    r"-archive$")


_TENSORRT_TOP_DIR = re.compile(r"^TensorRT-([0-9][0-9.]{0,62}[0-9])$")


def top_dir_fault(name: str) -> str | None:
    """Why ``name`` has the shape of a top directory but is none (its pname or version holds
    text no identity may); ``None`` when it is one or has another shape altogether."""
    if _TOP_DIR.match(name) or _TENSORRT_TOP_DIR.match(name):
        return None
    shape = _TOP_DIR_SHAPE.match(name)
    if shape is None:
        return None
    if not re.fullmatch(PNAME, shape["name"]):
        return (f"its package name {shape['name']!r} is not an identifier (letters, digits, "
                "'_' and '-')")
    return (f"its version {shape['version']!r} is not a version (ASCII letters, digits, '.', "
            "'_' and '+', starting with a digit, at most 64)")


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


TOP_DIR_HELP = ("name the package (package PNAME) and say how many leading directories to "
                "drop (strip_components N; 0: the members are not under a top directory)")


@dataclass
class TopDir:
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
            raise SourceError(f"strip_components needs the package named: {TOP_DIR_HELP}",
                              source=source)
        return None, strip_components, None
    first_component = first.split("/", 1)[0]
    parsed = parse_top_dir(first_component)
    fault = top_dir_fault(first_component) if parsed is None else None
    if fault is not None:
        raise SourceError(f"top directory {first_component!r}: {fault}; {TOP_DIR_HELP}",
                          source=source)
    if parsed is None:
        raise SourceError(f"no <pname>-<platform>-<version>-archive top directory (first "
                          f"member {first!r}); {TOP_DIR_HELP}", source=source)
    return first_component, 0, parsed
