"""Fixtures the real-bytes tests share: what several modules would otherwise each rebuild."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def plain_split_13(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``plain_split_13(pname, platform="linux-x86_64")``: the CUDA 13.0 package from NVIDIA's
    wheel (laid out as its redist tarball) split with the default options, once per run. The
    cross, CMake and nvcc tests all build on these; treat them as read-only."""
    from cudasplit import SplitOptions, split_to_dir
    from tests.support.wheeltrees import WHEELS_13, redist_tarball

    base = tmp_path_factory.mktemp("plain13")
    made: dict[tuple[str, str], Path] = {}

    def split(pname: str, platform: str = "linux-x86_64") -> Path:
        if (pname, platform) not in made:
            out = base / f"{pname}-{platform}"
            split_to_dir(redist_tarball(pname, WHEELS_13[pname], platform=platform), out,
                         SplitOptions())
            made[(pname, platform)] = out
        return made[(pname, platform)]

    return split
