"""One channel of real NVIDIA bytes for every conda-forge test that needs one (built once a
session: the splits and packing are most of these tests' time).

x86_64: cuda_cudart, the nvcc-impl set (cuda_nvcc, cuda_crt, libnvvm, libnvptxcompiler),
cuda_cccl, cuda_nvrtc (its two smallest libraries: nothing runs NVRTC here), libcublas,
cuda_cupti. sbsa, for cross-compiling from the x86_64 nvcc: cuda_cudart, cuda_crt, cuda_cccl,
and cuda_nvcc/libnvvm without their aarch64 executables (only their target packages are
installed: the x86_64 tools run) and libnvptxcompiler. zstd level 1: the packages' compression
is not what is tested. The rattler package cache is shared too.
"""

from __future__ import annotations

import asyncio

import pytest

from cudasplit import RepackOptions, SplitOptions, repack_to_dir
from tests.conda.redist import RealChannel

X86 = (("cuda_cudart", None), ("cuda_nvcc", None), ("cuda_crt", None), ("libnvvm", None),
       ("libnvptxcompiler", None), ("cuda_cccl", None), ("cuda_nvrtc", 2), ("libcublas", None),
       ("cuda_cupti", None))
SBSA = (("cuda_cudart", None), ("cuda_crt", None), ("cuda_cccl", None), ("cuda_nvcc", 0),
        ("libnvvm", 0), ("libnvptxcompiler", None))


@pytest.fixture(scope="session")
def real_channel(tmp_path_factory: pytest.TempPathFactory) -> RealChannel:
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    pytest.importorskip("rattler", reason="py-rattler not installed")
    from tests.conda.client import index
    from tests.conda.redist import conda_tarball  # the wheel cache: realbytes

    channel = RealChannel(tmp_path_factory.mktemp("channel"),
                          tmp_path_factory.mktemp("rattler-cache"))
    options = SplitOptions(profile="conda-forge", cuda_version="13.0")
    pack = RepackOptions(fmt="conda", level=1)
    builds = [(p, "linux-x86_64", k) for p, k in X86] + [(p, "linux-sbsa", k) for p, k in SBSA]
    for pname, platform, keep in builds:
        result = repack_to_dir(conda_tarball(pname, platform=platform, keep_elf=keep),
                               channel.path, options, pack)
        channel.reports[(pname, platform)] = result.report
        channel.packages[(pname, platform)] = result.archives
        if keep is not None:
            channel.reduced.add((pname, platform))
    asyncio.run(index(channel.path))
    return channel

