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

import importlib
import logging
from typing import TYPE_CHECKING, Any

from cudasplit._api.batch import BatchResult, batch_report, directory_kind, split_many
from cudasplit._api.entry import Explanation, explain, inspect, split, split_nix, split_to_dir
from cudasplit._api.options import package_id, platform_name, runpath_policy
from cudasplit._api.rules import check_rule_file, package_entry_lines, ruleset_for, ruleset_toml
from cudasplit._elf.plan import (
    DEFAULT_DRIVER_LINK,
    RunpathPlan,
    RunpathPolicy,
    plan_runpath,
)
from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import OUTPUT_NAMES, Kind, Member, MemberType, PackageId
from cudasplit._release.manifest import load_manifest, select_artifacts
from cudasplit._release.repack import RepackOptions, RepackResult, repack_to_dir
from cudasplit._report import MemberRecord, OutputRecord, Problem, Report, relative_report
from cudasplit._rulebook import RuleSet, load_ruleset
from cudasplit._source import DEFAULT_MAX_MEMBERS, open_source
from cudasplit._split.pipeline import Progress, SplitOptions
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
from cudasplit.sinks import DirectorySink, MemorySink, Sink, StagedSink, TarballSink

if TYPE_CHECKING:
    from cudasplit._api.checks import LoadView, closure_of, ldd

    # Types the public functions take and return, and the fields of their records: public
    # too, so a caller can name them (tests/cli/test_public_types.py walks the signatures).
    from cudasplit._api.entry import (
        RuleTrial,
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
    )
    from cudasplit._api.release import (
        diff_releases,
        manifest_features,
        nixify_manifest,
        nixify_sets,
        verify_manifest,
    )
    from cudasplit._globs import (
        Glob,
    )
    from cudasplit._release.budget import (
        BudgetViolation,
        Link,
    )
    from cudasplit._release.closure import (
        ClosureReport,
        ClosureWarning,
    )
    from cudasplit._release.closurescan import (
        OutputSize,
        Reference,
    )
    from cudasplit._release.closuresize import measure_outputs
    from cudasplit._release.diff import (
        Change,
        ReleaseDiff,
    )
    from cudasplit._release.features import (
        FeatureReport,
        FeatureResult,
        FeatureStatus,
        features_of,
    )
    from cudasplit._release.featurescan import (
        Features,
    )
    from cudasplit._release.ldd import (
        Resolution,
    )
    from cudasplit._release.manifest import (
        Artifact,
        Manifest,
        Package,
        VerifyReport,
        VerifyResult,
        VerifyStatus,
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
    from cudasplit._release.toolkit import ToolkitView, toolkit_view
    from cudasplit._report import (
        CopyRecord,
    )
    from cudasplit._rulebook import (
        AddNeeded,
        Decision,
        DlopenNeed,
        DropEdit,
        Gate,
        LinkInto,
        OutputWhen,
        PackageSettings,
        PcEdit,
        Rename,
        Rule,
        RuleRef,
        RunpathPackage,
        TextEdit,
        TextEditsFrom,
        Where,
    )
    from cudasplit._source import (
        Limits,
        Source,
    )

# The release and inspection tools load on first use (PEP 562): a split never needs them, and
# importing them with the rest cost every ``cudasplit split`` about 40 ms (measured with
# ``python -X importtime``), which is 4 % of splitting a 300 MB .tar.zst.
_LAZY = {
    "LoadView": "cudasplit._api.checks", "closure_of": "cudasplit._api.checks", "ldd":
    "cudasplit._api.checks",
    "diff_releases": "cudasplit._api.release", "manifest_features": "cudasplit._api.release",
    "nixify_manifest": "cudasplit._api.release", "verify_manifest": "cudasplit._api.release",
    "features_of": "cudasplit._release.features",
    # Guards for consumers' builds.
    "DEFAULT_FORBIDDEN_OUTPUTS": "cudasplit._api.guards", "Ambiguity": "cudasplit._api.guards",
    "BudgetReport": "cudasplit._api.guards", "DlopenAudit": "cudasplit._api.guards",
    "ambiguous_runpaths": "cudasplit._api.guards", "closure_budget": "cudasplit._api.guards",
    "consumer_guards_hook": "cudasplit._api.guards", "dlopen_audit": "cudasplit._api.guards",
    "measure_outputs": "cudasplit._release.closuresize",
    "ToolkitView": "cudasplit._release.toolkit", "toolkit_view": "cudasplit._release.toolkit",
    "nixify_sets": "cudasplit._api.release",
    # What is inside files and releases (GPU code, glibc floors, symbols, prune plan, SBOM).
    **{name: "cudasplit._api.inside" for name in (
        "ExportedSymbol", "FilePlan", "GpuCode", "Inside", "PrunePlan", "VersionNeed",
        "exported_symbols", "gpu_prune_plan", "inside_of", "sbom")},
    # Types public functions take or return, and their records' fields (loaded on first use).
    "RuleTrial": "cudasplit._api.entry",
    "Glob": "cudasplit._globs",
    "BudgetViolation": "cudasplit._release.budget", "Link": "cudasplit._release.budget",
    "ClosureReport": "cudasplit._release.closure", "ClosureWarning": "cudasplit._release.closure",
    "OutputSize": "cudasplit._release.closurescan", "Reference": "cudasplit._release.closurescan",
    "Change": "cudasplit._release.diff", "ReleaseDiff": "cudasplit._release.diff",
    "FeatureReport": "cudasplit._release.features", "FeatureResult": "cudasplit._release.features",
    "FeatureStatus": "cudasplit._release.features",
    "Features": "cudasplit._release.featurescan",
    "Resolution": "cudasplit._release.ldd",
    "Artifact": "cudasplit._release.manifest", "Manifest": "cudasplit._release.manifest",
    "Package": "cudasplit._release.manifest", "VerifyReport": "cudasplit._release.manifest",
    "VerifyResult": "cudasplit._release.manifest", "VerifyStatus": "cudasplit._release.manifest",
    "Assertion": "cudasplit._release.nixify", "NixifyResult": "cudasplit._release.nixify",
    "PackagePlan": "cudasplit._release.nixify", "PackageSet": "cudasplit._release.nixify",
    "Pin": "cudasplit._release.nixify", "PlatformPlan": "cudasplit._release.nixify",
    "SetPackage": "cudasplit._release.nixify", "SetsResult": "cudasplit._release.nixify",
    "CopyRecord": "cudasplit._report",
    "AddNeeded": "cudasplit._rulebook", "Decision": "cudasplit._rulebook",
    "DlopenNeed": "cudasplit._rulebook", "DropEdit": "cudasplit._rulebook",
    "Gate": "cudasplit._rulebook", "LinkInto": "cudasplit._rulebook",
    "OutputWhen": "cudasplit._rulebook", "PackageSettings": "cudasplit._rulebook",
    "PcEdit": "cudasplit._rulebook", "Rename": "cudasplit._rulebook",
    "Rule": "cudasplit._rulebook", "RuleRef": "cudasplit._rulebook",
    "RunpathPackage": "cudasplit._rulebook", "TextEdit": "cudasplit._rulebook",
    "TextEditsFrom": "cudasplit._rulebook", "Where": "cudasplit._rulebook",
    "Limits": "cudasplit._source", "Source": "cudasplit._source",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'cudasplit' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

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
    "PackagePlan",
    "PackageSet",
    "PackageSettings",
    "PatchError",
    "PcEdit",
    "Pin",
    "PlatformPlan",
    "Problem",
    "ProblemsFound",
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
    "select_artifacts",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
    "toolkit_view",
    "verify_manifest",
]
