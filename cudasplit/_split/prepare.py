"""What is fixed before the first member: identity, rule set, gates, outputs and layout.

:func:`prepare` runs once per split, after the source has read its first header (a tar source
learns the package from its top directory) and before any member is taken. The result is
frozen: every stage of the run sees the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit._report import Problem
from cudasplit._rulebook import (
    RuleSet,
    Where,
    default_rules_dir,
    load_ruleset,
    profile_dir,
    read_rule_file,
)
from cudasplit._split.classify import Normaliser
from cudasplit._split.libmajor import LibMajor
from cudasplit._split.options import SplitOptions, cuda_version
from cudasplit._split.patchstage import PatchSettings
from cudasplit._split.targets import check_target_roots, platform_warnings
from cudasplit.errors import OptionsError, RulesError

__all__ = ["RunPlan", "cuda_gated_keys", "no_rules_reason", "patch_settings", "prepare",
           "target_platform"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    package: PackageId
    ruleset: RuleSet
    where: Where                          # version gates of the package table
    cuda_major: str | None                # lib/<major>/ lifting
    declared: tuple[str, ...] | None      # the outputs asked for (None: every output)
    allowed: frozenset[str] | None        # declared + the base output: where fallbacks may go
    layout: Layout
    normalise: Normaliser
    lib_major: LibMajor                   # lib/ members held or routed (libmajor.py)
    warnings: tuple[Problem, ...] = ()


def prepare(package: PackageId, options: SplitOptions, layout: LayoutSpec,
            description: str = "") -> RunPlan:
    platform = options.platform or package.platform
    ruleset = load_ruleset(package.name, options.rules_files, options.rules_dir,
                           profile=options.profile, platform=platform)
    where = Where(package.version, cuda_version(options, package), platform,
                  options.python_version, options.glibc_version)
    warnings = [*platform_warnings(options.platform, package),
                *_rules_file_problems(package, options, description)]
    _check_compiler_target(ruleset, options, where.platform)
    _check_roots_exist(options, description or package.name)
    gated = cuda_gated_keys(ruleset.package)
    if where.cuda_version is None and gated:
        warnings.append(Problem("cuda-version-unknown", None, (
            f"the archive's name carries no CUDA version and none was given (cuda_version): "
            f"the package table's {', '.join(gated)} entries gated on it were applied as for "
            "any CUDA release; give it (cuda_version X.Y)")))
    if options.python_version is None and any(d.needs_python() for d in ruleset.package.drops):
        warnings.append(Problem("python-version-unknown", None, "the package table keeps only "
                                "the build Python's files here; give it (python_version X.Y); "
                                "all were kept"))
    # lib/<cudaMajor>/ replaces lib/ whenever the CUDA major is known.
    cuda_major = (options.cuda_major or package.cuda_variant
                  or (where.cuda_version or "").split(".")[0] or None)
    # Only multi-CUDA redists without a _cudaNN archive suffix may mix lib/ and
    # lib/<major>/: their lib/ members wait for the verdict (libmajor.py).
    major = cuda_major.split(".")[0] if cuda_major else None
    lib_major = LibMajor(major, hold=ruleset.package.redist != "cuda"
                         and not package.cuda_variant)
    declared = options.outputs or ruleset.package.outputs_for(where)
    _check_declared(ruleset, options.outputs)
    base = ruleset.profile.base_output
    allowed = None if declared is None else frozenset(declared) | ({base} if base else set())
    return RunPlan(package, ruleset, where, cuda_major, declared, allowed,
                   layout.resolve(package), Normaliser(ruleset, where, lib_major), lib_major,
                   tuple(warnings))


def cuda_gated_keys(package: object) -> tuple[str, ...]:
    """The package-table keys with an entry gated on the CUDA release (``cuda_since``,
    ``cuda_before``). ``pkgconfig_edits`` are not among them: a ``.pc`` file names its own
    release (``cudart-12.9.pc``), which its edits' gates read when the run knows none."""
    keys = []
    for key in fields(package):  # type: ignore[arg-type]
        value = getattr(package, key.name)
        entries = value if isinstance(value, tuple) else ()
        if key.name != "pkgconfig_edits" and any(
                getattr(getattr(e, "gate", None), "cuda_since", None)
                or getattr(getattr(e, "gate", None), "cuda_before", None) for e in entries):
            keys.append(key.name)
    return tuple(keys)


def _check_declared(ruleset: RuleSet, asked: tuple[str, ...] | None) -> None:
    """``--outputs`` of a profile whose packages name their own: only those names."""
    profile = ruleset.profile
    if asked is None or not profile.package_outputs:
        return
    known = (*profile.outputs, *(ruleset.package.outputs or ()))
    unknown = [name for name in asked if name not in known]
    if unknown:
        raise OptionsError(f"unknown output(s) {', '.join(map(repr, unknown))} for this "
                           f"package in profile {profile.name}; known: {', '.join(known)}")


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


def _rules_file_problems(package: PackageId, options: SplitOptions,
                         description: str) -> tuple[Problem, ...]:
    """A pname without ``rules/packages/<pname>.toml`` is split by the default profile alone:
    a renamed package (cuda_cccl -> cccl at CUDA 13.3) silently gets the wrong layout. A
    warning (``--strict`` fails on it), an error inside a Nix build; nothing when the caller
    chose the default rules (``--default-rules``) or brought rule files (``--rules``)."""
    if options.default_rules or options.rules_files:
        return ()
    base = profile_dir(options.rules_dir or default_rules_dir(), options.profile)
    if (base / "packages" / f"{package.name}.toml").is_file():
        return ()
    reason = no_rules_reason(package.name, base)
    text = (f"no rules/packages/{package.name}.toml: split by the default profile alone "
            + (f"(rules/no-rules.toml: {reason})" if reason else
               "(default_rules if that is meant, or a rule file in rules_files)"))
    if options.nix_build:
        raise RulesError(f"{description or package.name}: {text}")
    return (Problem("no-package-rules", None, text),)


def _check_roots_exist(options: SplitOptions, description: str) -> None:
    """Inside a Nix build every ``--package-root`` is a store path the derivation depends on:
    one that does not exist is a wrong expression, not something to warn about and skip (the
    nvcc.profile and ``.pc`` edits would silently lose it). Outside Nix they warn where used."""
    if not options.nix_build:
        return
    for key, root in options.package_roots:
        if not Path(root).is_dir():
            raise OptionsError(f"{description}: package_roots {key}={root}: no such "
                               "directory")


def no_rules_reason(pname: str, rules_dir: Path | None = None) -> str | None:
    """Why ``pname`` has no rules file on purpose (``rules/no-rules.toml``), else ``None``."""
    path = (rules_dir or default_rules_dir()) / "no-rules.toml"
    if not path.is_file():
        return None
    entry = read_rule_file(path).get("packages", {}).get(pname)
    return str(entry["reason"]) if isinstance(entry, dict) and "reason" in entry else None


def patch_settings(options: SplitOptions, *, writing: bool,
                   package_version: str | None) -> PatchSettings:
    """What the patch stage needs of the options (``writing`` False: a dry run)."""
    return PatchSettings(
        policy=options.runpath, patcher=options.patcher, jobs=options.effective_jobs(),
        package_roots=dict(options.package_roots), enabled=options.patch, writing=writing,
        strict=options.strict, package_version=package_version)
