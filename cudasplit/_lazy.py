"""Faces that load on first use (PEP 562), the one way every face of the package does it:
a face names where each of its names lives, and a name's module is imported when the name is
first asked for.

``import cudasplit`` then imports nothing but this module; ``cudasplit split`` loads the split
and no release tool; a split loads a folder's light modules before it starts decoding (the
RUNPATH policy an option needs) and the heavy ones (the planner, the ELF reader) while it
decodes. Standard library only, so the root of the package may use it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(name: str, homes: Mapping[str, Sequence[str]], *,
              submodules: Sequence[str] = (),
              moved: Mapping[str, tuple[str, str]] | None = None,
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the face ``name``, whose ``homes`` map each module
    to the names it provides. Once loaded, a name is an ordinary attribute of the face.

    ``submodules``: the face's own modules a caller may reach as attributes without importing
    them (``cudasplit.rules`` after ``import cudasplit``). ``moved``: older names of the face
    that now live elsewhere, name -> (the module that holds it, where users import it now):
    each still loads, with a ``DeprecationWarning`` naming its new place, and ``dir()`` (the
    face's ``__all__``) does not list it (a submodule of the same name wins)."""
    where = {attr: module for module, attrs in homes.items() for attr in attrs}
    listed = list(where)
    own = frozenset(submodules)
    moved = dict(moved or {})

    def __getattr__(attr: str) -> Any:
        if attr in own:
            __import__(f"{name}.{attr}")  # the import sets the attribute on the face
            return sys.modules[f"{name}.{attr}"]
        home = where.get(attr)
        if home is None and attr in moved:
            home, now = moved[attr]
            warnings.warn(f"{name}.{attr} moved: import it from {now}", DeprecationWarning,
                          stacklevel=2)
            __import__(home)
            return getattr(sys.modules[home], attr)  # not cached: it warns every time
        if home is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        # __import__, not importlib.import_module: the same import, but one that
        # ``python -X importtime`` shows (benchmarks measure the split's imports with it).
        __import__(home)
        value = getattr(sys.modules[home], attr)
        setattr(sys.modules[name], attr, value)
        return value

    def __dir__() -> list[str]:
        """The face's ``__all__`` (what it exports), else the names it loads."""
        return sorted(getattr(sys.modules[name], "__all__", listed))

    return __getattr__, __dir__
