"""The planned edit of one ELF file, and the backends that apply it.

Planning is pure (``patchstage``/``runpath`` decide an :class:`ElfEdit` per ELF member from the
member, the output layout and the policy); applying is done once per file by an
:class:`ElfBackend`: the native tiered writer, LIEF, or :class:`DryRunBackend`, which writes
nothing and is what a dry run, ``inspect`` and ``explain`` use. Because every caller goes
through the same plan value, the dry run and the real run cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cudasplit.errors import OptionsError

__all__ = ["BACKENDS", "DryRunBackend", "EditResult", "ElfBackend", "ElfEdit", "LiefBackend",
           "NativeBackend", "UnknownPatcherError", "backend_for"]


@dataclass(frozen=True, slots=True)
class ElfEdit:
    """Everything that will be changed in one ELF file; ``None``/empty fields change nothing.

    ``runpath``: the new search path, written as ``tag`` (``RUNPATH`` or ``RPATH``); the other
    tag is removed. ``interpreter``: the new ``PT_INTERP`` (dynamic executables only).
    ``replace_needed``: ``(old, new)`` DT_NEEDED renames, applied before ``add_needed`` names
    are appended as new DT_NEEDED entries.
    """

    runpath: str | None = None
    tag: str = "RUNPATH"
    interpreter: str | None = None
    replace_needed: tuple[tuple[str, str], ...] = ()
    add_needed: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return (self.runpath is None and self.interpreter is None and not self.replace_needed
                and not self.add_needed)


@dataclass(frozen=True, slots=True)
class EditResult:
    """What a backend did to one file.

    ``method``: ``in-place`` | ``append`` | ``lief`` | ``unchanged`` | ``planned`` (dry run).
    ``before``/``before_tag``: the search path found before the edit. ``interpreter_before``:
    the old ``PT_INTERP`` (``None`` for files without one).
    """

    method: str
    before: str | None = None
    before_tag: str | None = None
    interpreter_before: str | None = None


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

    The tiers and their guarantees are described in :mod:`cudasplit._patch`.
    """

    name = "native"

    def __init__(self, *, fallback: bool = True) -> None:
        self.fallback = fallback

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        from cudasplit._patch import apply_edit

        return apply_edit(path, edit, patcher="auto" if self.fallback else "native")


class LiefBackend:
    """LIEF only, isolated in a capped child process (see :mod:`cudasplit._lief_worker`)."""

    name = "lief"

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        from cudasplit._patch import apply_edit

        return apply_edit(path, edit, patcher="lief")


class UnknownPatcherError(OptionsError):
    """A ``patcher`` name that names no backend."""


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
