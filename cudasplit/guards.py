r"""Guards for the builds that consume split outputs: RUNPATHs that find one library name in
two places (:func:`ambiguous_runpaths`), libraries a file ``dlopen``\ s that its RUNPATH
cannot reach (:func:`dlopen_audit`), closure budgets (:func:`closure_budget`), and the setup
hook that runs all three in every consumer's fixup (:func:`consumer_guards_hook`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit._api.guards": (
        "DEFAULT_FORBIDDEN_OUTPUTS", "Ambiguity", "BudgetReport", "DlopenAudit",
        "ambiguous_runpaths", "closure_budget", "consumer_guards_hook", "dlopen_audit"),
    "cudasplit._release.budget": ("BudgetViolation", "Link"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES)

if TYPE_CHECKING:
    from cudasplit._api.guards import (
        DEFAULT_FORBIDDEN_OUTPUTS,
        Ambiguity,
        BudgetReport,
        DlopenAudit,
        ambiguous_runpaths,
        closure_budget,
        consumer_guards_hook,
        dlopen_audit,
    )
    from cudasplit._release.budget import BudgetViolation, Link

__all__ = [
    "DEFAULT_FORBIDDEN_OUTPUTS",
    "Ambiguity",
    "BudgetReport",
    "BudgetViolation",
    "DlopenAudit",
    "Link",
    "ambiguous_runpaths",
    "closure_budget",
    "consumer_guards_hook",
    "dlopen_audit",
]
