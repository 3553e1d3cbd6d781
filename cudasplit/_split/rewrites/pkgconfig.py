"""Rewriting NVIDIA's ``.pc`` files so they point at the real output locations.

NVIDIA ships ``cudaroot=/usr/local/cuda-12.9`` style prefixes and
``libdir=${cudaroot}/targets/x86_64-linux/lib``; after a split the libraries, headers and the
``.pc`` files themselves live in different outputs, so each variable is rewritten to the
output that really holds what it names.
"""

from __future__ import annotations

import re
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


@dataclass(frozen=True, slots=True)
class PcExtras:
    """Package-table edits after the variable rewrite (``PcEdit``, _rulebook/package/table.py)."""

    requires: tuple[str, ...] = ()        # full module names: "cudart-12.9"
    replace: tuple[tuple[str, str], ...] = ()
    drop_cudaroot: bool = False
    cflags: str = ""                      # "-I/nix/store/...-crt/include ..."


def apply_extras(text: str, extras: PcExtras) -> str:
    """Nixpkgs' per-package ``.pc`` edits: ``Requires:`` added before ``Cflags:`` (cublas,
    cufft, ...), literal replacements (opencl ``-lopencl`` -> ``-lOpenCL``), the ``cudaroot``
    line removed (cudart) and include dirs appended to ``Cflags:`` (cudart on CUDA 13)."""
    for old, new in extras.replace:
        text = text.replace(old, new)
    lines = [line for line in text.splitlines()
             if not (extras.drop_cudaroot and line.split("=", 1)[0].strip() == "cudaroot")]
    if extras.cflags:
        lines = [f"{line} {extras.cflags}" if line.startswith("Cflags:") else line
                 for line in lines]
    if extras.requires:
        lines = _add_requires(lines, extras.requires)
    return "\n".join(lines) + "\n"


def _add_requires(lines: list[str], modules: tuple[str, ...]) -> list[str]:
    for index, line in enumerate(lines):
        if line.startswith("Requires:"):
            have = line[len("Requires:"):].strip()
            missing = [m for m in modules if m not in have]
            joined = ", ".join(([have] if have else []) + missing)
            lines[index] = f"Requires: {joined}"
            return lines
    at = next((i for i, line in enumerate(lines) if line.startswith("Cflags:")), len(lines))
    return [*lines[:at], f"Requires: {', '.join(modules)}", *lines[at:]]


def major_minor(filename: str) -> str | None:
    """``cublas-12.9.pc`` -> ``12.9`` (the CUDA release the module belongs to)."""
    match = _VERSIONED.match(filename)
    return match["version"] if match else None
