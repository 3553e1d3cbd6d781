"""The planned edit of one ELF file as a value, what applying it did, and the unknown-patcher error.

Plain values with no I/O: the planners build an :class:`ElfEdit`, the writer
(:mod:`cudasplit._elf.patch.patcher`) applies it and the backends
(:mod:`cudasplit._elf.patch.backends`) report an
:class:`EditResult`. Kept apart from the backends so the writer does not import them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EditResult", "ElfEdit"]


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
    the old ``PT_INTERP`` (``None`` for files without one). ``undo``: for the in-place and
    append tiers, the file's original length and the bytes the edit overwrote (offset, bytes):
    a copy of the patched file made later (a hard link into another output) gets its original
    bytes back from it; ``None`` where the file was rewritten whole (LIEF) or not written.
    """

    method: str
    before: str | None = None
    before_tag: str | None = None
    interpreter_before: str | None = None
    undo: tuple[int, tuple[tuple[int, bytes], ...]] | None = field(default=None, repr=False,
                                                                    compare=False)
