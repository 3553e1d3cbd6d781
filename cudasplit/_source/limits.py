"""Bomb guards: the limits a source may expand to, and their one-line refusals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cudasplit._run import DEFAULT_MAX_MEMBERS, DEFAULT_MAX_RATIO, DEFAULT_MAX_TOTAL_BYTES
from cudasplit._source.names import short_name
from cudasplit.errors import LimitExceededError

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_TOTAL_BYTES",
    "RATIO_GRACE",
    "Guard",
    "Limits",
]

# The ratio only counts once the archive has expanded past ``RATIO_GRACE``: tiny archives of
# small files have high ratios without being dangerous. The defaults themselves are the run
# core's (the help shows them).
RATIO_GRACE = 16 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """Bomb guards: bytes the members may expand to (absolute and per input byte), and how
    many members a source may have (archives and directories).

    Sizes are charged from the headers, before a member's data is read, so nothing of a
    member that would cross a limit is written. Hard links count again (they may be copied
    between outputs), GNU sparse members count with their expanded size (and are then
    refused), pax and GNU long-name headers count with their size.

    Attributes:
        max_total_bytes: the bytes all members may expand to.
        max_ratio: expanded bytes per input byte.
        max_members: how many members a source may have.

    Raises:
        Nothing: a value (a source over a limit raises LimitExceededError).
    """

    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO
    max_members: int = DEFAULT_MAX_MEMBERS


def deliverable(limits: Limits, compressed_size: int) -> int:
    """The most decoded bytes a source can deliver before a bomb guard stops it: a decoder
    never needs to hold more than that at once (its default memory is capped by it)."""
    by_ratio = max(RATIO_GRACE, int(limits.max_ratio * compressed_size))
    return min(limits.max_total_bytes, by_ratio)


class Guard:
    """The bomb limits of one source: expanded bytes (absolute and per input byte) and the
    member count, each refused with a one-line LimitExceededError naming its option."""

    def __init__(self, limits: Limits, source: str, compressed_size: Callable[[], int]) -> None:
        self.limits = limits
        self.source = source
        self._compressed_size = compressed_size
        self.expanded = 0
        self.members = 0

    def count_member(self, name: str, *, at_least: int = 0) -> None:
        """One more member (or, for a directory listing, at least ``at_least`` in all)."""
        self.members = max(self.members + 1, at_least)
        if self.members > self.limits.max_members:
            raise LimitExceededError(
                f"more than {self.limits.max_members} members "
                "(member count guard; raise max_members)",
                source=self.source, member=short_name(name))

    def charge(self, size: int, name: str) -> None:
        self.expanded += size
        limits = self.limits
        if self.expanded > limits.max_total_bytes:
            raise LimitExceededError(
                f"archive expands to more than {limits.max_total_bytes} bytes "
                "(decompression bomb guard; raise max_total_bytes)",
                source=self.source, member=short_name(name))
        if self.expanded > RATIO_GRACE:
            ratio = self.expanded / max(self._compressed_size(), 1)
            if ratio > limits.max_ratio:
                raise LimitExceededError(
                    f"archive expands {ratio:.0f} times its size, more than {limits.max_ratio:g} "
                    "(decompression bomb guard; raise max_ratio)",
                    source=self.source, member=short_name(name))
