"""Version and platform gates: the :class:`Where` a split runs at and the :class:`Gate` on it.

Nixpkgs' package files gate fixups on two different versions: the package's own
(``lib.versionAtLeast finalAttrs.version "12.8"`` for libcublas) and the CUDA release's
(``cudaOlder "13.4"`` for libnpp, whose own version is 12.x or 13.x independently). A
:class:`Gate` keeps them apart: ``since``/``before`` compare the package version,
``cuda_since``/``cuda_before`` the CUDA ``major.minor``, ``platforms`` the redist platform.

An unknown version or platform never silently disables a fixup that exists today: ``since``
gates count as met (the newest layout is the default), ``before`` gates as not met.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GATE_KEYS", "UNGATED", "Gate", "Where", "version_at_least", "version_tuple"]

GATE_KEYS = frozenset({"since", "before", "cuda_since", "cuda_before", "platforms"})


def version_tuple(text: str) -> tuple[int, ...]:
    """``"12.9.79"`` -> ``(12, 9, 79)``; trailing non-digits of a component are ignored."""
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d*", piece)
        parts.append(int(digits[0]) if digits and digits[0] else 0)
    return tuple(parts)


def version_at_least(version: str, floor: str) -> bool:
    """Nixpkgs' ``versionAtLeast`` on the components ``floor`` names (``12.8`` vs ``12.8.90``)."""
    have, want = version_tuple(version), version_tuple(floor)
    return have[:len(want)] >= want


@dataclass(frozen=True, slots=True)
class Where:
    """The facts a gate is evaluated against (None: unknown)."""

    version: str | None = None
    cuda_version: str | None = None
    platform: str | None = None
    python_version: str | None = None  # X.Y of the build's Python (cuda_gdb's TUI wrappers)


@dataclass(frozen=True, slots=True)
class Gate:
    since: str | None = None
    before: str | None = None
    cuda_since: str | None = None
    cuda_before: str | None = None
    platforms: tuple[str, ...] = ()

    def applies(self, where: Where) -> bool:
        if self.platforms and where.platform is not None and where.platform not in self.platforms:
            return False
        return (_since(where.version, self.since) and _before(where.version, self.before)
                and _since(where.cuda_version, self.cuda_since)
                and _before(where.cuda_version, self.cuda_before))

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in (("version >=", self.since), ("version <", self.before),
                                          ("CUDA >=", self.cuda_since),
                                          ("CUDA <", self.cuda_before)) if v]
        if self.platforms:
            parts.append("on " + "/".join(self.platforms))
        return ", ".join(parts)


def _since(version: str | None, floor: str | None) -> bool:
    return floor is None or version is None or version_at_least(version, floor)


def _before(version: str | None, ceiling: str | None) -> bool:
    if ceiling is None:
        return True
    return version is not None and not version_at_least(version, ceiling)


# The default of every gated entry: no condition, applies everywhere. One shared frozen value
# (a call in each dataclass default would read as a mutable default to ruff's RUF009).
UNGATED = Gate()
