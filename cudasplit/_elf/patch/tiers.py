"""Tiers 1-3 on one file: plan, write through an undo log, verify, restore on failure.

Tiers 1-2 write in place through :class:`Undo` (the overwritten bytes plus the original length:
a file that fails verification is restored byte-identically). Tier 3 (LIEF) writes a scratch
copy in a capped child process and renames it over the file only once it verifies.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace

from cudasplit._elf.patch.append import plan_append
from cudasplit._elf.patch.delta import (
    changes_nothing,
    check_interp,
    interp_of,
    reduce_to_changes,
)
from cudasplit._elf.patch.inplace import plan_in_place
from cudasplit._elf.patch.liefbudget import MAX_CACHED, FallbackBudget, now
from cudasplit._elf.patch.verify import Expect, expected, verify, verify_after_strip
from cudasplit._elf.patch.want import Plan, Want
from cudasplit._elf.read import DynNames, RawElf, dyn_names, read_raw
from cudasplit.errors import PatchError


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
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cudasplit-", dir=folder)
    os.close(fd)
    try:
        run(path, tmp, want, size)
        try:
            verify(tmp, expect)
            verify_after_strip(tmp, expect)
        except PatchError as exc:  # name the file, not the scratch copy (gone when read)
            raise PatchError(str(exc).replace(tmp, path)) from exc
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise PatchError(f"{path}: LIEF rewrite failed ({exc.strerror or exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _replace_with(path: str, data: bytes, expect: Expect) -> None:
    """Write an identical input's verified result over `path` (renamed into place)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cudasplit-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        verify(tmp, expect)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise PatchError(f"{path}: LIEF rewrite failed ({exc.strerror or exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
