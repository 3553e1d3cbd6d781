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
    OptionsError,
    OptionsTypeError,
    OutputError,
    PatchError,
    ProblemsFound,
    RulesError,
    RunpathPolicyError,
    SourceError,
    ToolkitError,
    UnsafeMemberError,
)
from cudasplit.sinks import DirectorySink, MemorySink, Sink, StagedSink, TarballSink

if TYPE_CHECKING:
    from cudasplit._api.checks import LoadView, closure_of, ldd
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
    from cudasplit._release.closuresize import measure_outputs
    from cudasplit._release.features import features_of
    from cudasplit._release.toolkit import ToolkitView, toolkit_view

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
        "ExportedSymbol", "GpuCode", "Inside", "PrunePlan", "VersionNeed", "exported_symbols",
        "gpu_prune_plan", "inside_of", "sbom")},
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
    "Ambiguity",
    "BatchResult",
    "BudgetReport",
    "CorruptArchiveError",
    "CudasplitError",
    "DirectorySink",
    "DlopenAudit",
    "ElfError",
    "Explanation",
    "ExportedSymbol",
    "GpuCode",
    "Inside",
    "Kind",
    "Layout",
    "LayoutSpec",
    "LimitExceededError",
    "LoadView",
    "ManifestError",
    "Member",
    "MemberRecord",
    "MemberType",
    "MemorySink",
    "NixEnvironmentError",
    "OptionsError",
    "OptionsTypeError",
    "OutputError",
    "OutputRecord",
    "PackageId",
    "PatchError",
    "Problem",
    "ProblemsFound",
    "Progress",
    "PrunePlan",
    "RepackOptions",
    "RepackResult",
    "Report",
    "RuleSet",
    "RulesError",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "Sink",
    "SourceError",
    "SplitOptions",
    "StagedSink",
    "TarballSink",
    "ToolkitError",
    "ToolkitView",
    "UnsafeMemberError",
    "VersionNeed",
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
