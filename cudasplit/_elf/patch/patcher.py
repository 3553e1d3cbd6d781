"""Apply planned ELF edits (RUNPATH, interpreter, DT_NEEDED), cheapest safe method first.

Tiers, tried in order by the native backend (``patcher="auto"``):

1. **in place** - every new string goes into ``.dynstr`` without moving anything: a search path
   into the old one's slot (its bytes plus the unreferenced NULs that follow it) or into
   unreferenced NUL slack at the end of ``.dynstr``; a shorter DT_NEEDED rename over the old
   name; new DT_NEEDED names into slack; an interpreter that is not longer than the old one into
   ``PT_INTERP``. Every reference into ``.dynstr`` is checked first (string-valued dynamic tags,
   symbol names, version need/def names, and the byte before the slot: linkers merge string
   tails, so a slot that looks free may be the tail of another name).
2. **append** - a copy of ``.dynstr`` plus the new strings plus ``SPARE_BYTES`` NULs (and a
   longer interpreter) go to the end of the file, mapped by a new read-only ``PT_LOAD`` that
   keeps the file's own ``p_align`` (64 KiB-page aarch64 kernels refuse smaller).
   ``DT_STRTAB``/``DT_STRSZ`` and the ``.dynstr`` section header follow the copy; the spare
   bytes make a later rewrite go in place. A dynamic array with no spare ``DT_NULL`` (lld,
   mold) moves into the new segment too, which is then writable. Where the new program header
   goes is explained in ``room``; the program header table never moves, so
   ``strip``, ``objcopy`` and ``patchelf`` keep the file loadable.
3. **LIEF** (default parser and builder configs, the only ones that keep files intact) when
   tiers 1-2 find no room for a program header. LIEF runs in a child process with a memory
   cap (``RLIMIT_AS``) and a time limit, after the file passed the same validation as the native
   tiers, so a LIEF abort or segfault is a one-line :class:`PatchError` about that file. Its
   output is used only when it verifies, and only when ``strip --strip-debug`` and
   ``patchelf --shrink-rpath`` on scratch copies leave what the loader maps unchanged (LIEF's
   layout breaks under ``strip`` on every NVIDIA library tested). Identical inputs cost one
   child per run, and a run's LIEF work is capped (:mod:`cudasplit._elf.patch.liefbudget`).

Every written file is re-read and verified: the search path, interpreter and DT_NEEDED list are
as planned, every other dynamic string name (SONAME, version need files and names, version
definitions) reads the same as before, and the program headers are sane (bounds, congruence,
order, alignment). A file that fails is restored byte-identically from an undo log (the
overwritten bytes plus the original length), and :class:`PatchError` is raised. What cannot be
written safely is refused before anything is written (ElfError/PatchError, file untouched):
``DT_STRSZ`` smaller than the strings in use, two ``DT_STRTAB``, ``PT_LOAD`` alignment below
the page size (for a new segment), version chains that cycle or outgrow the file.

Tiers 1-2 write at most the headers, the dynamic array, a few small sections and one copy of
``.dynstr``, never read a whole file: well under a millisecond per file (see
``benchmarks/bench_patch.py``), and safe to run in threads on different files.

Here: the entry (:func:`apply_edit` and its wrappers), then the tiers on one file with the undo
log (tiers 1-2 write in place through :class:`Undo`, the overwritten bytes plus the original
length; tier 3 writes a scratch copy in the capped child and renames it over the file only once
it verifies). The edit in bytes is ``delta``, the verification ``verify``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace

from cudasplit._elf.patch.append import plan_append
from cudasplit._elf.patch.delta import (
    TAG_BY_NAME,
    changes_nothing,
    check_interp,
    edit_bytes,
    interp_of,
    reduce_to_changes,
)
from cudasplit._elf.patch.inplace import plan_in_place
from cudasplit._elf.patch.liefbudget import MAX_CACHED, FallbackBudget, now
from cudasplit._elf.patch.verify import Expect, expected, verify, verify_after_strip
from cudasplit._elf.patch.want import Plan, Want
from cudasplit._elf.plan import EditResult, ElfEdit
from cudasplit._elf.read import ELF_MAGIC, DynNames, RawElf, dyn_names, read_elf_info, read_raw
from cudasplit.errors import ElfError, PatchError, UnknownPatcherError

__all__ = ["PatchResult", "apply_edit", "rename_needed", "restore_original", "set_runpath"]

log = logging.getLogger(__name__)

# What ``apply_edit`` accepts: the ``--patcher`` words (``cudasplit._run.PATCHERS``) and, for
# tests, one native tier alone.
EDIT_METHODS = ("auto", "in-place", "append", "native", "lief")


@dataclass(frozen=True, slots=True)
class PatchResult:
    """What :func:`set_runpath` did."""

    method: str  # "in-place" | "append" | "lief" | "unchanged"
    before: str | None  # old value of DT_RUNPATH or DT_RPATH, whichever was present
    before_tag: str | None  # "RUNPATH" | "RPATH" | None
    after: str
    tag: str  # "RUNPATH" | "RPATH": the tag written



# --------------------------------------------------------------------------- public API

def apply_edit(path: str | os.PathLike[str], edit: ElfEdit, *, patcher: str = "auto",
               budget: FallbackBudget | None = None) -> EditResult:
    """Apply one planned edit; see the module docstring for tiers and guarantees.

    ``patcher``: "auto" (tiers 1, 2, then 3), "lief" (tier 3 only), or for tests and callers
    that must not fall back to LIEF: "native" (tiers 1-2), "in-place", "append" (one tier).
    A forced tier that does not apply raises PatchError with the file untouched.
    Raises ElfError when the file is not ELF or is damaged (file untouched), PatchError when
    it cannot be written (file restored), UnknownPatcherError for an unknown patcher, ValueError
    for a string with NUL. ``budget``: the run's LIEF work (identical inputs rewritten once,
    a cap on the rest; :mod:`cudasplit._elf.patch.liefbudget`).
    """
    name = os.fspath(path)
    if patcher not in EDIT_METHODS:
        raise UnknownPatcherError(f"unknown patcher {patcher!r}; one of {', '.join(EDIT_METHODS)}")
    want = edit_bytes(edit)
    try:
        with open(name, "rb") as stream:
            magic = stream.read(4)
    except OSError as exc:
        raise ElfError(f"{name}: cannot read ELF file ({exc.strerror or exc})") from exc
    if magic != ELF_MAGIC:
        raise ElfError(f"{name}: not an ELF file")
    method: str | None = None
    before: Before | None = None
    if patcher != "lief":
        forced = None if patcher in ("auto", "native") else patcher
        method, before = native(name, want, forced)
    if method is None:
        if patcher not in ("auto", "lief"):
            raise PatchError(f"{name}: patcher {patcher!r} does not apply (no room in .dynstr, "
                             "no spare DT_NULL or program header slot)")
        if patcher == "auto":
            log.warning("%s: no room for an in-place or appended edit, using LIEF", name)
        if before is None:
            with open(name, "rb") as stream:
                elf = read_raw(name, stream.fileno())
                before = Before(dyn_names(elf), interp_of(elf))
        lief(name, want, budget)
        method = "lief"
    return _result(method, before, edit.tag)


def _result(method: str, before: Before | None, tag: str) -> EditResult:
    if before is None:
        return EditResult(method)
    order = [("RUNPATH", before.names.runpath), ("RPATH", before.names.rpath)]
    if tag == "RPATH":
        order.reverse()
    old, old_tag = next(((v[-1].decode("utf-8", "surrogateescape"), n) for n, v in order if v),
                        (None, None))
    interp = None if before.interp is None else before.interp.decode("utf-8", "surrogateescape")
    return EditResult(method, old, old_tag, interp, None if method == "lief" else before.undo)


def set_runpath(path: str | os.PathLike[str], value: str, *, tag: str = "RUNPATH",
                patcher: str = "auto") -> PatchResult:
    """Make `path` carry exactly one search-path tag, `tag`, holding `value`.

    A thin wrapper around :func:`apply_edit`; raises PatchError for a file without a dynamic
    section, ValueError for a value with NUL or a bad tag.
    """
    if tag not in TAG_BY_NAME:
        raise ValueError("tag must be RUNPATH or RPATH")
    res = apply_edit(path, ElfEdit(runpath=value, tag=tag), patcher=patcher)
    log.debug("%s: %s=%r via %s (was %s=%r)", os.fspath(path), tag, value, res.method,
              res.before_tag, res.before)
    return PatchResult(res.method, res.before, res.before_tag, value, tag)


def rename_needed(path: str | os.PathLike[str], old: str, new: str) -> bool:
    """Rename the DT_NEEDED entry ``old`` to ``new``, like ``patchelf --replace-needed``
    (nsight_systems' ``libqtiff.so`` wants ``libtiff.so.5``; distributions ship ``libtiff.so``).

    In place when the new name is not longer and the old string is not shared, else through
    the append tier (a version need naming the library is renamed with it, as patchelf does).
    Returns False when the file does not need ``old``. Raises PatchError when it cannot be done
    (file untouched or restored), ElfError for a damaged file.
    """
    name = os.fspath(path)
    info = read_elf_info(name)
    if info is None:
        raise ElfError(f"{name}: not an ELF file")
    if old not in info.needed:
        edit_bytes(ElfEdit(replace_needed=((old, new),)))  # still validate the names
        return False
    apply_edit(name, ElfEdit(replace_needed=((old, new),)), patcher="native")
    return True


# --------------------------------------------------------------------------- undo log

class Undo:
    """The bytes a patch overwrote plus the original length: enough to restore the file exactly."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.saved: list[tuple[int, bytes]] = []

    def write(self, offset: int, data: bytes) -> None:
        keep = min(len(data), max(self.size - offset, 0))
        if keep:
            self.saved.append((offset, os.pread(self.fd, keep, offset)))
        _pwrite_all(self.fd, data, offset)

    def restore(self) -> None:
        _undo(self.fd, self.size, self.saved)

    def record(self) -> tuple[int, tuple[tuple[int, bytes], ...]]:
        """What :func:`restore_original` needs to give a copy of the file its old bytes."""
        return self.size, tuple(self.saved)


def _undo(fd: int, size: int, saved: list[tuple[int, bytes]] | tuple[tuple[int, bytes], ...]
          ) -> None:
    os.ftruncate(fd, size)
    for offset, data in reversed(saved):
        _pwrite_all(fd, data, offset)


def restore_original(path: str | os.PathLike[str],
                     undo: tuple[int, tuple[tuple[int, bytes], ...]]) -> None:
    """Give ``path``, a byte copy of a file an in-place or append edit wrote, the bytes the
    file had before (``undo``: :attr:`EditResult.undo` of that edit)."""
    size, saved = undo
    with open(os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC), "r+b") as stream:
        _undo(stream.fileno(), size, saved)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


def write_verified(path: str, fd: int, elf: RawElf, plan: Plan, expect: Expect) -> Undo:
    """Write `plan`, verify; on any failure restore the file exactly, then raise. Returns the
    undo log of the written edit."""
    undo = Undo(fd, elf.size)
    try:
        for offset, data in plan.writes:
            undo.write(offset, data)
        verify(path, expect)
    except BaseException as exc:
        undo.restore()
        if isinstance(exc, OSError):
            raise PatchError(f"{path}: write failed ({exc.strerror or exc}); file restored"
                             ) from exc
        raise
    return undo


# --------------------------------------------------------------------------- tiers

@dataclass(frozen=True, slots=True)
class Before:
    """What the file read before the edit: the names and the interpreter, for the result;
    and the undo log of the edit once written (tiers 1-2)."""

    names: DynNames
    interp: bytes | None
    undo: tuple[int, tuple[tuple[int, bytes], ...]] | None = None


def native(path: str, edit: Want, method: str | None) -> tuple[str | None, Before]:
    """Tiers 1-2. Returns (method used or None when neither applies, facts before)."""
    # O_NOFOLLOW: a staged file swapped for a symlink is refused, never written through.
    with open(os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC), "r+b") as stream:
        fd = stream.fileno()
        elf = read_raw(path, fd)
        names = dyn_names(elf)  # refuses names outside DT_STRSZ, cyclic version chains
        before = Before(names, interp_of(elf))
        want = reduce_to_changes(elf, edit, names)
        if changes_nothing(want):
            return "unchanged", before
        check_interp(elf, want)
        plan = None
        if method in (None, "in-place"):
            plan = plan_in_place(elf, want)
        if plan is None and method in (None, "append"):
            plan = plan_append(elf, want)
        if plan is None:
            return None, before
        undo = write_verified(path, fd, elf, plan, expected(elf, want, names))
        return plan.method, replace(before, undo=undo.record())


def lief(path: str, want: Want, budget: FallbackBudget | None = None) -> None:
    """Tier 3: validated here, rewritten by a capped child process, verified, renamed over.

    With a `budget`, an input already seen (same bytes, same edit) gets the earlier result
    without a second child, and a new one is refused once the budget is spent."""
    import cudasplit._elf.patch.lief_worker as _lief_worker

    with open(path, "rb") as stream:
        elf = read_raw(path, stream.fileno())
        names = dyn_names(elf)
        want = reduce_to_changes(elf, want, names)
        check_interp(elf, want)
        expect = expected(elf, want, names)
    if budget is None:
        _lief_rewrite(path, want, elf.size, expect, _lief_worker.run)
        return
    outcome, owner = budget.claim(path, want, elf.size)
    if not owner:
        outcome.done.wait()
        if outcome.error is not None:
            raise PatchError(outcome.error.replace(outcome.path, path))
        if outcome.patched is not None:
            _replace_with(path, outcome.patched, expect)
            return
        # the result was too big to keep: rewrite this copy too (counted as a reuse)
    start, output, error = now(), None, None
    try:
        _lief_rewrite(path, want, elf.size, expect, _lief_worker.run)
        if owner and elf.size <= MAX_CACHED:
            with open(path, "rb") as stream:
                output = stream.read()
    except PatchError as exc:
        error = str(exc)
        raise
    finally:
        if owner:
            budget.settle(outcome, output, error, now() - start)


def _lief_rewrite(path: str, want: Want, size: int, expect: Expect,
                  run: Callable[[str, str, Want, int], None]) -> None:
    def write(fd: int, tmp: str) -> None:
        os.close(fd)
        run(path, tmp, want, size)
        try:
            verify(tmp, expect)
            verify_after_strip(tmp, expect)
        except PatchError as exc:  # name the file, not the scratch copy (gone when read)
            raise PatchError(str(exc).replace(tmp, path)) from exc

    _rewrite_in_place(path, write)


def _replace_with(path: str, data: bytes, expect: Expect) -> None:
    """Write an identical input's verified result over `path` (renamed into place)."""
    def write(fd: int, tmp: str) -> None:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        verify(tmp, expect)

    _rewrite_in_place(path, write)


def _rewrite_in_place(path: str, write: Callable[[int, str], None]) -> None:
    """``write`` fills a scratch file beside ``path`` (its fd and name), which then takes
    ``path``'s mode and is renamed over it; the scratch file never outlives the call."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cudasplit-", dir=folder)
    try:
        write(fd, tmp)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise PatchError(f"{path}: LIEF rewrite failed ({exc.strerror or exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
