"""Which machine an ELF file is for: its ``e_machine``, of one file or of every file below a
directory, and the machine's name.

Nothing in a path says which machine a file is for (a cross toolkit's ``cuda_cudart`` root, a
copied ``cicc``), so the files are read: twenty bytes of each, through :func:`.headers.elf_ident`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from cudasplit._elf.read.headers import elf_ident

__all__ = ["EM_AARCH64", "EM_PPC64", "EM_X86_64", "MACHINE_NAMES", "elf_machine",
           "machine_name", "machine_of_tree"]

# e_machine values (the ELF gABI).
EM_X86_64, EM_AARCH64, EM_PPC64 = 62, 183, 21
MACHINE_NAMES: Mapping[int, str] = {EM_X86_64: "x86-64", EM_AARCH64: "AArch64",
                                    EM_PPC64: "PowerPC64"}
_SCAN_LIMIT = 4096  # files looked at per tree: a cudart root has a few dozen


def elf_machine(path: Path) -> int | None:
    """``e_machine`` of an ELF file; None for anything else (or unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    ident = elf_ident(head)
    return ident.machine if ident is not None else None


def machine_name(machine: int) -> str:
    """``x86-64``, ``AArch64``, ``PowerPC64``, else ``e_machine N``."""
    return MACHINE_NAMES.get(machine, f"e_machine {machine}")


def _files(root: Path) -> Iterator[Path]:
    """Regular files below ``root`` (symlinks to files are read once, as their target)."""
    seen = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            seen += 1
            if seen > _SCAN_LIMIT:
                return
            yield path


def machine_of_tree(root: Path) -> Iterator[tuple[Path, int]]:
    """Each ELF file below ``root`` with its machine (at most 4,096 files are looked at)."""
    for path in _files(root):
        machine = elf_machine(path)
        if machine is not None:
            yield path, machine
