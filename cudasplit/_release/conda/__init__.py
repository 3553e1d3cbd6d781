"""A conda channel from a profile's split (``repack --format conda``): each output packed as a
``.conda`` with the profile's recipe metadata.

The profile's package metadata (``recipes``: ``<profile>/recipes/*.toml``), conda's grammar
for what that metadata says (``grammar``), one ``.conda`` from one staged output (``pack``)
and the sink that stages a split and packs every output into the channel (``channel``, a
:class:`~cudasplit.sinks.StagedSink`). Loaded only by ``repack --format conda``: a split
never reads a recipe.
"""

from __future__ import annotations

from cudasplit._release.conda.channel import CondaChannelSink
from cudasplit._release.conda.grammar import (
    build_problem,
    name_problem,
    spec_problem,
    version_problem,
)
from cudasplit._release.conda.recipes import RunValues, conda_profile, outputs_for

__all__ = [
    "CondaChannelSink",
    "RunValues",
    "build_problem",
    "conda_profile",
    "name_problem",
    "outputs_for",
    "spec_problem",
    "version_problem",
]
