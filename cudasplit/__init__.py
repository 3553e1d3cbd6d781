"""cudasplit: split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs.

The public API never prints and never exits; every error derives from :class:`CudasplitError`.
"""

from __future__ import annotations

import logging

from ._api import (
    BatchResult,
    Explanation,
    explain,
    inspect,
    split,
    split_many,
    split_nix,
    split_to_dir,
)
from ._layout import Layout, LayoutSpec
from ._model import OUTPUT_NAMES, Kind, Member, MemberType, PackageId
from ._pipeline import Progress, SplitOptions
from ._repack import RepackOptions, RepackResult, repack_to_dir
from ._report import MemberRecord, OutputRecord, Problem, Report
from ._rules import RuleSet, load_ruleset
from ._runpath import RunpathPlan, RunpathPolicy, plan_runpath
from ._sources import open_source
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
from .sinks import DirectorySink, MemorySink, Sink
from .sinks._staged import StagedSink

__version__ = "0.1.0"

# The library logs (e.g. the LIEF fallback) but never prints: without this, logging's
# last-resort handler would write warnings to stderr of an application that set up nothing.
logging.getLogger("cudasplit").addHandler(logging.NullHandler())

__all__ = [
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
    "UnsafeMemberError",
    "__version__",
    "explain",
    "inspect",
    "load_ruleset",
    "open_source",
    "plan_runpath",
    "repack_to_dir",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
]
