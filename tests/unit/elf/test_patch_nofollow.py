"""Issue 24: the patcher opens a staged file without following symlinks, so a same-user
process that swaps the staged file for a link before the patch gets an error, never a write
through the link (the file it points at stays byte-identical)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from cudasplit import OutputError
from cudasplit._elf.patch import ElfEdit, FailFastBackend, set_runpath
from tests.support.builders import compile_shared


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    return compile_shared(tmp_path / "elsewhere", "libvictim.so", "int v(void) { return 1; }",
                          soname="libvictim.so", runpath="/old/dir")


@pytest.mark.parametrize("patcher", ["auto", "native", "in-place", "append"])
def test_set_runpath_refuses_a_symlink(tmp_path: Path, victim: Path, patcher: str) -> None:
    before = victim.read_bytes()
    staged = tmp_path / "staging" / "libx.so"
    staged.parent.mkdir()
    staged.symlink_to(victim)
    with pytest.raises(OSError) as info:
        set_runpath(staged, "$ORIGIN", patcher=patcher)
    assert info.value.errno == errno.ELOOP
    assert victim.read_bytes() == before and staged.is_symlink()


def test_the_split_backend_names_it_as_an_output_error(tmp_path: Path, victim: Path) -> None:
    before = victim.read_bytes()
    staged = tmp_path / "libx.so"
    staged.symlink_to(victim)
    with pytest.raises(OutputError, match=str(staged)):
        FailFastBackend("native").apply(str(staged), ElfEdit(runpath="$ORIGIN"))
    assert victim.read_bytes() == before


def test_a_regular_file_is_still_patched(tmp_path: Path, victim: Path) -> None:
    copy = tmp_path / "libcopy.so"
    copy.write_bytes(victim.read_bytes())
    set_runpath(copy, "$ORIGIN", patcher="native")
    assert copy.read_bytes() != victim.read_bytes()
