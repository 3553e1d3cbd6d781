"""cudasplit: split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs.

The public API never prints and never exits; every error derives from :class:`CudasplitError`.
It is the only way in: the ``cudasplit`` command (:mod:`cudasplit.cli`) uses nothing else.

* split: :func:`split`, :func:`split_to_dir`, :func:`split_nix`, :func:`split_many` (with
  :func:`batch_report`), :func:`repack_to_dir`; look: :func:`inspect`, :func:`explain`.
* options: :class:`SplitOptions`, with :func:`runpath_policy`, :func:`package_id` and
  :func:`platform_name` turning command-line words into its typed values.
* rules: :func:`load_ruleset`, :func:`ruleset_for`, :func:`check_rule_file`,
  :func:`ruleset_toml`.
* split output: :func:`closure_of`, :func:`ldd`, :func:`measure_outputs`, :func:`toolkit_view`
  (one toolkit prefix); consumers' builds:
  :func:`ambiguous_runpaths`, :func:`dlopen_audit`, :func:`closure_budget`,
  :func:`consumer_guards_hook`; releases:
  :func:`verify_manifest`, :func:`manifest_features`, :func:`nixify_manifest`,
  :func:`diff_releases`, and finer: :func:`load_manifest`, :func:`select_artifacts`,
  :func:`features_of` (one tarball).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Every public name loads on first use (PEP 562): ``import cudasplit`` imports nothing of the
# package, and ``cudasplit split`` loads the split and nothing else (no release tools, guards,
# LIEF, JSON Schema; tests/cli/test_startup.py checks which modules a split imports).
#
# To add a public name: put it under its module in _HOMES, import it under TYPE_CHECKING
# below (what type checkers and editors read), and list it in __all__. tests/cli/test_api.py
# fails, naming the name, when the three disagree.
_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit.errors": (
        "CorruptArchiveError", "CudasplitError", "ElfError", "LimitExceededError", "ManifestError",
        "NixEnvironmentError", "OptionsError", "OptionsTypeError", "OutputError", "PatchError",
        "ProblemsFound", "RulesError", "RunpathPolicyError", "SourceError", "ToolkitError",
        "UnsafeMemberError", "NotFoundError", "SourceNotADirectoryError", "SourceNotFoundError"),
    "cudasplit._run": ("DEFAULT_DRIVER_LINK", "DEFAULT_MAX_MEMBERS", "Progress"),
    "cudasplit._model": ("OUTPUT_NAMES", "Kind", "Member", "MemberType", "PackageId"),
    "cudasplit._layout": ("Layout", "LayoutSpec"),
    "cudasplit._report": (
        "MemberRecord", "OutputRecord", "Problem", "Report", "relative_report", "CopyRecord"),
    "cudasplit._split.options": ("SplitOptions",),
    "cudasplit._api.options": ("package_id", "platform_name", "runpath_policy"),
    "cudasplit._api.entry": (
        "Explanation", "explain", "inspect", "split", "split_nix", "split_to_dir", "RuleTrial"),
    "cudasplit._api.batch": ("BatchResult", "batch_report", "directory_kind", "split_many"),
    "cudasplit._api.rules": (
        "check_rule_file", "package_entry_lines", "ruleset_for", "ruleset_toml"),
    "cudasplit._elf.plan": ("RunpathPlan", "RunpathPolicy"),
    "cudasplit._api.runpath": ("plan_runpath",),
    "cudasplit._rulebook": (
        "RuleSet", "load_ruleset", "AddNeeded", "Decision", "DlopenNeed", "DropEdit", "Gate",
        "LinkInto", "OutputWhen", "PackageSettings", "PcEdit", "Rename", "Rule", "RuleRef",
        "RunpathPackage", "TextEdit", "TextEditsFrom", "Where", "PackageLink", "Profile"),
    "cudasplit._source": ("open_source", "Limits", "Source"),
    "cudasplit._sinks": ("DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink"),
    "cudasplit._release.repack": ("RepackOptions", "RepackResult", "repack_to_dir"),
    "cudasplit._api.checks": ("LoadView", "closure_of", "ldd"),
    "cudasplit._api.release": (
        "diff_releases", "manifest_features", "nixify_manifest", "nixify_sets", "verify_manifest"),
    "cudasplit._release.manifest": (
        "load_manifest", "select_artifacts", "Artifact", "Manifest", "Package", "VerifyReport",
        "VerifyResult", "VerifyStatus"),
    "cudasplit._release.features": (
        "features_of", "FeatureReport", "FeatureResult", "FeatureStatus", "Features"),
    "cudasplit._release.toolkit": ("ToolkitView", "toolkit_view"),
    "cudasplit._api.guards": (
        "DEFAULT_FORBIDDEN_OUTPUTS", "Ambiguity", "BudgetReport", "DlopenAudit",
        "ambiguous_runpaths", "closure_budget", "consumer_guards_hook", "dlopen_audit"),
    "cudasplit._release.nixify": (
        "Assertion", "NixifyResult", "PackagePlan", "PackageSet", "Pin", "PlatformPlan",
        "SetPackage", "SetsResult"),
    "cudasplit._release.budget": ("BudgetViolation", "Link"),
    "cudasplit._release.diff": ("Change", "ReleaseDiff"),
    "cudasplit._release.closure": (
        "ClosureReport", "ClosureWarning", "OutputSize", "Reference", "measure_outputs"),
    "cudasplit._api.inside": (
        "ExportedSymbol", "FilePlan", "GpuCode", "Inside", "PrunePlan", "VersionNeed",
        "exported_symbols", "gpu_prune_plan", "inside_of", "sbom", "sbom_documents"),
    "cudasplit._globs": ("Glob",),
    "cudasplit._release.ldd": ("Resolution",),
}
_LAZY = {name: module for module, names in _HOMES.items() for name in names}

if TYPE_CHECKING:
    from cudasplit._api.batch import BatchResult, batch_report, directory_kind, split_many
    from cudasplit._api.checks import LoadView, closure_of, ldd
    from cudasplit._api.entry import (
        Explanation,
        RuleTrial,
        explain,
        inspect,
        split,
        split_nix,
        split_to_dir,
    )
    from cudasplit._api.guards import (
        DEFAULT_FORBIDDEN_OUTPUTS,
        Ambiguity,
        BudgetReport,
        DlopenAudit,
        ambiguous_runpaths,
        closure_budget,
        consumer_guards_hook,
        dlopen_audit,
    )
    from cudasplit._api.inside import (
        ExportedSymbol,
        FilePlan,
        GpuCode,
        Inside,
        PrunePlan,
        VersionNeed,
        exported_symbols,
        gpu_prune_plan,
        inside_of,
        sbom,
        sbom_documents,
    )
    from cudasplit._api.options import package_id, platform_name, runpath_policy
    from cudasplit._api.release import (
        diff_releases,
        manifest_features,
        nixify_manifest,
        nixify_sets,
        verify_manifest,
    )
    from cudasplit._api.rules import check_rule_file, package_entry_lines, ruleset_for, ruleset_toml
    from cudasplit._api.runpath import plan_runpath
    from cudasplit._elf.plan import RunpathPlan, RunpathPolicy
    from cudasplit._globs import Glob
    from cudasplit._layout import Layout, LayoutSpec
    from cudasplit._model import OUTPUT_NAMES, Kind, Member, MemberType, PackageId
    from cudasplit._release.budget import BudgetViolation, Link
    from cudasplit._release.closure import (
        ClosureReport,
        ClosureWarning,
        OutputSize,
        Reference,
        measure_outputs,
    )
    from cudasplit._release.diff import Change, ReleaseDiff
    from cudasplit._release.features import (
        FeatureReport,
        FeatureResult,
        Features,
        FeatureStatus,
        features_of,
    )
    from cudasplit._release.ldd import Resolution
    from cudasplit._release.manifest import (
        Artifact,
        Manifest,
        Package,
        VerifyReport,
        VerifyResult,
        VerifyStatus,
        load_manifest,
        select_artifacts,
    )
    from cudasplit._release.nixify import (
        Assertion,
        NixifyResult,
        PackagePlan,
        PackageSet,
        Pin,
        PlatformPlan,
        SetPackage,
        SetsResult,
    )
    from cudasplit._release.repack import RepackOptions, RepackResult, repack_to_dir
    from cudasplit._release.toolkit import ToolkitView, toolkit_view
    from cudasplit._report import (
        CopyRecord,
        MemberRecord,
        OutputRecord,
        Problem,
        Report,
        relative_report,
    )
    from cudasplit._rulebook import (
        AddNeeded,
        Decision,
        DlopenNeed,
        DropEdit,
        Gate,
        LinkInto,
        OutputWhen,
        PackageLink,
        PackageSettings,
        PcEdit,
        Profile,
        Rename,
        Rule,
        RuleRef,
        RuleSet,
        RunpathPackage,
        TextEdit,
        TextEditsFrom,
        Where,
        load_ruleset,
    )
    from cudasplit._run import DEFAULT_DRIVER_LINK, DEFAULT_MAX_MEMBERS, Progress
    from cudasplit._sinks import DirectorySink, MemorySink, Sink, StagedSink, TarballSink
    from cudasplit._source import Limits, Source, open_source
    from cudasplit._split.options import SplitOptions
    from cudasplit.errors import (
        CorruptArchiveError,
        CudasplitError,
        ElfError,
        LimitExceededError,
        ManifestError,
        NixEnvironmentError,
        NotFoundError,
        OptionsError,
        OptionsTypeError,
        OutputError,
        PatchError,
        ProblemsFound,
        RulesError,
        RunpathPolicyError,
        SourceError,
        SourceNotADirectoryError,
        SourceNotFoundError,
        ToolkitError,
        UnsafeMemberError,
    )


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'cudasplit' has no attribute {name!r}")
    # __import__, not importlib.import_module: the same import, but one that
    # ``python -X importtime`` shows (benchmarks measure the split's imports with it).
    __import__(where)
    value = getattr(sys.modules[where], name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return list(__all__)


# The library logs (e.g. the LIEF fallback) but never prints: without this, logging's
# last-resort handler would write warnings to stderr of an application that set up nothing.
logging.getLogger("cudasplit").addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "DEFAULT_FORBIDDEN_OUTPUTS",
    "DEFAULT_MAX_MEMBERS",
    "OUTPUT_NAMES",
    "AddNeeded",
    "Ambiguity",
    "Artifact",
    "Assertion",
    "BatchResult",
    "BudgetReport",
    "BudgetViolation",
    "Change",
    "ClosureReport",
    "ClosureWarning",
    "CopyRecord",
    "CorruptArchiveError",
    "CudasplitError",
    "Decision",
    "DirectorySink",
    "DlopenAudit",
    "DlopenNeed",
    "DropEdit",
    "ElfError",
    "Explanation",
    "ExportedSymbol",
    "FeatureReport",
    "FeatureResult",
    "FeatureStatus",
    "Features",
    "FilePlan",
    "Gate",
    "Glob",
    "GpuCode",
    "Inside",
    "Kind",
    "Layout",
    "LayoutSpec",
    "LimitExceededError",
    "Limits",
    "Link",
    "LinkInto",
    "LoadView",
    "Manifest",
    "ManifestError",
    "Member",
    "MemberRecord",
    "MemberType",
    "MemorySink",
    "NixEnvironmentError",
    "NixifyResult",
    "NotFoundError",
    "OptionsError",
    "OptionsTypeError",
    "OutputError",
    "OutputRecord",
    "OutputSize",
    "OutputWhen",
    "Package",
    "PackageId",
    "PackageLink",
    "PackagePlan",
    "PackageSet",
    "PackageSettings",
    "PatchError",
    "PcEdit",
    "Pin",
    "PlatformPlan",
    "Problem",
    "ProblemsFound",
    "Profile",
    "Progress",
    "PrunePlan",
    "Reference",
    "ReleaseDiff",
    "Rename",
    "RepackOptions",
    "RepackResult",
    "Report",
    "Resolution",
    "Rule",
    "RuleRef",
    "RuleSet",
    "RuleTrial",
    "RulesError",
    "RunpathPackage",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "SetPackage",
    "SetsResult",
    "Sink",
    "Source",
    "SourceError",
    "SourceNotADirectoryError",
    "SourceNotFoundError",
    "SplitOptions",
    "StagedSink",
    "TarballSink",
    "TextEdit",
    "TextEditsFrom",
    "ToolkitError",
    "ToolkitView",
    "UnsafeMemberError",
    "VerifyReport",
    "VerifyResult",
    "VerifyStatus",
    "VersionNeed",
    "Where",
    "__version__",
    "ambiguous_runpaths",
    "batch_report",
    "check_rule_file",
    "closure_budget",
    "closure_of",
    "consumer_guards_hook",
    "diff_releases",
    "directory_kind",
    "dlopen_audit",
    "explain",
    "exported_symbols",
    "features_of",
    "gpu_prune_plan",
    "inside_of",
    "inspect",
    "ldd",
    "load_manifest",
    "load_ruleset",
    "manifest_features",
    "measure_outputs",
    "nixify_manifest",
    "nixify_sets",
    "open_source",
    "package_entry_lines",
    "package_id",
    "plan_runpath",
    "platform_name",
    "relative_report",
    "repack_to_dir",
    "ruleset_for",
    "ruleset_toml",
    "runpath_policy",
    "sbom",
    "sbom_documents",
    "select_artifacts",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
    "toolkit_view",
    "verify_manifest",
]
