"""What every ELF plan of a run is made against: the patch settings, the output roots, the
package's RUNPATH entries, and (once the stream has ended) the names placed in each directory.

Pure functions: the patch stage builds a context once before the first ELF member (the static
part, with the warnings it raises) and once more when the archive has ended (the names).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from cudasplit._elf.plan import HostLoader, LibraryIndex, PlanContext, RunpathPolicy
from cudasplit._layout import Layout
from cudasplit._model import OUTPUT_NAMES
from cudasplit._report import Problem
from cudasplit._rulebook import PackageSettings, added_needed
from cudasplit._source import member_parent
from cudasplit.errors import OutputError

__all__ = ["PatchSettings", "final_context", "known_layout", "static_context"]

_PACKAGE_REF = re.compile(r"^@([A-Za-z0-9_.+-]+)@(/.*)?$")


@dataclass(frozen=True, slots=True)
class PatchSettings:
    policy: RunpathPolicy
    patcher: str                                # auto | lief | native
    jobs: int
    package_roots: Mapping[str, str]            # for @pname@ in package rules
    enabled: bool                               # --no-patch turns it off
    writing: bool                               # False: dry run, plans are only reported
    strict: bool = False                        # unresolved names fail the run too
    package_version: str | None = None          # gates [package] dlopen entries


def known_layout(final_root: Callable[[str], str]) -> Layout:
    """Roots of every output the sink knows (a Nix builder declares only some)."""
    roots = []
    for name in OUTPUT_NAMES:
        try:
            roots.append((name, final_root(name)))
        except OutputError:
            continue
    return Layout(tuple(roots))


def static_context(settings: PatchSettings, package: PackageSettings, layout: Layout,
                   has_stubs: bool) -> tuple[PlanContext, tuple[Problem, ...]]:
    """The parts of the context that do not depend on which members arrived, and the
    warnings about package RUNPATH entries that cannot be filled."""
    base = settings.policy
    # Entries with a "stubs" component are stubs anyway; the stubs output is the rest.
    stubs_root = (layout.root("stubs"),) if has_stubs else ()
    appends, warnings = _package_appends(settings, package)
    policy = replace(base, stub_dirs=(*base.stub_dirs, *stubs_root), append=base.append + appends)
    context = PlanContext(policy, {}, {}, LibraryIndex.scan(policy.library_paths),
                          package.cuda_compat, dict(package.replace_needed), complete=False,
                          add_needed=added_needed(package.add_needed, settings.package_version),
                          host=HostLoader() if policy.host_loader else None)
    return context, warnings


def _package_appends(settings: PatchSettings, package: PackageSettings
                     ) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """Package rules' runpath_append with ``@pname@`` filled from ``package_roots``."""
    entries, warnings = [], []
    needs = [f"@{need.package}@/lib" for need in package.dlopen
             if need.applies_to(settings.package_version)]
    for entry in (*package.runpath_append, *needs):
        match = _PACKAGE_REF.match(entry)
        if match is None:
            entries.append(entry)
        elif match[1] in settings.package_roots:
            entries.append(settings.package_roots[match[1]] + (match[2] or ""))
        else:
            warnings.append(Problem("package-root-missing", None,
                                    f"package rules want {entry!r} in every RUNPATH; give "
                                    f"the root of {match[1]} (package_roots {match[1]}=DIR) "
                                    "to add it"))
    return tuple(entries), tuple(warnings)


def final_context(static: PlanContext, layout: Layout,
                  placed: Iterable[tuple[str, str]]) -> PlanContext:
    """``static`` completed with every (output, dest) placed."""
    names: dict[tuple[str, str], set[str]] = {}
    package_dirs: dict[str, str] = {}
    for output, dest in sorted(placed):
        parent, name = member_parent(dest), posixpath.basename(dest)
        names.setdefault((output, parent), set()).add(name)
        # Stubs never resolve anything at run time, static archives are not loaded.
        if output not in ("stubs", "static") and "stubs" not in dest.split("/"):
            package_dirs.setdefault(name, posixpath.join(layout.root(output), parent))
    return replace(static, names=names, package_dirs=package_dirs, complete=True)
