"""Counts in words, as every message, problem and summary line of the library says them.

Below every layer (it imports nothing), so the RUNPATH planner's messages and the report's
summary use the same words without the planner importing the report.
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,234 problems``; ``many`` for irregular plurals."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"
