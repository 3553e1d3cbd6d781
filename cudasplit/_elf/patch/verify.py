"""Verify a written file: it must read back exactly what the edit planned.

The search path, interpreter and DT_NEEDED list are as planned, every other dynamic string name
(SONAME, version need files and names, version definitions) reads the same as before, and the
program headers are sane; LIEF's output must also stay so after ``strip``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace

from cudasplit._elf.patch.delta import interp_of
from cudasplit._elf.patch.want import Want
from cudasplit._elf.read import (
    DT_RUNPATH,
    PAGE,
    PT_LOAD,
    DynNames,
    RawElf,
    dyn_names,
    read_raw,
)
from cudasplit.errors import ElfError, PatchError


@dataclass(frozen=True, slots=True)
class Expect:
    """What a file must read back: every dynamic name, and the interpreter."""

    names: DynNames
    interp: bytes | None


def expected(elf: RawElf, want: Want, names: DynNames) -> Expect:
    """The names the file must read after `want` (`names`: what it reads before)."""
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
    return Expect(new, want.interp if want.interp is not None else interp_of(elf))


def verify(path: str, expect: Expect) -> None:
    """Re-read the written file; raise PatchError when it does not hold what was planned."""
    try:
        with open(path, "rb") as stream:
            elf = read_raw(path, stream.fileno())
            got = Expect(dyn_names(elf), interp_of(elf))
            _check_alignment(elf)
    except (ElfError, PatchError) as exc:
        raise PatchError(f"{path}: patched file fails to parse: {exc}") from exc
    if got != expect:
        raise PatchError(f"{path}: patched file reads back {_diff(got, expect)}")


def _check_alignment(elf: RawElf) -> None:
    for ph in elf.phdrs:
        if ph.p_type == PT_LOAD and (ph.p_offset - ph.p_vaddr) % PAGE:
            raise PatchError(f"{elf.path}: PT_LOAD at {ph.p_offset:#x} is not page-congruent")


def _diff(got: Expect, want: Expect) -> str:
    for name in ("needed", "soname", "runpath", "rpath", "other_tags", "versions"):
        a, b = getattr(got.names, name), getattr(want.names, name)
        if a != b:
            return f"{name}={_show(a)}, expected {_show(b)}"
    return f"interpreter={got.interp!r}, expected {want.interp!r}"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."



def verify_after_strip(path: str, expect: Expect) -> None:
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
            verify(probe, expect)
        except PatchError as exc:
            raise PatchError(f"{path}: LIEF output breaks under strip: {exc}") from exc
