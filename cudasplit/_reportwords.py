"""Counted words in messages: ``1 file``, ``2 files``, never ``1 file(s)``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,234 problems``; ``many`` for irregular plurals."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"
