"""Tier 1: plan an edit whose new strings all fit into .dynstr, moving nothing.

Every reference into ``.dynstr`` is collected first (:class:`_Refs`): a slot is only reused when
nothing else points into it and no other name runs into it (linkers merge string tails).
"""

from __future__ import annotations

import bisect
import re

from cudasplit._elf.patch.want import Plan, Want, new_dynamic
from cudasplit._elf.read import (
    DT_NEEDED,
    PATH_TAGS,
    PT_INTERP,
    STRING_TAGS,
    RawElf,
    dynstr_section,
    symbol_name_refs,
    version_refs,
)


class _Refs:
    """Every offset into .dynstr something refers to (computed once per plan)."""

    def __init__(self, elf: RawElf) -> None:
        self.elf = elf
        self.path = {v for t, v in elf.entries if t in PATH_TAGS}
        self.needed = [v for t, v in elf.entries if t == DT_NEEDED]
        self.tags = [v for t, v in elf.entries if t in STRING_TAGS and t not in PATH_TAGS
                     and t != DT_NEEDED]
        self.versions = version_refs(elf)
        self.symbols = symbol_name_refs(elf, dynstr_section(elf))

    def all_but_path(self) -> list[int] | None:
        """Every reference except the path tags, sorted; None when symbol names are unknown."""
        if self.symbols is None:
            return None
        return sorted({*self.needed, *self.tags, *(r.value for r in self.versions),
                       *self.symbols})


def _free(dynstr: bytes, refs: list[int] | None, lo: int, hi: int) -> bool:
    """Can bytes [lo, hi) of .dynstr be overwritten without changing any other name?

    No reference (``refs``, sorted) may point inside, and no string may run into ``lo`` from
    before it: linkers merge tails, so an RPATH can be the tail of another name (the byte before
    must be NUL).
    """
    if refs is None or (lo > 0 and dynstr[lo - 1] != 0):
        return False
    i = bisect.bisect_left(refs, lo)
    return i == len(refs) or refs[i] >= hi


_NOT_NUL = re.compile(rb"[^\0]")


def plan_in_place(elf: RawElf, want: Want) -> Plan | None:
    """Tier 1: every new string fits into .dynstr without moving anything; None otherwise."""
    dynstr = elf.dynstr()
    refs = _Refs(elf)
    plan = Plan("in-place")
    others = refs.all_but_path()
    for old, new in want.renames:
        if not _rename_in_place(elf, dynstr, refs, old, new, plan):
            return None
    slack = len(dynstr.rstrip(b"\0")) + 1
    path_off = None
    if want.runpath is not None:
        found = _path_slot(dynstr, refs, others, want.runpath, slack)
        if found is None:
            return None
        path_off, slack = found
        end = dynstr.find(b"\0", path_off)
        span = max(end - path_off, len(want.runpath)) + 1  # clear the rest of a longer old one
        plan.writes.append((elf.strtab_off + path_off, want.runpath.ljust(span, b"\0")))
    add_offs = []
    for name in want.adds:
        if slack + len(name) >= len(dynstr) or not _free(dynstr, others, slack,
                                                          slack + len(name) + 1):
            return None
        plan.writes.append((elf.strtab_off + slack, name + b"\0"))
        add_offs.append(slack)
        slack += len(name) + 1
    if want.interp is not None and not _interp_in_place(elf, want.interp, plan):
        return None
    new_dyn = new_dynamic(elf, want, path_off, None, {}, add_offs)
    if new_dyn is None:
        return None
    plan.writes.append((elf.dyn_off, elf.pack_dyn(new_dyn)))
    return plan


def _path_slot(dynstr: bytes, refs: _Refs, others: list[int] | None, raw: bytes,
               slack: int) -> tuple[int, int] | None:
    """(offset for the search path, new slack start): the old slot, or the slack at the end."""
    for off in sorted(refs.path):
        end = dynstr.find(b"\0", off) if off < len(dynstr) else -1
        if end < 0:
            continue
        # extend over the NULs that follow (the spare bytes of an earlier append)
        nxt = _NOT_NUL.search(dynstr, end + 1)
        run_end = (nxt.start() if nxt else len(dynstr)) - 1
        if off + len(raw) <= run_end and _free(dynstr, others, off, off + max(end - off,
                                                                              len(raw)) + 1):
            return off, max(slack, off + len(raw) + 1)
    if slack + len(raw) < len(dynstr) and _free(dynstr, others, slack, slack + len(raw) + 1):
        return slack, slack + len(raw) + 1
    return None


def _rename_in_place(elf: RawElf, dynstr: bytes, refs: _Refs, old: bytes, new: bytes,
                     plan: Plan) -> bool:
    """Overwrite every DT_NEEDED/vn_file string equal to `old` (not longer; not shared)."""
    slots = _name_slots(dynstr, refs, old)
    if not slots:
        return True  # nothing to rename
    if len(new) > len(old):
        return False
    lib_refs = set(refs.needed) | {r.value for r in refs.versions if r.is_file}
    other = [*refs.tags, *(r.value for r in refs.versions if not r.is_file), *refs.path,
             *(refs.symbols or [])]
    for off in slots:
        inside = range(off + 1, off + len(old) + 1)
        if refs.symbols is None or off in other or any(r in inside for r in other) or \
                any(r in inside for r in lib_refs) or (off > 0 and dynstr[off - 1] != 0):
            return False
        plan.writes.append((elf.strtab_off + off, new.ljust(len(old) + 1, b"\0")))
    return True


def _name_slots(dynstr: bytes, refs: _Refs, old: bytes) -> list[int]:
    """Offsets of DT_NEEDED entries and version-need file names that read `old`."""
    cands = set(refs.needed) | {r.value for r in refs.versions if r.is_file}
    return sorted(off for off in cands if dynstr[off:off + len(old) + 1] == old + b"\0")


def _interp_in_place(elf: RawElf, interp: bytes, plan: Plan) -> bool:
    ph = next(ph for ph in elf.phdrs if ph.p_type == PT_INTERP)
    if len(interp) + 1 > ph.p_filesz:
        return False
    # The kernel reads p_filesz bytes and wants the last one NUL: pad, keep the size.
    plan.writes.append((ph.p_offset, interp.ljust(ph.p_filesz, b"\0")))
    return True
