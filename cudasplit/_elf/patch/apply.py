"""The backend the patch stage applies plans with, and what a failed write means for a run.

:func:`backend_for` (``elfedit``) picks the writer for ``--patcher``; :class:`FailFastBackend`
wraps it so that a failed *write* (disk full, I/O error; the writer has restored the file)
raises :class:`~cudasplit.errors.OutputError`: the run then fails before any output is renamed
into place, instead of shipping unpatched libraries with one ``problem:`` line. A file that
cannot be edited (damaged, no room) still raises ``PatchError``/``ElfError`` and is reported as
a problem of that member.
"""

from __future__ import annotations

from cudasplit._elf.patch.backends import EditResult, ElfBackend, ElfEdit, backend_for
from cudasplit._run import PATCHERS  # the --patcher values a split accepts
from cudasplit.errors import OutputError, PatchError

__all__ = ["PATCHERS", "FailFastBackend"]


class FailFastBackend:
    """``backend_for(patcher)``, with write failures turned into OutputError."""

    def __init__(self, patcher: str = "auto", inner: ElfBackend | None = None) -> None:
        self.inner = inner or backend_for(patcher)
        self.name = self.inner.name

    def fallback_summary(self) -> str | None:
        """What the run's LIEF fallback cost (``liefbudget``); None: nothing."""
        budget = getattr(self.inner, "budget", None)
        return budget.summary() if budget is not None else None

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        try:
            return self.inner.apply(path, edit)
        except PatchError as exc:
            if isinstance(exc.__cause__, OSError):
                raise OutputError(str(exc)) from exc
            raise
        except OSError as exc:
            raise OutputError(f"{path}: write failed ({exc.strerror or exc})") from exc
