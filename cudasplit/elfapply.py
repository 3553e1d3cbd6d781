"""Apply one planned :class:`~cudasplit.elfedit.ElfEdit` with today's writers.

A stop-gap :class:`~cudasplit.elfedit.ElfBackend` until the tiered backends own every edit:
``replace_needed`` through :func:`~cudasplit.patch.rename_needed`, the search path through
:func:`~cudasplit.patch.set_runpath`. A new ``PT_INTERP`` is written only where it fits in
the old one's bytes (the loader reads up to the NUL); a longer path needs a relocating writer
and is refused with the file untouched. A failed *write* (disk full, I/O error) raises
:class:`~cudasplit.errors.OutputError` so that the run fails before outputs are renamed into
place; a file that cannot be edited raises ``PatchError``/``ElfError``.
"""

from __future__ import annotations

import os

from .elf import read_elf_info
from .elfedit import EditResult, ElfEdit
from .errors import ElfError, OutputError, PatchError
from .patch import PT_INTERP, read_raw, rename_needed, set_runpath

__all__ = ["PATCHERS", "TodayBackend"]

PATCHERS = ("auto", "lief", "native")


class TodayBackend:
    """Backend over :mod:`cudasplit.patch` (see the module docstring)."""

    name = "native"

    def __init__(self, patcher: str = "auto") -> None:
        self.patcher = patcher

    def apply(self, path: str, edit: ElfEdit) -> EditResult:
        try:
            return self._apply(path, edit)
        except PatchError as exc:
            if isinstance(exc.__cause__, OSError):
                raise OutputError(str(exc)) from exc
            raise
        except OSError as exc:
            raise OutputError(f"{path}: write failed ({exc.strerror or exc})") from exc

    def _apply(self, path: str, edit: ElfEdit) -> EditResult:
        info = read_elf_info(path)
        if info is None:
            raise ElfError(f"{path}: not an ELF file")
        for old, new in edit.replace_needed:
            rename_needed(path, old, new)
        if edit.interpreter is not None:
            _set_interpreter_in_place(path, edit.interpreter)
        if edit.runpath is None:
            before = info.runpath if info.runpath is not None else info.rpath
            tag = "RUNPATH" if info.runpath is not None else "RPATH" if before else None
            return EditResult("unchanged" if edit.is_empty else "in-place", before, tag,
                              info.interp)
        result = set_runpath(path, edit.runpath, tag=edit.tag, patcher=self.patcher)
        method = result.method
        if method == "unchanged" and (edit.interpreter or edit.replace_needed):
            method = "in-place"
        return EditResult(method, result.before, result.before_tag, info.interp)


def _set_interpreter_in_place(path: str, loader: str) -> None:
    raw = loader.encode("utf-8", "surrogateescape")
    with open(path, "r+b") as stream:
        elf = read_raw(path, stream.fileno())
        interp = next((ph for ph in elf.phdrs if ph.p_type == PT_INTERP), None)
        if interp is None:
            raise PatchError(f"{path}: no PT_INTERP to replace")
        if len(raw) + 1 > interp.p_filesz:
            raise PatchError(
                f"{path}: interpreter {loader!r} ({len(raw)} bytes) does not fit in the old "
                f"PT_INTERP ({interp.p_filesz - 1} bytes) and this writer cannot move it")
        old = elf.pread(interp.p_filesz, interp.p_offset)
        os.pwrite(stream.fileno(), raw.ljust(interp.p_filesz, b"\0"), interp.p_offset)
    check = read_elf_info(path)
    if check is None or check.interp != loader:
        with open(path, "r+b") as stream:
            os.pwrite(stream.fileno(), old, interp.p_offset)
        raise PatchError(f"{path}: interpreter did not read back; file restored")
