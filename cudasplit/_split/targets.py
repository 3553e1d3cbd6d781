"""Target platforms of compiler packages: which ELF machine each package root and copy holds.

A split nvcc runs on the build machine (its own archive's platform) and compiles for a target
platform whose runtime (``cuda_cudart``) comes from ``--package-root``. Nothing in a path says
which machine a file is for, so the roots are read: every ELF file's ``e_machine``. A cudart
root of the wrong machine links programs that cannot load; a copied ``cicc`` of the wrong
machine leaves an nvcc that cannot run. Both fail the split before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from cudasplit._elf.read import (
    EM_AARCH64,
    EM_PPC64,
    EM_X86_64,
    elf_machine,
    machine_name,
    machine_of_tree,
)
from cudasplit._model import PackageId
from cudasplit._report import Problem
from cudasplit.errors import OptionsError

__all__ = ["PLATFORM_MACHINES", "TARGET_DIRS", "check_copied_machines", "check_target_roots",
           "platform_warnings"]

# NVIDIA's platform names and the machine each is for.
PLATFORM_MACHINES: Mapping[str, int] = {"linux-x86_64": EM_X86_64, "linux-sbsa": EM_AARCH64,
                                        "linux-aarch64": EM_AARCH64,
                                        "linux-ppc64le": EM_PPC64}
# NVIDIA's targets/<dir> names (nvcc's $(_TARGET_DIR_) is targets/<dir>).
TARGET_DIRS: Mapping[str, str] = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "sbsa-linux",
                                  "linux-aarch64": "aarch64-linux",
                                  "linux-ppc64le": "ppc64le-linux"}


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
                    f"{machine_name(machine)}, but the target platform {target_platform} needs "
                    f"{machine_name(want)} (give the {target_platform} cuda_cudart, or the root's "
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
                f"package_roots {package}: {path} (copied to {dest}) is {machine_name(machine)}, "
                f"but this compiler runs on {build_platform} ({machine_name(want)}); give the "
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
