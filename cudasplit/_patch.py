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
   bytes make a later rewrite go in place. Where the new program header goes is explained in
   :mod:`cudasplit._elfwrite`; the program header table never moves, so ``strip``, ``objcopy``
   and ``patchelf`` keep the file loadable.
3. **LIEF** (default parser and builder configs, the only ones that keep files intact) when
   tiers 1-2 do not apply (no spare ``DT_NULL``). LIEF runs in a child process with a memory
   cap (``RLIMIT_AS``) and a time limit, after the file passed the same validation as the native
   tiers, so a LIEF abort or segfault is a one-line :class:`PatchError` about that file. Its
   output is used only when it verifies, and only when it still verifies after
   ``strip --strip-debug`` on a scratch copy (LIEF's layout broke after ``strip`` on 8 of 16
   NVIDIA libraries).

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
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace

from cudasplit._elf import read_elf_info
from cudasplit._elfedit import EditResult, ElfEdit, UnknownPatcherError
from cudasplit._elfio import (
    DT_RPATH,
    DT_RUNPATH,
    PAGE,
    PT_INTERP,
    PT_LOAD,
    DynNames,
    RawElf,
    dyn_names,
    open_raw,
    read_raw,
)
from cudasplit._elfwrite import SPARE_BYTES, Plan, Want, plan_append, plan_in_place
from cudasplit.errors import CudasplitError, ElfError, PatchError

__all__ = ["SPARE_BYTES", "PatchResult", "apply_edit", "rename_needed", "set_runpath"]

log = logging.getLogger(__name__)

_TAG_BY_NAME = {"RUNPATH": DT_RUNPATH, "RPATH": DT_RPATH}
PATCHERS = ("auto", "in-place", "append", "native", "lief")


@dataclass(frozen=True, slots=True)
class PatchResult:
    """What :func:`set_runpath` did."""

    method: str  # "in-place" | "append" | "lief" | "unchanged"
    before: str | None  # old value of DT_RUNPATH or DT_RPATH, whichever was present
    before_tag: str | None  # "RUNPATH" | "RPATH" | None
    after: str
    tag: str  # "RUNPATH" | "RPATH": the tag written


# --------------------------------------------------------------------------- the edit in bytes

def _enc(text: str, what: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        raise ValueError(f"{what} cannot contain NUL")
    return raw


def _want(edit: ElfEdit) -> Want:
    if edit.tag not in _TAG_BY_NAME:
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
        path_tag=_TAG_BY_NAME[edit.tag],
        interp=None if edit.interpreter is None else _enc(edit.interpreter, "an interpreter"),
        renames=renames,
        adds=tuple(_enc(a, "a library name") for a in edit.add_needed),
    )


def _interp_of(elf: RawElf) -> bytes | None:
    ph = next((ph for ph in elf.phdrs if ph.p_type == PT_INTERP), None)
    return None if ph is None else elf.string_at(ph.p_offset, ph.file_end)


def _reduce(elf: RawElf, want: Want, names: DynNames) -> Want:
    """Drop the parts of the edit that are already true (an unchanged file is not written)."""
    runpath = want.runpath
    cur, other = ((names.runpath, names.rpath) if want.path_tag == DT_RUNPATH
                  else (names.rpath, names.runpath))
    if runpath is not None and cur == (runpath,) and not other:
        runpath = None
    interp = want.interp if want.interp != _interp_of(elf) else None
    renames = tuple((o, n) for o, n in want.renames if o in names.needed and o != n)
    adds = tuple(dict.fromkeys(a for a in want.adds if a not in names.needed
                               and a not in (n for _, n in renames)))
    return replace(want, runpath=runpath, interp=interp, renames=renames, adds=adds)


def _is_empty(want: Want) -> bool:
    return want.runpath is None and want.interp is None and not want.renames and not want.adds


def _check_interp(elf: RawElf, want: Want) -> None:
    """Only files with PT_INTERP; never a loader of another machine (when it can be read)."""
    if want.interp is None:
        return
    if _interp_of(elf) is None:
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


# --------------------------------------------------------------------------- expected result

@dataclass(frozen=True, slots=True)
class _Expect:
    names: DynNames
    interp: bytes | None


def _expected(elf: RawElf, want: Want, names: DynNames) -> _Expect:
    ren = dict(want.renames)
    needed = [ren.get(n, n) for n in names.needed]
    last = len(needed)
    needed[last:last] = list(want.adds)
    runpath, rpath = names.runpath, names.rpath
    if want.runpath is not None:
        runpath, rpath = ((want.runpath,), ()) if want.path_tag == DT_RUNPATH else \
            ((), (want.runpath,))
    versions = tuple((f, ren.get(n, n) if f else n) for f, n in names.versions)
    new = replace(names, needed=tuple(needed), runpath=runpath, rpath=rpath, versions=versions)
    return _Expect(new, want.interp if want.interp is not None else _interp_of(elf))


def _verify(path: str, expect: _Expect) -> None:
    """Re-read the written file; raise PatchError when it does not hold what was planned."""
    try:
        with open(path, "rb") as stream:
            elf = read_raw(path, stream.fileno())
            got = _Expect(dyn_names(elf), _interp_of(elf))
            _check_alignment(elf)
    except (ElfError, PatchError) as exc:
        raise PatchError(f"{path}: patched file fails to parse: {exc}") from exc
    if got != expect:
        raise PatchError(f"{path}: patched file reads back {_diff(got, expect)}")


def _check_alignment(elf: RawElf) -> None:
    for ph in elf.phdrs:
        if ph.p_type == PT_LOAD and (ph.p_offset - ph.p_vaddr) % PAGE:
            raise PatchError(f"{elf.path}: PT_LOAD at {ph.p_offset:#x} is not page-congruent")


def _diff(got: _Expect, want: _Expect) -> str:
    for name in ("needed", "soname", "runpath", "rpath", "other_tags", "versions"):
        a, b = getattr(got.names, name), getattr(want.names, name)
        if a != b:
            return f"{name}={_show(a)}, expected {_show(b)}"
    return f"interpreter={got.interp!r}, expected {want.interp!r}"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


# --------------------------------------------------------------------------- writing and undo

class _Undo:
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
        os.ftruncate(self.fd, self.size)
        for offset, data in reversed(self.saved):
            _pwrite_all(self.fd, data, offset)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


def _write(path: str, fd: int, elf: RawElf, plan: Plan, expect: _Expect) -> None:
    undo = _Undo(fd, elf.size)
    try:
        for offset, data in plan.writes:
            undo.write(offset, data)
        _verify(path, expect)
    except BaseException as exc:
        undo.restore()
        if isinstance(exc, OSError):
            raise PatchError(f"{path}: write failed ({exc.strerror or exc}); file restored"
                             ) from exc
        raise


# --------------------------------------------------------------------------- tiers

@dataclass(frozen=True, slots=True)
class _Before:
    names: DynNames
    interp: bytes | None


def _native(path: str, edit: Want, method: str | None) -> tuple[str | None, _Before]:
    """Tiers 1-2. Returns (method used or None when neither applies, facts before)."""
    with open(path, "r+b") as stream:
        fd = stream.fileno()
        elf = read_raw(path, fd)
        names = dyn_names(elf)  # refuses names outside DT_STRSZ, cyclic version chains
        before = _Before(names, _interp_of(elf))
        want = _reduce(elf, edit, names)
        if _is_empty(want):
            return "unchanged", before
        _check_interp(elf, want)
        plan = None
        if method in (None, "in-place"):
            plan = plan_in_place(elf, want)
        if plan is None and method in (None, "append"):
            plan = plan_append(elf, want)
        if plan is None:
            return None, before
        _write(path, fd, elf, plan, _expected(elf, want, names))
        return plan.method, before


def _lief(path: str, want: Want) -> None:
    """Tier 3: validated here, rewritten by a capped child process, verified, renamed over."""
    from cudasplit import _lief_worker

    with open(path, "rb") as stream:
        elf = read_raw(path, stream.fileno())
        names = dyn_names(elf)
        want = _reduce(elf, want, names)
        _check_interp(elf, want)
        expect = _expected(elf, want, names)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cudasplit-", dir=folder)
    os.close(fd)
    try:
        _lief_worker.run(path, tmp, want, elf.size)
        _verify(tmp, expect)
        _verify_after_strip(tmp, expect)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise PatchError(f"{path}: LIEF rewrite failed ({exc.strerror or exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _verify_after_strip(path: str, expect: _Expect) -> None:
    """LIEF's layout can break under a later ``strip`` (Nix strips every output): probe it."""
    strip = shutil.which("strip")
    if strip is None:
        return
    with tempfile.TemporaryDirectory(prefix=".cudasplit-strip-",
                                     dir=os.path.dirname(path)) as scratch:
        probe = os.path.join(scratch, "probe")
        done = subprocess.run([strip, "--strip-debug", "-o", probe, path], capture_output=True,
                              text=True, timeout=600, check=False)
        if done.returncode != 0 or "adjusted" in done.stderr:
            raise PatchError(f"{path}: LIEF output does not survive strip "
                             f"({done.stderr.strip().splitlines()[-1:] or 'failed'})")
        try:
            _verify(probe, expect)
        except PatchError as exc:
            raise PatchError(f"{path}: LIEF output breaks under strip: {exc}") from exc


# --------------------------------------------------------------------------- public API

def apply_edit(path: str | os.PathLike[str], edit: ElfEdit, *, patcher: str = "auto",
               ) -> EditResult:
    """Apply one planned edit; see the module docstring for tiers and guarantees.

    ``patcher``: "auto" (tiers 1, 2, then 3), "lief" (tier 3 only), or for tests and callers
    that must not fall back to LIEF: "native" (tiers 1-2), "in-place", "append" (one tier).
    A forced tier that does not apply raises PatchError with the file untouched.
    Raises ElfError when the file is not ELF or is damaged (file untouched), PatchError when
    it cannot be written (file restored), UnknownPatcherError for an unknown patcher, ValueError
    for a string with NUL.
    """
    name = os.fspath(path)
    if patcher not in PATCHERS:
        raise UnknownPatcherError(f"unknown patcher {patcher!r}; one of {', '.join(PATCHERS)}")
    want = _want(edit)
    try:
        with open(name, "rb") as stream:
            magic = stream.read(4)
    except OSError as exc:
        raise ElfError(f"{name}: cannot read ELF file ({exc.strerror or exc})") from exc
    if magic != b"\x7fELF":
        raise ElfError(f"{name}: not an ELF file")
    method: str | None = None
    before: _Before | None = None
    if patcher != "lief":
        forced = None if patcher in ("auto", "native") else patcher
        method, before = _native(name, want, forced)
    if method is None:
        if patcher not in ("auto", "lief"):
            raise PatchError(f"{name}: patcher {patcher!r} does not apply (no room in .dynstr, "
                             "no spare DT_NULL or program header slot)")
        if patcher == "auto":
            log.warning("%s: no room for an in-place or appended edit, using LIEF", name)
        if before is None:
            with open(name, "rb") as stream:
                elf = read_raw(name, stream.fileno())
                before = _Before(dyn_names(elf), _interp_of(elf))
        _lief(name, want)
        method = "lief"
    return _result(method, before, edit.tag)


def _result(method: str, before: _Before | None, tag: str) -> EditResult:
    if before is None:
        return EditResult(method)
    order = [("RUNPATH", before.names.runpath), ("RPATH", before.names.rpath)]
    if tag == "RPATH":
        order.reverse()
    old, old_tag = next(((v[-1].decode("utf-8", "surrogateescape"), n) for n, v in order if v),
                        (None, None))
    interp = None if before.interp is None else before.interp.decode("utf-8", "surrogateescape")
    return EditResult(method, old, old_tag, interp)


def set_runpath(path: str | os.PathLike[str], value: str, *, tag: str = "RUNPATH",
                patcher: str = "auto") -> PatchResult:
    """Make `path` carry exactly one search-path tag, `tag`, holding `value`.

    A thin wrapper around :func:`apply_edit`; raises PatchError for a file without a dynamic
    section, ValueError for a value with NUL or a bad tag.
    """
    if tag not in _TAG_BY_NAME:
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
        _want(ElfEdit(replace_needed=((old, new),)))  # still validate the names
        return False
    apply_edit(name, ElfEdit(replace_needed=((old, new),)), patcher="native")
    return True
