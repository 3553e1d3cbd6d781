"""Target platforms of compiler packages: which ELF machine each package root and copy holds.

A split nvcc runs on the build machine (its own archive's platform) and compiles for a target
platform whose runtime (``cuda_cudart``) comes from ``--package-root``. Nothing in a path says
which machine a file is for, so the roots are read: every ELF file's ``e_machine``. A cudart
root of the wrong machine links programs that cannot load; a copied ``cicc`` of the wrong
machine leaves an nvcc that cannot run. Both fail the split before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from cudasplit._elf.read import elf_ident
from cudasplit._model import PackageId
from cudasplit._report import Problem
from cudasplit.errors import OptionsError

__all__ = ["MACHINE_NAMES", "PLATFORM_MACHINES", "TARGET_DIRS", "check_copied_machines",
           "check_target_roots", "elf_machine", "machine_of_tree", "platform_warnings"]

# e_machine values (the ELF gABI) and NVIDIA's platform names.
EM_X86_64, EM_AARCH64, EM_PPC64 = 62, 183, 21
MACHINE_NAMES: Mapping[int, str] = {EM_X86_64: "x86-64", EM_AARCH64: "AArch64",
                                    EM_PPC64: "PowerPC64"}
PLATFORM_MACHINES: Mapping[str, int] = {"linux-x86_64": EM_X86_64, "linux-sbsa": EM_AARCH64,
                                        "linux-aarch64": EM_AARCH64,
                                        "linux-ppc64le": EM_PPC64}
# NVIDIA's targets/<dir> names (nvcc's $(_TARGET_DIR_) is targets/<dir>).
TARGET_DIRS: Mapping[str, str] = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "sbsa-linux",
                                  "linux-aarch64": "aarch64-linux",
                                  "linux-ppc64le": "ppc64le-linux"}
_SCAN_LIMIT = 4096  # files looked at per root: a cudart root has a few dozen


def elf_machine(path: Path) -> int | None:
    """``e_machine`` of an ELF file; None for anything else (or unreadable)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    ident = elf_ident(head)
    return ident.machine if ident is not None else None


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
    """Each ELF file below ``root`` with its machine."""
    for path in _files(root):
        machine = elf_machine(path)
        if machine is not None:
            yield path, machine


def _name(machine: int) -> str:
    return MACHINE_NAMES.get(machine, f"e_machine {machine}")


def check_target_roots(roots: Mapping[str, str], target_platform: str) -> None:
    """Every ``cuda_cudart[.OUTPUT]`` root holds ELF files of the target's machine only."""
    want = PLATFORM_MACHINES.get(target_platform)
    if want is None:
        return
    for key, root in sorted(roots.items()):
        if key.split(".")[0] != "cuda_cudart" or not Path(root).is_dir():
            continue
        for path, machine in machine_of_tree(Path(root)):
            if machine != want:
                raise OptionsError(
                    f"package_roots {key}={root}: {path.relative_to(root)} is "
                    f"{_name(machine)}, but the target platform {target_platform} needs "
                    f"{_name(want)} (give the {target_platform} cuda_cudart, or the root's "
                    "platform as target_platform)")


def check_copied_machines(files: Iterable[tuple[str, Path]], build_platform: str | None,
                          package: str) -> list[tuple[str, Path, int]]:
    """The ELF files among copied ``(dest, path)`` with their machine; raises when one is not
    the build machine's (the compiler runs where its archive's platform says)."""
    want = PLATFORM_MACHINES.get(build_platform or "")
    found = []
    for dest, path in files:
        machine = elf_machine(path)
        if machine is None:
            continue
        if want is not None and machine != want:
            raise OptionsError(
                f"package_roots {package}: {path} (copied to {dest}) is {_name(machine)}, "
                f"but this compiler runs on {build_platform} ({_name(want)}); give the "
                f"{build_platform} {package}")
        found.append((dest, path, machine))
    return found


def platform_warnings(options_platform: str | None, package: PackageId) -> list[Problem]:
    """``--platform`` that contradicts the archive's own name (``...-linux-sbsa-...``)."""
    if options_platform and package.platform and options_platform != package.platform:
        return [Problem("platform-mismatch", None,
                        f"the platform given (platform {options_platform}) contradicts the "
                        f"archive's platform "
                        f"{package.platform} (its name); the package table's gates use "
                        f"{options_platform}")]
    return []
