"""Package ``copy_packages`` (cuda_nvcc 13: libnvvm's tree into ``nvvm/``), planned as values.

The plan lists each file and link of the other package's output with the output it goes to;
the split loop writes them through the sink and the link planner. Its ``nix-support/`` stays
behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cudasplit._report import Problem
from cudasplit._rulebook import PackageSettings, Where
from cudasplit._split.rewrites import package_root

__all__ = ["CopiedEntry", "plan_copies"]


@dataclass(frozen=True, slots=True)
class CopiedEntry:
    output: str
    dest: str
    path: Path               # the file on disk (read when written)
    link: str | None         # symlink text; None: a regular file
    package: str = ""        # the package copied from


def plan_copies(package: PackageSettings, where: Where, roots: Mapping[str, str],
                output_of: Callable[[str], str]) -> tuple[list[CopiedEntry], list[Problem]]:
    entries: list[CopiedEntry] = []
    warnings: list[Problem] = []
    for entry in package.copy_packages:
        if not entry.gate.applies(where):
            continue
        root = package_root(roots, entry.package, "out")
        if root is None or not Path(root).is_dir():
            warnings.append(Problem("package-root-missing", None, f"{entry.package} is copied "
                                    f"into {entry.subdir}/: give its root (package_roots "
                                    f"{entry.package}=DIR)"))
            continue
        entries.extend(_tree(Path(root), entry.subdir, output_of, entry.package))
    return entries, warnings


def _tree(root: Path, subdir: str, output_of: Callable[[str], str],
          package: str) -> Iterator[CopiedEntry]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        real_dir = path.is_dir() and not path.is_symlink()
        if real_dir or rel.split("/", 1)[0] == "nix-support":
            continue
        dest = f"{subdir}/{rel}"
        link = os.readlink(path) if path.is_symlink() else None
        yield CopiedEntry(output_of(dest), dest, path, link, package)
