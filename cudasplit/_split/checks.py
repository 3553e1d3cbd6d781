"""End-of-run checks: pure functions of the report and the placements that return problems.

The end of the run hands what they return to the report writer and fails once, at the end
(``--strict``, ``--check-fhs-refs``), with a message naming the option that changes the outcome.
They read an assembled report (a fresh copy: nothing they could change is the writer's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cudasplit._model import PackageId
from cudasplit._nix import NixSupport, find_fhs_refs
from cudasplit._report import Problem, Report
from cudasplit._rulebook import PackageSettings, Where
from cudasplit._split.links import BUILTIN
from cudasplit._split.placements import Placements

__all__ = ["STRICT_WARNINGS", "declared_output_problems", "fhs_problems", "nix_support_info",
           "strict_failures", "unclaimed_problems"]

# Warnings that --strict treats as problems: a RUNPATH entry the package rules want is
# missing, a DT_NEEDED library will not be found at run time, the package has no rules file,
# or --platform contradicts the archive's name.
STRICT_WARNINGS = frozenset({"package-root-missing", "needed-unresolved", "no-package-rules",
                             "platform-mismatch"})


def declared_output_problems(report: Report, declared: Sequence[str],
                             package: PackageSettings,
                             holding: frozenset[str] = frozenset()) -> list[Problem]:
    """``holding``: outputs that hold links of their own (a profile whose symlinks follow
    their own rule: conda-forge's cuda-cudart holds only links), not empty either."""
    # Like Nixpkgs, out and dev may stay empty (they carry nix-support files anyway).
    exempt = {"out", "dev", *package.optional_outputs, *holding}
    problems = []
    for name in declared:
        record = report.outputs.get(name)
        if name not in exempt and (record is None or record.files == 0):
            problems.append(Problem("empty-output", None,
                                    f"declared output {name!r} received no files"))
    return problems


def unclaimed_problems(report: Report) -> list[Problem]:
    return [Problem("unclaimed", record.path, "no rule claimed this member (it went to out)")
            for record in report.members if record.rule == f"{BUILTIN}:unclaimed"]


def strict_failures(report: Report) -> list[Problem]:
    return [*report.problems, *(w for w in report.warnings if w.code in STRICT_WARNINGS)]


def fhs_problems(staged_roots: Mapping[str, Path]) -> list[Problem]:
    """checkCudaFhsRefs over the staged outputs: one problem per file mentioning ``/usr/``."""
    hits = find_fhs_refs({o: r for o, r in staged_roots.items() if r.is_dir()})
    return [Problem("fhs-reference", path, f"{output}: mentions /usr/ (the package table "
                    "does not set allow_fhs_references; checkCudaFhsRefs)")
            for output, path in hits]


def nix_support_info(package: PackageSettings, ident: PackageId, where: Where,
                     outputs: Sequence[str], placements: Placements, driver_lib: str | None,
                     roots: tuple[tuple[str, str], ...],
                     component_hook: str | None = None,
                     consumer_guards: bool = False) -> NixSupport:
    compiler = package.compiler
    compiler_output = next((o for (o, d) in placements.occupied if d == compiler), None)
    stubs = sorted({o for (o, d) in placements.output_dirs if d in ("lib/stubs", "stubs")})
    return NixSupport(
        pname=ident.name, version=ident.version, cuda_version=where.cuda_version,
        propagated=package.propagated(list(outputs)),
        compiler=compiler, compiler_output=compiler_output, stubs_outputs=tuple(stubs),
        driver_lib=driver_lib or "/run/opengl-driver/lib", roots=roots,
        component_hook=component_hook, consumer_guards=consumer_guards)
