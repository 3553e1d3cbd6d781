"""cudasplit: split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs.

The public API never prints and never exits; every error derives from :class:`CudasplitError`.
It is the only way in: the ``cudasplit`` command (:mod:`cudasplit.cli`) uses nothing else.

Here, what a split needs:

* split: :func:`split`, :func:`split_to_dir`, :func:`split_nix`, :func:`split_many` (with
  :func:`batch_report`), :func:`repack_to_dir`; look: :func:`inspect`, :func:`explain`.
* options: :class:`SplitOptions`, with :func:`runpath_policy`, :func:`package_id` and
  :func:`platform_name` turning command-line words into its typed values, and
  :func:`plan_runpath`, the RUNPATH one file would get.
* what a split hands back (:class:`Report` and its records), takes (:func:`open_source`, the
  sinks) and raises (the errors of :mod:`cudasplit.errors`).

One level down, documented modules for the other jobs, each imported as its name says
(``from cudasplit.rules import load_ruleset``); ``import cudasplit`` reaches each as an
attribute too:

* :mod:`cudasplit.sinks`: where a split's members go (also here);
* :mod:`cudasplit.errors`: the exception tree (also here);
* :mod:`cudasplit.rules`: rule files, the rule set, the package table;
* :mod:`cudasplit.releases`: manifests, verifying and describing tarballs, release diffs;
* :mod:`cudasplit.nixify`: Nix expressions and package sets from manifests;
* :mod:`cudasplit.outputs`: a split's closure, its loader view, a toolkit prefix over it;
* :mod:`cudasplit.guards`: the checks a consumer's build runs on split outputs;
* :mod:`cudasplit.elf`: GPU code, glibc floors and exported symbols of files;
* :mod:`cudasplit.sbom`: CycloneDX and SPDX bills of materials.

Before those modules, their names were all here: each still loads from here, with a
``DeprecationWarning`` naming its module.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cudasplit._lazy import lazy_face

__version__ = "0.1.0"

# Every public name loads on first use (PEP 562): ``import cudasplit`` imports nothing of the
# package but the loader (_lazy), and ``cudasplit split`` loads the split and nothing else (no
# release tools, guards, LIEF, JSON Schema; tests/cli/test_startup.py checks which modules a
# split imports).
#
# To add a public name: put it under its module in _HOMES (or in a documented module's), import
# it under TYPE_CHECKING below (what type checkers and editors read), and list it in __all__.
# tests/unit/api/test_public_face.py fails, naming the name, when the three disagree.
_HOMES: dict[str, tuple[str, ...]] = {
    "cudasplit.errors": (
        "CorruptArchiveError", "CudasplitError", "ElfError", "LimitExceededError", "ManifestError",
        "NixEnvironmentError", "NotFoundError", "OptionsError", "OptionsTypeError", "OutputError",
        "PatchError", "ProblemsFound", "RulesError", "RunpathPolicyError", "SourceError",
        "SourceNotADirectoryError", "SourceNotFoundError", "ToolkitError", "UnsafeMemberError"),
    "cudasplit._run": ("DEFAULT_DRIVER_LINK", "DEFAULT_MAX_MEMBERS", "Progress"),
    "cudasplit._model": ("OUTPUT_NAMES", "Kind", "Member", "MemberType", "PackageId"),
    "cudasplit._layout": ("Layout", "LayoutSpec"),
    "cudasplit._report": (
        "CopyRecord", "MemberRecord", "OutputRecord", "Problem", "Report", "relative_report"),
    "cudasplit._split.options": ("SplitOptions",),
    "cudasplit._api.options": ("package_id", "platform_name", "runpath_policy"),
    "cudasplit._api.entry": (
        "Explanation", "RuleTrial", "explain", "inspect", "split", "split_nix", "split_to_dir"),
    "cudasplit._api.batch": ("BatchResult", "batch_report", "directory_kind", "split_many"),
    "cudasplit._api.runpath": ("plan_runpath",),
    "cudasplit._elf.plan": ("RunpathPlan", "RunpathPolicy"),
    "cudasplit._source": ("Limits", "Source", "open_source"),
    "cudasplit._sinks": ("DirectorySink", "MemorySink", "Sink", "StagedSink", "TarballSink"),
    "cudasplit._release.repack": ("RepackOptions", "RepackResult", "repack_to_dir"),
}
# The documented modules one level down (cudasplit.<name>).
_SUBMODULES = ("errors", "sinks", "rules", "releases", "nixify", "outputs", "guards", "elf", "sbom")
# Names that were here before their module: name -> (where it lives, its module now).
_MOVED: dict[str, tuple[str, str]] = {
    "AddNeeded": ("cudasplit._rulebook", "cudasplit.rules"),
    "Ambiguity": ("cudasplit._api.guards", "cudasplit.guards"),
    "Artifact": ("cudasplit._release.manifest", "cudasplit.releases"),
    "Assertion": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "BudgetReport": ("cudasplit._api.guards", "cudasplit.guards"),
    "BudgetViolation": ("cudasplit._release.budget", "cudasplit.guards"),
    "Change": ("cudasplit._release.diff", "cudasplit.releases"),
    "ClosureReport": ("cudasplit._release.closure", "cudasplit.outputs"),
    "ClosureWarning": ("cudasplit._release.closure", "cudasplit.outputs"),
    "DEFAULT_FORBIDDEN_OUTPUTS": ("cudasplit._api.guards", "cudasplit.guards"),
    "Decision": ("cudasplit._rulebook", "cudasplit.rules"),
    "DlopenAudit": ("cudasplit._api.guards", "cudasplit.guards"),
    "DlopenNeed": ("cudasplit._rulebook", "cudasplit.rules"),
    "DropEdit": ("cudasplit._rulebook", "cudasplit.rules"),
    "ExportedSymbol": ("cudasplit._api.elf", "cudasplit.elf"),
    "FeatureReport": ("cudasplit._release.features", "cudasplit.releases"),
    "FeatureResult": ("cudasplit._release.features", "cudasplit.releases"),
    "FeatureStatus": ("cudasplit._release.features", "cudasplit.releases"),
    "Features": ("cudasplit._release.features", "cudasplit.releases"),
    "FilePlan": ("cudasplit._api.elf", "cudasplit.elf"),
    "Gate": ("cudasplit._rulebook", "cudasplit.rules"),
    "Glob": ("cudasplit._globs", "cudasplit.rules"),
    "GpuCode": ("cudasplit._api.elf", "cudasplit.elf"),
    "Inside": ("cudasplit._api.elf", "cudasplit.elf"),
    "Link": ("cudasplit._release.budget", "cudasplit.guards"),
    "LinkInto": ("cudasplit._rulebook", "cudasplit.rules"),
    "LoadView": ("cudasplit._api.checks", "cudasplit.outputs"),
    "Manifest": ("cudasplit._release.manifest", "cudasplit.releases"),
    "NixifyResult": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "OutputSize": ("cudasplit._release.closure", "cudasplit.outputs"),
    "OutputWhen": ("cudasplit._rulebook", "cudasplit.rules"),
    "Package": ("cudasplit._release.manifest", "cudasplit.releases"),
    "PackageLink": ("cudasplit._rulebook", "cudasplit.rules"),
    "PackagePlan": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "PackageSet": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "PackageSettings": ("cudasplit._rulebook", "cudasplit.rules"),
    "PcEdit": ("cudasplit._rulebook", "cudasplit.rules"),
    "Pin": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "PlatformPlan": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "Profile": ("cudasplit._rulebook", "cudasplit.rules"),
    "PrunePlan": ("cudasplit._api.elf", "cudasplit.elf"),
    "Reference": ("cudasplit._release.closure", "cudasplit.outputs"),
    "ReleaseDiff": ("cudasplit._release.diff", "cudasplit.releases"),
    "Rename": ("cudasplit._rulebook", "cudasplit.rules"),
    "Resolution": ("cudasplit._release.ldd", "cudasplit.outputs"),
    "Rule": ("cudasplit._rulebook", "cudasplit.rules"),
    "RuleRef": ("cudasplit._rulebook", "cudasplit.rules"),
    "RuleSet": ("cudasplit._rulebook", "cudasplit.rules"),
    "RunpathPackage": ("cudasplit._rulebook", "cudasplit.rules"),
    "SetPackage": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "SetsResult": ("cudasplit._release.nixify", "cudasplit.nixify"),
    "TextEdit": ("cudasplit._rulebook", "cudasplit.rules"),
    "TextEditsFrom": ("cudasplit._rulebook", "cudasplit.rules"),
    "ToolkitView": ("cudasplit._release.toolkit", "cudasplit.outputs"),
    "VerifyReport": ("cudasplit._release.manifest", "cudasplit.releases"),
    "VerifyResult": ("cudasplit._release.manifest", "cudasplit.releases"),
    "VerifyStatus": ("cudasplit._release.manifest", "cudasplit.releases"),
    "VersionNeed": ("cudasplit._api.elf", "cudasplit.elf"),
    "Where": ("cudasplit._rulebook", "cudasplit.rules"),
    "ambiguous_runpaths": ("cudasplit._api.guards", "cudasplit.guards"),
    "check_rule_file": ("cudasplit._api.rules", "cudasplit.rules"),
    "closure_budget": ("cudasplit._api.guards", "cudasplit.guards"),
    "closure_of": ("cudasplit._api.checks", "cudasplit.outputs"),
    "consumer_guards_hook": ("cudasplit._api.guards", "cudasplit.guards"),
    "diff_releases": ("cudasplit._api.release", "cudasplit.releases"),
    "dlopen_audit": ("cudasplit._api.guards", "cudasplit.guards"),
    "exported_symbols": ("cudasplit._api.elf", "cudasplit.elf"),
    "features_of": ("cudasplit._release.features", "cudasplit.releases"),
    "gpu_prune_plan": ("cudasplit._api.elf", "cudasplit.elf"),
    "inside_of": ("cudasplit._api.elf", "cudasplit.elf"),
    "ldd": ("cudasplit._api.checks", "cudasplit.outputs"),
    "load_manifest": ("cudasplit._release.manifest", "cudasplit.releases"),
    "load_ruleset": ("cudasplit._rulebook", "cudasplit.rules"),
    "manifest_features": ("cudasplit._api.release", "cudasplit.releases"),
    "measure_outputs": ("cudasplit._release.closure", "cudasplit.outputs"),
    "nixify_manifest": ("cudasplit._api.release", "cudasplit.nixify"),
    "nixify_sets": ("cudasplit._api.release", "cudasplit.nixify"),
    "package_entry_lines": ("cudasplit._api.rules", "cudasplit.rules"),
    "ruleset_for": ("cudasplit._api.rules", "cudasplit.rules"),
    "ruleset_toml": ("cudasplit._api.rules", "cudasplit.rules"),
    "sbom": ("cudasplit._api.sbom", "cudasplit.sbom"),
    "sbom_documents": ("cudasplit._api.sbom", "cudasplit.sbom"),
    "select_artifacts": ("cudasplit._release.manifest", "cudasplit.releases"),
    "toolkit_view": ("cudasplit._release.toolkit", "cudasplit.outputs"),
    "verify_manifest": ("cudasplit._api.release", "cudasplit.releases"),
}
__getattr__, __dir__ = lazy_face(__name__, _HOMES, submodules=_SUBMODULES, moved=_MOVED)

if TYPE_CHECKING:
    from cudasplit._api.batch import BatchResult, batch_report, directory_kind, split_many
    from cudasplit._api.entry import (
        Explanation,
        RuleTrial,
        explain,
        inspect,
        split,
        split_nix,
        split_to_dir,
    )
    from cudasplit._api.options import package_id, platform_name, runpath_policy
    from cudasplit._api.runpath import plan_runpath
    from cudasplit._elf.plan import RunpathPlan, RunpathPolicy
    from cudasplit._layout import Layout, LayoutSpec
    from cudasplit._model import OUTPUT_NAMES, Kind, Member, MemberType, PackageId
    from cudasplit._release.repack import RepackOptions, RepackResult, repack_to_dir
    from cudasplit._report import (
        CopyRecord,
        MemberRecord,
        OutputRecord,
        Problem,
        Report,
        relative_report,
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

# The library logs (e.g. the LIEF fallback) but never prints: without this, logging's
# last-resort handler would write warnings to stderr of an application that set up nothing.
logging.getLogger("cudasplit").addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "DEFAULT_MAX_MEMBERS",
    "OUTPUT_NAMES",
    "BatchResult",
    "CopyRecord",
    "CorruptArchiveError",
    "CudasplitError",
    "DirectorySink",
    "ElfError",
    "Explanation",
    "Kind",
    "Layout",
    "LayoutSpec",
    "LimitExceededError",
    "Limits",
    "ManifestError",
    "Member",
    "MemberRecord",
    "MemberType",
    "MemorySink",
    "NixEnvironmentError",
    "NotFoundError",
    "OptionsError",
    "OptionsTypeError",
    "OutputError",
    "OutputRecord",
    "PackageId",
    "PatchError",
    "Problem",
    "ProblemsFound",
    "Progress",
    "RepackOptions",
    "RepackResult",
    "Report",
    "RuleTrial",
    "RulesError",
    "RunpathPlan",
    "RunpathPolicy",
    "RunpathPolicyError",
    "Sink",
    "Source",
    "SourceError",
    "SourceNotADirectoryError",
    "SourceNotFoundError",
    "SplitOptions",
    "StagedSink",
    "TarballSink",
    "ToolkitError",
    "UnsafeMemberError",
    "__version__",
    "batch_report",
    "directory_kind",
    "explain",
    "inspect",
    "open_source",
    "package_id",
    "plan_runpath",
    "platform_name",
    "relative_report",
    "repack_to_dir",
    "runpath_policy",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
]
