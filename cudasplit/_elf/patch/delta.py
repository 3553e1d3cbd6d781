"""An :class:`~cudasplit._elf.plan.edit.ElfEdit` in bytes, less the parts the file already has.

Strings are encoded like the loader reads them (UTF-8, undecodable bytes kept through
``surrogateescape``); a NUL or an empty name is refused before any file is opened.
"""

from __future__ import annotations

import os
from dataclasses import replace

from cudasplit._elf.patch.want import Want
from cudasplit._elf.plan import ElfEdit
from cudasplit._elf.read import (
    DT_RPATH,
    DT_RUNPATH,
    PT_INTERP,
    DynNames,
    RawElf,
    open_raw,
)
from cudasplit.errors import CudasplitError, PatchError

TAG_BY_NAME = {"RUNPATH": DT_RUNPATH, "RPATH": DT_RPATH}


def _enc(text: str, what: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        raise ValueError(f"{what} cannot contain NUL")
    return raw


def edit_bytes(edit: ElfEdit) -> Want:
    """The edit in bytes; ValueError for a NUL, an empty name or a tag other than the two."""
    if edit.tag not in TAG_BY_NAME:
        raise ValueError("tag must be RUNPATH or RPATH")
    renames = tuple((_enc(o, "a library name"), _enc(n, "a library name"))
                    for o, n in edit.replace_needed)
    if any(not o or not n for o, n in renames) or any(not _enc(a, "a library name")
                                                      for a in edit.add_needed):
        raise ValueError("library names must be non-empty")
    if edit.interpreter is not None and not edit.interpreter:
        raise ValueError("the interpreter cannot be empty")
    return Want(
        runpath=None if edit.runpath is None else _enc(edit.runpath, "a search path"),
        path_tag=TAG_BY_NAME[edit.tag],
        interp=None if edit.interpreter is None else _enc(edit.interpreter, "an interpreter"),
        renames=renames,
        adds=tuple(_enc(a, "a library name") for a in edit.add_needed),
    )


def interp_of(elf: RawElf) -> bytes | None:
    """The interpreter PT_INTERP names (None without PT_INTERP)."""
    ph = next((ph for ph in elf.phdrs if ph.p_type == PT_INTERP), None)
    return None if ph is None else elf.string_at(ph.p_offset, ph.file_end)


def reduce_to_changes(elf: RawElf, want: Want, names: DynNames) -> Want:
    """Drop the parts of the edit that are already true (an unchanged file is not written)."""
    runpath = want.runpath
    cur, other = ((names.runpath, names.rpath) if want.path_tag == DT_RUNPATH
                  else (names.rpath, names.runpath))
    if runpath is not None and cur == (runpath,) and not other:
        runpath = None
    interp = want.interp if want.interp != interp_of(elf) else None
    renames = tuple((o, n) for o, n in want.renames if o in names.needed and o != n)
    adds = tuple(dict.fromkeys(a for a in want.adds if a not in names.needed
                               and a not in (n for _, n in renames)))
    return replace(want, runpath=runpath, interp=interp, renames=renames, adds=adds)


def changes_nothing(want: Want) -> bool:
    """Nothing left to write once :func:`reduce_to_changes` dropped what is already true."""
    return want.runpath is None and want.interp is None and not want.renames and not want.adds


def check_interp(elf: RawElf, want: Want) -> None:
    """Only files with PT_INTERP; never a loader of another machine (when it can be read)."""
    if want.interp is None:
        return
    if interp_of(elf) is None:
        raise PatchError(f"{elf.path}: no PT_INTERP (not a dynamic executable); "
                         "interpreter not set")
    path = want.interp.decode("utf-8", "surrogateescape")
    try:
        loader = open_raw(path, need_dynamic=False)
    except (OSError, CudasplitError):
        return  # not on this machine (a store path of the build): the planner's word
    os.close(loader.fd)
    if loader.e_machine != elf.e_machine or loader.bits != elf.bits:
        raise PatchError(f"{elf.path}: interpreter {path} is for another machine "
                         f"(e_machine {loader.e_machine}, file has {elf.e_machine})")
