"""A redistributable's top directory: the package identity it names, and stripping it."""

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
]

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
    if parsed is None:
        raise SourceError(f"no <pname>-<platform>-<version>-archive top directory (first "
                          f"member {first!r}); {TOP_DIR_HELP}", source=source)
    return first_component, 0, parsed
