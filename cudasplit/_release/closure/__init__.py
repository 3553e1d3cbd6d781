"""What a split's outputs keep alive: the closure report (``report``) and the byte scan under
it (``scan``), which also measures finished outputs for ``cudasplit split``'s summary.

Each name loads with its module on first use: a split's summary needs the sizes (the scan),
not the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES = {
    "cudasplit._release.closure.report": ("ClosureReport", "ClosureWarning", "closure_of_dir",
                                          "closure_of_roots"),
    "cudasplit._release.closure.scan": ("OutputSize", "Reference", "measure_outputs"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._release.closure.report import (
        ClosureReport,
        ClosureWarning,
        closure_of_dir,
        closure_of_roots,
    )
    from cudasplit._release.closure.scan import OutputSize, Reference, measure_outputs

__all__ = [
    "ClosureReport",
    "ClosureWarning",
    "OutputSize",
    "Reference",
    "closure_of_dir",
    "closure_of_roots",
    "measure_outputs",
]
