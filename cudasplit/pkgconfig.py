"""Rewriting NVIDIA's ``.pc`` files so they point at the real output locations.

NVIDIA ships ``cudaroot=/usr/local/cuda-12.9`` style prefixes and
``libdir=${cudaroot}/targets/x86_64-linux/lib``; after a split the libraries, headers and the
``.pc`` files themselves live in different outputs, so each variable is rewritten to the
output that really holds what it names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_VERSIONED = re.compile(r"^(?P<name>.+)-(?P<version>\d+\.\d+)\.pc$")
MAX_PC_SIZE = 1 << 20


@dataclass(frozen=True, slots=True)
class PcRoots:
    """Final absolute roots: ``cudaroot`` (dev), ``lib`` and ``include`` outputs."""

    cudaroot: str
    libdir: str
    includedir: str
    extra_libs: str = ""   # e.g. "-Wl,-rpath,/run/opengl-driver/lib" (cuda_cudart)


def rewrite_pc(text: str, roots: PcRoots) -> str:
    out = []
    for line in text.splitlines():
        out.append(_rewrite_line(line, roots))
    return "\n".join(out) + "\n"


def _rewrite_line(line: str, roots: PcRoots) -> str:
    key, sep, _value = line.partition("=")
    key = key.strip()
    if sep and key == "cudaroot":
        return f"cudaroot={roots.cudaroot}"
    if sep and key == "libdir":
        return f"libdir={roots.libdir}"
    if sep and key == "includedir":
        return f"includedir={roots.includedir}"
    if roots.extra_libs and line.startswith("Libs:") and roots.extra_libs not in line:
        return f"{line} {roots.extra_libs}"
    return line


def unversioned_alias(filename: str) -> str | None:
    """``cuda-12.9.pc`` -> ``cuda.pc`` (pkg-config users ask for the unversioned name)."""
    match = _VERSIONED.match(filename)
    return f"{match['name']}.pc" if match else None


def roots_for(output_roots: Mapping[str, str], lib_output: str, include_output: str,
              dev_output: str) -> PcRoots:
    return PcRoots(
        cudaroot=output_roots[dev_output],
        libdir=output_roots[lib_output] + "/lib",
        includedir=output_roots[include_output] + "/include",
    )
