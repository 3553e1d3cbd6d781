"""The backends that apply a planned ELF edit, and what a failed write means for a run.

Planning is pure (``patchstage``/``runpath`` decide an :class:`ElfEdit` per ELF member from the
member, the output layout and the policy); applying is done once per file by an
:class:`ElfBackend`: the native tiered writer, LIEF, or :class:`DryRunBackend`, which writes
nothing and is what a dry run, ``inspect`` and ``explain`` use. Because every caller goes
through the same plan value, the dry run and the real run cannot disagree. The values
themselves live in :mod:`cudasplit._elf.plan.edit` (the writer imports them, not the backends).

:func:`backend_for` picks the writer for ``--patcher``; :class:`FailFastBackend` wraps it so
that a failed *write* (disk full, I/O error; the writer has restored the file) raises
:class:`~cudasplit.errors.OutputError`: the run then fails before any output is renamed into
place, instead of shipping unpatched libraries with one ``problem:`` line. A file that cannot
be edited (damaged, no room) still raises ``PatchError``/``ElfError`` and is reported as a
problem of that member.
"""

from __future__ import annotations

from typing import Protocol

from cudasplit._elf.patch.liefbudget import FallbackBudget
from cudasplit._elf.patch.patcher import apply_edit
from cudasplit._elf.plan import EditResult, ElfEdit
from cudasplit.errors import OutputError, PatchError, UnknownPatcherError

__all__ = ["BACKENDS", "DryRunBackend", "EditResult", "ElfBackend", "ElfEdit", "FailFastBackend",
           "LiefBackend", "NativeBackend", "backend_for"]


class ElfBackend(Protocol):
    """Applies a planned edit to a file; raises ``ElfError``/``PatchError`` (file untouched)."""

    name: str

    def apply(self, path: str, edit: ElfEdit) -> EditResult: ...


class DryRunBackend:
    """The backend of a dry run: applies nothing, reports the plan as ``planned``."""

    name = "dry-run"

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        return EditResult("unchanged" if edit.is_empty else "planned")


class NativeBackend:
    """Tiers 1-2 (in place, then append), LIEF only as the fallback (``fallback=False``: never).

    The tiers and their guarantees are described in :mod:`cudasplit._elf.patch.patcher`.
    """

    name = "native"

    def __init__(self, *, fallback: bool = True) -> None:
        self.fallback = fallback
        self.budget = FallbackBudget()  # one backend per run: the run's LIEF work

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        return apply_edit(path, edit, patcher="auto" if self.fallback else "native",
                          budget=self.budget)


class LiefBackend:
    """LIEF only, isolated in a capped child process (see
    :mod:`cudasplit._elf.patch.lief_worker`)."""

    name = "lief"

    def __init__(self) -> None:
        self.budget = FallbackBudget()

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        return apply_edit(path, edit, patcher="lief", budget=self.budget)


BACKENDS = ("auto", "native", "lief", "dry-run")


def backend_for(patcher: str) -> ElfBackend:
    """The backend for a ``patcher`` option value: ``auto`` (native tiers, LIEF as fallback),
    ``native`` (no LIEF), ``lief``, ``dry-run``; UnknownPatcherError for anything else."""
    if patcher == "auto":
        return NativeBackend()
    if patcher == "native":
        return NativeBackend(fallback=False)
    if patcher == "lief":
        return LiefBackend()
    if patcher == "dry-run":
        return DryRunBackend()
    raise UnknownPatcherError(f"unknown patcher {patcher!r}; one of {', '.join(BACKENDS)}")


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
