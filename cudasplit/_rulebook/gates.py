"""Version and platform gates: the :class:`Where` a split runs at and the :class:`Gate` on it.

Nixpkgs' package files gate fixups on two different versions: the package's own
(``lib.versionAtLeast finalAttrs.version "12.8"`` for libcublas) and the CUDA release's
(``cudaOlder "13.4"`` for libnpp, whose own version is 12.x or 13.x independently). A
:class:`Gate` keeps them apart: ``since``/``before`` compare the package version,
``cuda_since``/``cuda_before`` the CUDA ``major.minor``, ``platforms`` the redist platform.

An unknown version or platform never silently disables a fixup that exists today: ``since``
gates count as met (the newest layout is the default), ``before`` gates as not met.
``glibc_since`` is the exception: it compares the glibc the files will be used with
(``--glibc-version``), and an unknown glibc fails it -- cuda_crt's ``noexcept`` edits for
glibc >= 2.42 break compilation against an older glibc.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GATE_KEYS", "UNGATED", "Gate", "Where", "version_at_least", "version_tuple"]

GATE_KEYS = frozenset({"since", "before", "cuda_since", "cuda_before", "platforms",
                       "glibc_since"})


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
    """The facts a gate is evaluated against (None: unknown).

    Attributes:
        version: the package's version.
        cuda_version: the CUDA release, ``major.minor``.
        platform: the redist platform (``linux-x86_64``).
        python_version: ``X.Y`` of the build's Python (cuda_gdb's TUI wrappers).
        glibc_version: ``X.Y`` of the glibc the files will meet (cuda_crt).

    Raises:
        Nothing: a value.
    """

    version: str | None = None
    cuda_version: str | None = None
    platform: str | None = None
    python_version: str | None = None  # X.Y of the build's Python (cuda_gdb's TUI wrappers)
    glibc_version: str | None = None   # X.Y of the glibc the files will meet (cuda_crt)


@dataclass(frozen=True, slots=True)
class Gate:
    """The versions, platforms and glibc a package-table entry applies to (None: any).

    Attributes:
        since: the package version it applies from.
        before: the package version it stops applying at.
        cuda_since: the CUDA release (``major.minor``) it applies from.
        cuda_before: the CUDA release it stops applying at.
        platforms: the redist platforms it applies on (empty: all).
        glibc_since: the glibc the files will meet, from which it applies.

    Raises:
        Nothing: a value.
    """

    since: str | None = None
    before: str | None = None
    cuda_since: str | None = None
    cuda_before: str | None = None
    platforms: tuple[str, ...] = ()
    glibc_since: str | None = None

    def applies(self, where: Where) -> bool:
        if self.platforms and where.platform is not None and where.platform not in self.platforms:
            return False
        if self.glibc_since is not None and (
                where.glibc_version is None
                or not version_at_least(where.glibc_version, self.glibc_since)):
            return False
        return (_since(where.version, self.since) and _before(where.version, self.before)
                and _since(where.cuda_version, self.cuda_since)
                and _before(where.cuda_version, self.cuda_before))

    def both(self, other: Gate) -> Gate:
        """The gate that applies where both apply (the later floors, the earlier ceilings)."""
        def floor(a: str | None, b: str | None) -> str | None:
            return b if a is None or (b is not None and version_tuple(b) > version_tuple(a)) else a

        def ceiling(a: str | None, b: str | None) -> str | None:
            return b if a is None or (b is not None and version_tuple(b) < version_tuple(a)) else a

        platforms = (tuple(p for p in self.platforms if p in other.platforms)
                     if self.platforms and other.platforms else self.platforms or other.platforms)
        return Gate(floor(self.since, other.since), ceiling(self.before, other.before),
                    floor(self.cuda_since, other.cuda_since),
                    ceiling(self.cuda_before, other.cuda_before), platforms,
                    floor(self.glibc_since, other.glibc_since))

    def never(self) -> bool:
        """No version passes (a floor at or above its ceiling), e.g. after :meth:`both`."""
        return any(low is not None and high is not None
                   and version_tuple(low) >= version_tuple(high)
                   for low, high in ((self.since, self.before),
                                     (self.cuda_since, self.cuda_before)))

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in (("version >=", self.since), ("version <", self.before),
                                          ("CUDA >=", self.cuda_since),
                                          ("CUDA <", self.cuda_before),
                                          ("glibc >=", self.glibc_since)) if v]
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
