"""System tools the tests use: a missing one is a skip naming the Debian package, never a
failure, on any machine. ``CUDASPLIT_REQUIRE_TOOLS=1`` (set by ``.ci/run``, which installs
every package of ``.ci/apt-packages.txt``) turns that skip into a failure, so CI cannot pass
with a test silently skipped for a tool its list forgot."""

from __future__ import annotations

import os
import shutil

import pytest


def need(tool: str, package: str) -> str:
    """The path of ``tool``; skips (fails under ``CUDASPLIT_REQUIRE_TOOLS``) where it is
    missing, naming the Debian ``package`` that has it."""
    path = shutil.which(tool)
    if path is not None:
        return path
    reason = f"{tool} not installed (Debian: apt-get install {package}; see .ci/apt-packages.txt)"
    if os.environ.get("CUDASPLIT_REQUIRE_TOOLS"):
        pytest.fail(reason + "; CUDASPLIT_REQUIRE_TOOLS is set")
    pytest.skip(reason)
