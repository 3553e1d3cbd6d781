"""What is fixed before the first member: identity, rule set, gates, outputs and layout.

:func:`prepare` runs once per split, after the source has read its first header (a tar source
learns the package from its top directory) and before any member is taken. The result is
frozen: every stage of the run sees the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit._report import Problem
from cudasplit._rulebook import RuleSet, Where, load_ruleset
from cudasplit._split.classify import Normaliser
from cudasplit._split.libmajor import LibMajor
from cudasplit._split.options import SplitOptions, cuda_version
from cudasplit._split.patchstage import PatchSettings
from cudasplit._split.targets import check_target_roots, platform_warnings

__all__ = ["RunPlan", "patch_settings", "prepare", "target_platform"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    package: PackageId
    ruleset: RuleSet
    where: Where                          # version gates of the package table
    cuda_major: str | None                # lib/<major>/ lifting (D9)
    declared: tuple[str, ...] | None      # the outputs asked for (None: every output)
    allowed: frozenset[str] | None        # declared + out: where fallbacks may go
    layout: Layout
    normalise: Normaliser
    lib_major: LibMajor                   # D9: lib/ members held or routed (_libmajor.py)
    warnings: tuple[Problem, ...] = ()


def prepare(package: PackageId, options: SplitOptions, layout: LayoutSpec) -> RunPlan:
    ruleset = load_ruleset(package.name, options.rules_files, options.rules_dir)
    where = Where(package.version, cuda_version(options, package),
                  options.platform or package.platform, options.python_version)
    warnings = platform_warnings(options.platform, package)
    _check_compiler_target(ruleset, options, where.platform)
    if options.python_version is None and any(d.needs_python() for d in ruleset.package.drops):
        warnings.append(Problem("python-version-unknown", None, "the package table keeps only "
                                "the build Python's files here; pass --python-version X.Y "
                                "(kept all)"))
    # D9: lib/<cudaMajor>/ replaces lib/ whenever the CUDA major is known.
    cuda_major = (options.cuda_major or package.cuda_variant
                  or (where.cuda_version or "").split(".")[0] or None)
    # Only multi-CUDA redists without a _cudaNN archive suffix may mix lib/ and
    # lib/<major>/: their lib/ members wait for the verdict (_libmajor.py).
    major = cuda_major.split(".")[0] if cuda_major else None
    lib_major = LibMajor(major, hold=ruleset.package.redist != "cuda"
                         and not package.cuda_variant)
    declared = options.outputs or ruleset.package.outputs_for(where)
    allowed = None if declared is None else frozenset(declared) | {"out"}
    return RunPlan(package, ruleset, where, cuda_major, declared, allowed,
                   layout.resolve(package), Normaliser(ruleset, where, lib_major), lib_major,
                   tuple(warnings))


def target_platform(options: SplitOptions, build_platform: str | None) -> str | None:
    """The platform a compiler package builds for: ``--target-platform``, else its own."""
    return options.target_platform or build_platform


def _check_compiler_target(ruleset: RuleSet, options: SplitOptions,
                           build_platform: str | None) -> None:
    """A compiler package (nvcc: it searches other packages' roots) gets cuda_cudart roots
    of its target's machine, checked before anything is written."""
    package = ruleset.package
    if not (package.nvcc_includes or package.nvcc_libraries):
        return
    target = target_platform(options, build_platform)
    if target is not None:
        check_target_roots(dict(options.package_roots), target)


def patch_settings(options: SplitOptions, *, writing: bool,
                   package_version: str | None) -> PatchSettings:
    """What the patch stage needs of the options (``writing`` False: a dry run)."""
    return PatchSettings(
        policy=options.runpath, patcher=options.patcher, jobs=options.effective_jobs(),
        package_roots=dict(options.package_roots), enabled=options.patch, writing=writing,
        strict=options.strict, package_version=package_version)
