"""Which outputs a redistributable has: one tarball's flags, member by member (``scan``), and
the ``feature_*.json`` report of a tarball or of every tarball of a manifest (``report``)."""

from __future__ import annotations

from cudasplit._release.features.report import (
    FeatureReport,
    FeatureResult,
    FeatureStatus,
    dump_feature_json,
    features_for_manifest,
    features_of,
)
from cudasplit._release.features.scan import Features

__all__ = [
    "FeatureReport",
    "FeatureResult",
    "FeatureStatus",
    "Features",
    "dump_feature_json",
    "features_for_manifest",
    "features_of",
]
