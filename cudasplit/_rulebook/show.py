"""``rules show --package``: a package's settings as readable ``key = value`` lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import is_dataclass
from typing import Any

from cudasplit._globs import Glob
from cudasplit._rulebook.package.settings import PackageSettings
from cudasplit._rulebook.package.table import RunpathPackage

__all__ = ["describe_package"]


def describe_package(package: PackageSettings) -> list[str]:
    """The package-table entry as ``key: value`` lines (``rules show --package``); keys left
    at their defaults are shown too, so the entry reads the same for every package."""
    return [f"{name} = {_describe(getattr(package, name))}"
            for name in PackageSettings.__dataclass_fields__]


def _describe(value: Any) -> str:
    if isinstance(value, Glob):
        return value.pattern
    if isinstance(value, RunpathPackage):
        gate = value.gate.describe()
        return value.entry() + (f" ({gate})" if gate else "")
    if is_dataclass(value) and not isinstance(value, type):  # PcEdit, DropEdit, DlopenNeed, ...
        parts = []
        for name in type(value).__dataclass_fields__:
            item = getattr(value, name)
            if name == "gate":
                if item.describe():
                    parts.append(f"when {item.describe()}")
            elif item not in ((), False, None, ""):
                parts.append(f"{name}={_describe(item)}")
        return "{" + "; ".join(parts) + "}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return str(value)
