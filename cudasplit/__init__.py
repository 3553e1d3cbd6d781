"""cudasplit: split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs.

The public API never prints and never exits; every error derives from :class:`CudasplitError`.
It is the only way in: the ``cudasplit`` command (:mod:`cudasplit.cli`) uses nothing else.

* split: :func:`split`, :func:`split_to_dir`, :func:`split_nix`, :func:`split_many` (with
  :func:`batch_report`), :func:`repack_to_dir`; look: :func:`inspect`, :func:`explain`.
* options: :class:`SplitOptions`, with :func:`runpath_policy`, :func:`package_id` and
  :func:`platform_name` turning command-line words into its typed values.
* rules: :func:`load_ruleset`, :func:`ruleset_for`, :func:`check_rule_file`.
* split output: :func:`closure_of`, :func:`ldd`; releases: :func:`verify_manifest`,
  :func:`manifest_features`, :func:`nixify_manifest`, :func:`diff_releases`, and finer:
  :func:`load_manifest`, :func:`select_artifacts`, :func:`features_of` (one tarball).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from ._api import Explanation, explain, inspect, split, split_nix, split_to_dir
from ._api_batch import BatchResult, batch_report, directory_kind, split_many
from ._api_options import package_id, platform_name, runpath_policy
from ._api_rules import check_rule_file, package_entry_lines, ruleset_for
from ._layout import Layout, LayoutSpec
from ._manifest import load_manifest, select_artifacts
from ._model import OUTPUT_NAMES, Kind, Member, MemberType, PackageId
from ._pipeline import Progress, SplitOptions
from ._relreport import relative_report
from ._repack import RepackOptions, RepackResult, repack_to_dir
from ._report import MemberRecord, OutputRecord, Problem, Report
from ._rules import RuleSet, load_ruleset
from ._runpath import DEFAULT_DRIVER_LINK, RunpathPlan, RunpathPolicy, plan_runpath
from ._sources import DEFAULT_MAX_MEMBERS, open_source
from .errors import (
    CorruptArchiveError,
    CudasplitError,
    ElfError,
    LimitExceededError,
    ManifestError,
    NixEnvironmentError,
    OptionsError,
    OutputError,
    PatchError,
    ProblemsFound,
    RulesError,
    RunpathPolicyError,
    SourceError,
    UnsafeMemberError,
)
from .sinks import DirectorySink, MemorySink, Sink, StagedSink, TarballSink

if TYPE_CHECKING:
    from ._api_checks import LoadView, closure_of, ldd
    from ._api_release import (
        diff_releases,
        manifest_features,
        nixify_manifest,
        nixify_sets,
        verify_manifest,
    )
    from ._features import features_of

# The release and inspection tools load on first use (PEP 562): a split never needs them, and
# importing them with the rest cost every ``cudasplit split`` about 40 ms (measured with
# ``python -X importtime``), which is 4 % of splitting a 300 MB .tar.zst.
_LAZY = {
    "LoadView": "._api_checks", "closure_of": "._api_checks", "ldd": "._api_checks",
    "diff_releases": "._api_release", "manifest_features": "._api_release",
    "nixify_manifest": "._api_release", "verify_manifest": "._api_release",
    "nixify_sets": "._api_release",
    "features_of": "._features",
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
    "DEFAULT_MAX_MEMBERS",
    "OUTPUT_NAMES",
    "BatchResult",
    "CorruptArchiveError",
    "CudasplitError",
    "DirectorySink",
    "ElfError",
    "Explanation",
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
    "UnsafeMemberError",
    "__version__",
    "batch_report",
    "check_rule_file",
    "closure_of",
    "diff_releases",
    "directory_kind",
    "explain",
    "features_of",
    "inspect",
    "ldd",
    "load_manifest",
    "load_ruleset",
    "manifest_features",
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
    "runpath_policy",
    "select_artifacts",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
    "verify_manifest",
]
