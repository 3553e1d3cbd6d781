"""Faces that load on first use: a folder's ``__init__`` names where each of its names lives,
and a name's module is imported when the name is first asked for (PEP 562).

A split then imports a folder's light modules before it starts decoding (the RUNPATH policy
an option needs) and the heavy ones (the planner, the ELF reader) while it decodes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(name: str, homes: Mapping[str, Sequence[str]]
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the face ``name``, whose ``homes`` map each module
    to the names it provides. Once loaded, a name is an ordinary attribute of the face."""
    where = {attr: module for module, attrs in homes.items() for attr in attrs}

    def __getattr__(attr: str) -> Any:
        home = where.get(attr)
        if home is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        __import__(home)  # not importlib's: ``python -X importtime`` shows this one
        value = getattr(sys.modules[home], attr)
        setattr(sys.modules[name], attr, value)
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__
