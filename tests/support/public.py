"""The public API as users import it: :mod:`cudasplit` and its documented modules.

Each public name is listed by the module users import it from (``cudasplit.__all__``,
``cudasplit.rules.__all__`` ...); the errors and the sinks are in both the top and their own
module, the same objects. The tests of the public API and ``scripts/gen_reference.py`` read
it from here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import cudasplit

MODULES: tuple[str, ...] = ("cudasplit", *(f"cudasplit.{m}" for m in cudasplit._SUBMODULES))


def module(name: str) -> ModuleType:
    return importlib.import_module(name)


def names_of(name: str) -> list[str]:
    """The names the public module ``name`` exports."""
    return list(module(name).__all__)


def public() -> dict[str, Any]:
    """Every public name, once, -> its object (from the first module that exports it)."""
    found: dict[str, Any] = {}
    for name in MODULES:
        for attr in names_of(name):
            found.setdefault(attr, getattr(module(name), attr))
    return found


def home(attr: str) -> str:
    """The public module a name is documented in (the first that exports it)."""
    return next(name for name in MODULES if attr in names_of(name))
