"""Real NVIDIA bytes for tests: PyPI wheels, downloaded once into a cache outside the clone.

The cache is ``$CUDASPLIT_CACHE`` or ``~/.cache/cudasplit`` (``wheels/`` holds the ``.whl``
files as pip saved them, ``unpacked/<wheel stem>/`` their contents). CI's fresh clone on the
same machine reuses it, so only the first run pays for the download. Nothing here is committed.

When a wheel is not cached and cannot be downloaded (offline, registry refused), the test that
asked for it is skipped with the reason; ``CUDASPLIT_REQUIRE_WHEELS=1`` turns that skip into a
failure (for a run that must prove the real-bytes tests ran).

Usage::

    from tests.support.realwheels import wheel_root
    root = wheel_root("nvidia-cuda-cupti-cu12", "12.8.90")   # .../nvidia/cuda_cupti/lib/...
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Pinned versions: the CUDA 12.9 line (redistrib_12.9.1.json) and CUDA 13.0 where a test needs
# both majors. cupti 12.8.90 is the version whose append-tier output broke after ``strip``.
CU12: dict[str, str] = {
    "nvidia-cuda-runtime-cu12": "12.9.79",
    "nvidia-cuda-cupti-cu12": "12.8.90",
    "nvidia-cuda-nvrtc-cu12": "12.9.86",
    "nvidia-nvjitlink-cu12": "12.9.86",
    "nvidia-curand-cu12": "10.3.10.19",
    "nvidia-cufft-cu12": "11.4.1.4",
    "nvidia-cusparse-cu12": "12.5.10.65",
    "nvidia-cusolver-cu12": "11.7.5.82",
    "nvidia-nccl-cu12": "2.27.3",
    "nvidia-cuda-nvcc-cu12": "12.9.86",
    "nvidia-cublas-cu12": "12.9.1.4",
    "nvidia-cuda-cccl-cu12": "12.9.27",
}

# CUDA 13.0 (redistrib_13.0.2.json): nvcc's headers moved out into crt, cccl and nvvm packages.
CU13: dict[str, str] = {
    "nvidia-cuda-nvcc": "13.0.88",
    "nvidia-cuda-crt": "13.0.88",
    "nvidia-cuda-cccl": "13.0.85",
    "nvidia-nvvm": "13.0.88",
    "nvidia-cuda-runtime": "13.0.96",
    "nvidia-cuda-cupti": "13.0.85",
    "nvidia-cuda-nvrtc": "13.0.88",
    "nvidia-nvjitlink": "13.0.88",
}

PLATFORM_TAGS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64",
                 "manylinux_2_28_x86_64", "manylinux_2_34_x86_64", "manylinux1_x86_64",
                 "manylinux_2_5_x86_64", "manylinux2010_x86_64", "manylinux_2_12_x86_64")


def cache_dir() -> Path:
    base = os.environ.get("CUDASPLIT_CACHE") or os.path.join("~", ".cache", "cudasplit")
    return Path(base).expanduser()


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CUDASPLIT_REQUIRE_WHEELS"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise downloads between pytest workers and concurrent runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _find_wheel(wheels: Path, name: str, version: str, arch: str = "x86_64") -> Path | None:
    stem = name.replace("-", "_")
    # The cache holds both architectures: a wheel's platform tags end in its machine.
    hits = sorted(p for p in wheels.glob(f"{stem}-{version}-*.whl")
                  if p.name.removesuffix(".whl").endswith(f"_{arch}"))
    return hits[0] if hits else None


def wheel_file(name: str, version: str, arch: str = "x86_64") -> Path:
    """The ``.whl`` for ``name==version`` (Linux on ``arch``: x86_64 or aarch64),
    downloading it on first use."""
    wheels = cache_dir() / "wheels"
    with _locked(cache_dir() / ".lock"):
        found = _find_wheel(wheels, name, version, arch)
        if found is not None:
            return found
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--disable-pip-version-check", "-q", "-d", str(wheels)]
        for tag in platform_tags(arch):
            argv += ["--platform", tag]
        argv.append(f"{name}=={version}")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _skip_or_fail(f"cannot download {name}=={version}: {exc}")
            raise AssertionError("unreachable") from exc
        found = _find_wheel(wheels, name, version, arch)
        if done.returncode != 0 or found is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            _skip_or_fail(f"cannot download {name}=={version} (offline?): {tail[0]}")
        assert found is not None
        return found


def wheel_root(name: str, version: str, arch: str = "x86_64") -> Path:
    """The unpacked wheel (its top holds ``nvidia/...``), unpacked once into the cache."""
    whl = wheel_file(name, version, arch)
    dest = cache_dir() / "unpacked" / whl.stem
    stamp = dest / ".unpacked"
    with _locked(cache_dir() / ".lock"):
        if not stamp.exists():
            shutil.rmtree(dest, ignore_errors=True)
            with zipfile.ZipFile(whl) as zf:
                for info in zf.infolist():
                    target = zf.extract(info, dest)
                    # zipfile drops the mode bits; wheels keep them in external_attr.
                    mode = (info.external_attr >> 16) & 0o777
                    if mode and not info.is_dir():
                        os.chmod(target, mode)
            stamp.touch()
    return dest


def cu12(name: str) -> Path:
    """``wheel_root`` for a package pinned in :data:`CU12`."""
    return wheel_root(name, CU12[name])


# nvidia-cuda-cupti 13.0.85 is tagged manylinux_2_25 only. (Added here, not in the tuple above,
# so branches that extend the tuple merge without a conflict.)
PLATFORM_TAGS = (*PLATFORM_TAGS, "manylinux_2_25_x86_64")


def cu13(name: str) -> Path:
    """``wheel_root`` for a package pinned in :data:`CU13`."""
    return wheel_root(name, CU13[name])


# Issue 25: aarch64 wheels (NVIDIA tags them manylinux2014_aarch64 / manylinux_2_28_aarch64;
# their files are the linux-sbsa redist's).
AARCH64_TAGS = ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_27_aarch64",
                "manylinux_2_28_aarch64", "manylinux_2_34_aarch64", "manylinux_2_25_aarch64")


def platform_tags(arch: str) -> tuple[str, ...]:
    """The pip ``--platform`` tags for Linux wheels of ``arch``."""
    if arch == "aarch64":
        return AARCH64_TAGS
    if arch != "x86_64":
        raise ValueError(f"no wheel platform tags for {arch!r}")
    return PLATFORM_TAGS
