"""CUDA 13.5 (NVIDIA's 13.5.37 wheels for nvcc, crt, nvrtc, runtime, nvJitLink and NVVM, laid
out as redist archives): each splits by its package table with no silent default. Every member
is placed by a rule that names it (the package's own, or the default profile's headers,
libraries, executables ...); the catch-all ``everything-else`` takes only the licence (and
libnvvm's libdevice, its single output's data); the outputs are the table's for 13.5; no
problem but the empty ``static``/``stubs`` outputs the wheels do not carry."""

from __future__ import annotations

import pytest

import cudasplit
from cudasplit import SplitOptions
from tests.support.wheeltrees import Wheel, redist_tarball

pytestmark = [pytest.mark.slow]

VERSION = "13.5.37"
WHEELS = {"cuda_nvcc": "nvidia-cuda-nvcc", "cuda_crt": "nvidia-cuda-crt",
          "cuda_nvrtc": "nvidia-cuda-nvrtc", "cuda_cudart": "nvidia-cuda-runtime",
          "libnvjitlink": "nvidia-nvjitlink", "libnvvm": "nvidia-nvvm"}
CATCH_ALL = "default.toml:everything-else"
EXPECTED_CATCH_ALL = {"LICENSE", "nvvm/libdevice/libdevice.10.bc"}
# The wheels ship no static archives or stubs; the redist archives do.
WHEELS_LACK = {"cuda_nvrtc": {"static", "stubs"}, "libnvjitlink": {"static", "stubs"}}
OUTPUTS = {"cuda_nvcc": {"out"}, "cuda_crt": {"out"}, "cuda_cudart": {"out"},
           "libnvvm": {"out"}, "cuda_nvrtc": {"out", "include", "lib"},
           "libnvjitlink": {"out", "include", "lib"}}


@pytest.mark.parametrize("pname", list(WHEELS))
def test_cuda_13_5_splits_by_rules(pname: str) -> None:
    tarball = redist_tarball(pname, Wheel(WHEELS[pname], VERSION, "13.5"), keep_elf=2)
    report = cudasplit.inspect(str(tarball), SplitOptions(cuda_version="13.5"))
    assert report.package["name"] == pname and report.package["version"] == VERSION
    assert report.rules_files[0].endswith(f"rules/packages/{pname}.toml")  # its own table
    caught = {m.path for m in report.members if m.rule == CATCH_ALL}
    assert caught <= EXPECTED_CATCH_ALL, caught
    assert all(m.rule for m in report.members if m.output), "a member placed by no rule"
    assert {m.output for m in report.members if m.output} == OUTPUTS[pname]
    empty = {p.message.split("'")[1] for p in report.problems if p.code == "empty-output"}
    assert empty == WHEELS_LACK.get(pname, set())
    assert [p for p in report.problems if p.code != "empty-output"] == []
