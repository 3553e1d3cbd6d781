"""What both write tiers share: the edit in bytes, the plan of writes, the new dynamic array.

A plan is a list of ``(offset, bytes)`` writes computed from a parsed :class:`RawElf`; nothing is
written here (:mod:`cudasplit._elf.patch.patcher` writes, keeps the undo log and verifies).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudasplit._elf.read import (
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_NULL,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERNEED,
    DT_VERSYM,
    PATH_TAGS,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    RawElf,
)

# Sections that may move into the new segment, with the dynamic tag that holds their address.
EVICT_TAG = {SHT_HASH: DT_HASH, SHT_GNU_HASH: DT_GNU_HASH, SHT_DYNSYM: DT_SYMTAB,
             SHT_GNU_VERSYM: DT_VERSYM, SHT_GNU_VERNEED: DT_VERNEED, SHT_GNU_VERDEF: DT_VERDEF}


@dataclass(frozen=True, slots=True)
class Want:
    """An :class:`~cudasplit._elf.plan.edit.ElfEdit` in bytes (``path_tag``:
    DT_RUNPATH/DT_RPATH)."""

    runpath: bytes | None
    path_tag: int
    interp: bytes | None
    renames: tuple[tuple[bytes, bytes], ...]
    adds: tuple[bytes, ...]


@dataclass(slots=True)
class Plan:
    """Byte writes that turn the file into the patched one."""

    method: str
    writes: list[tuple[int, bytes]] = field(default_factory=list)



def new_dynamic(elf: RawElf, want: Want, path_off: int | None, strtab: tuple[int, int] | None,
                moved: dict[int, int], add_offs: list[int],
                needed_map: dict[int, int] | None = None, cap: int | None = None,
                ) -> list[tuple[int, int]] | None:
    """The new dynamic array (padded with DT_NULL to its old size, or to `cap` entries for a
    moved copy), or None if it does not fit.

    The path tag takes the place of the first old path tag (the other kind is dropped); new
    DT_NEEDED entries follow the last old one (search order of the old ones is kept).
    """
    out: list[tuple[int, int]] = []
    placed = want.runpath is None
    for t, v in elf.entries:
        if t in PATH_TAGS and want.runpath is not None:
            if not placed:
                out.append((want.path_tag, path_off or 0))
                placed = True
            continue
        out.append((t, _retarget(t, v, strtab, moved, needed_map)))
    if not placed:
        out.append((want.path_tag, path_off or 0))  # uses one of the spare DT_NULLs ld leaves
    if add_offs:
        last = max((i for i, (t, _) in enumerate(out) if t == DT_NEEDED), default=-1)
        out[last + 1:last + 1] = [(DT_NEEDED, off) for off in add_offs]
    size = elf.dyn_cap if cap is None else max(cap, len(out) + 1)
    if len(out) + 1 > size:
        return None
    return out + [(DT_NULL, 0)] * (size - len(out))


def _retarget(t: int, v: int, strtab: tuple[int, int] | None, moved: dict[int, int],
              needed_map: dict[int, int] | None) -> int:
    if strtab is not None and t == DT_STRTAB:
        return strtab[0]
    if strtab is not None and t == DT_STRSZ:
        return strtab[1]
    if t == DT_NEEDED and needed_map:
        return needed_map.get(v, v)
    if t in EVICT_TAG.values():
        return moved.get(v, v)
    return v
