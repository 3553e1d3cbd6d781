"""Bills of materials: a CycloneDX 1.6 or SPDX 2.3 JSON document of tarballs, split directories
or a release (:func:`sbom`), or both formats from one read (:func:`sbom_documents`).

``cudasplit.sbom(...)``, the function this module replaced at the top of the package, still
works (the module is callable), with a ``DeprecationWarning``.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.sbom": ("sbom", "sbom_documents"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.sbom import sbom, sbom_documents

__all__ = [
    "sbom",
    "sbom_documents",
]


class _CallableModule(types.ModuleType):
    """``cudasplit.sbom(sources, ...)`` as it was called when the name was the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        warnings.warn("cudasplit.sbom(...) moved: call cudasplit.sbom.sbom(...)",
                      DeprecationWarning, stacklevel=2)
        function: Callable[..., str] = self.sbom
        return function(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
