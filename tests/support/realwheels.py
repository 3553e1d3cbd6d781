"""Real NVIDIA bytes for tests: PyPI wheels, downloaded once into a cache outside the clone.

The cache is ``$CUDASPLIT_CACHE`` or ``~/.cache/cudasplit`` (``wheels/`` holds the ``.whl``
files as pip saved them, ``unpacked/<wheel stem>/`` their contents). CI's fresh clone on the
same machine reuses it, so only the first run pays for the download. Nothing here is committed.

When a wheel is not cached and cannot be downloaded (offline, registry refused), the test that
asked for it is skipped with the reason; ``CUDASPLIT_REQUIRE_WHEELS=1`` turns that skip into a
failure (for a run that must prove the real-bytes tests ran). Whether the network is there is
decided once per run: the first download that fails to connect (pip with one retry and a 20 s
timeout) makes every later uncached wheel skip at once, naming that failure;
``CUDASPLIT_OFFLINE=1`` decides it before any attempt.

A download says so on the terminal while it runs (pytest shows only dots otherwise): the wheel,
its size as pip reports it, and the bytes so far every few seconds. At the end of the run,
``tests/conftest.py`` prints which wheels the run used and downloaded, and their sizes
(:func:`usage`).

Usage::

    from tests.support.realwheels import wheel_root
    root = wheel_root("nvidia-cuda-cupti-cu12", "12.8.90")   # .../nvidia/cuda_cupti/lib/...
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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


@dataclass
class Usage:
    """What this run asked of the cache: every wheel used, those downloaded, and why the network
    was given up on (once per run), if it was."""

    used: dict[str, int] = field(default_factory=dict)        # wheel file name -> bytes
    downloaded: dict[str, int] = field(default_factory=dict)  # wheel file name -> bytes
    download_seconds: float = 0.0
    offline: str | None = None


_USAGE = Usage()
# Where a download reports progress: tests/conftest.py points it at pytest's terminal (past
# output capture); anywhere else, standard error.
say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
# pip's words for "the network is not there" (as opposed to "no such version").
_NO_NETWORK = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary "
                         r"failure in name resolution|Name or service not known|Network is "
                         r"unreachable|ConnectTimeout|ConnectionError|ProxyError|timed out|"
                         r"Max retries exceeded")
PROGRESS_EVERY = 5.0  # seconds between progress lines of one download


def usage() -> Usage:
    """This run's use of the wheel cache (for the summary at the end of the run)."""
    return _USAGE


def _record(found: Path) -> Path:
    _USAGE.used[found.name] = found.stat().st_size
    return found


def wheel_file(name: str, version: str, arch: str = "x86_64") -> Path:
    """The ``.whl`` for ``name==version`` (Linux on ``arch``: x86_64 or aarch64),
    downloading it on first use."""
    wheels = cache_dir() / "wheels"
    with _locked(cache_dir() / ".lock"):
        found = _find_wheel(wheels, name, version, arch)
        if found is not None:
            return _record(found)
        if os.environ.get("CUDASPLIT_OFFLINE") and _USAGE.offline is None:
            _USAGE.offline = "CUDASPLIT_OFFLINE is set"
        if _USAGE.offline is not None:
            _skip_or_fail(f"{name}=={version} is not cached and this run is offline "
                          f"({_USAGE.offline})")
        started = time.monotonic()
        code, output = _pip_download(name, version, arch, wheels)
        found = _find_wheel(wheels, name, version, arch)
        if code != 0 or found is None:
            tail = output.strip().splitlines()[-1:] or ["no output"]
            network = next((line.strip() for line in output.splitlines()
                            if _NO_NETWORK.search(line)), None)
            if network is not None:
                _USAGE.offline = f"downloading {name}=={version}: {network[:200]}"
                say(f"cudasplit tests: no network ({network[:200]}); from now on every "
                    "real-bytes test whose wheel is not cached skips at once")
            _skip_or_fail(f"cannot download {name}=={version} (offline?): {tail[0]}")
        assert found is not None
        _USAGE.downloaded[found.name] = found.stat().st_size
        _USAGE.download_seconds += time.monotonic() - started
        return _record(found)


def _pip_download(name: str, version: str, arch: str, wheels: Path) -> tuple[int, str]:
    """``pip download`` of one wheel into ``wheels``, saying on the terminal what it fetches
    and how far it got. Returns pip's exit status (-1: it could not run) and its output."""
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--progress-bar", "off", "--retries", "1",
            "--timeout", "20", "-d", str(wheels)]
    for tag in platform_tags(arch):
        argv += ["--platform", tag]
    argv.append(f"{name}=={version}")
    wheels.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(dir=wheels.parent, prefix=".download-") as scratch:
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, env={**os.environ, "TMPDIR": scratch})
        except OSError as exc:
            return -1, str(exc)
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
        reader.start()
        _watch(proc, lines, Path(scratch), wheels, f"{name}=={version}")
        reader.join(timeout=10)
        proc.stdout.close()
    return proc.returncode, "".join(lines)


def _largest_under(path: Path) -> int:
    """The size of the largest file at or below ``path``: the wheel being written (pip creates,
    copies and removes files meanwhile)."""
    largest = 0
    for one in [path, *(path.rglob("*") if path.is_dir() else ())]:
        try:
            largest = max(largest, one.stat().st_size if one.is_file() else 0)
        except OSError:
            continue
    return largest


def _watch(proc: subprocess.Popen[str], lines: list[str], scratch: Path, wheels: Path,
           what: str) -> None:
    """Every few seconds, the bytes pip has written so far (into ``scratch``, its TMPDIR, or
    straight into ``wheels``); kills pip after 15 minutes."""
    before = {f.name for f in wheels.iterdir()}
    deadline = time.monotonic() + 900
    announced = False
    while proc.poll() is None:
        try:
            proc.wait(timeout=PROGRESS_EVERY)
            break
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            lines.append(f"\npip download of {what} killed after 15 minutes\n")
            return
        size = next((m.group(1) for line in lines
                     if (m := re.search(r"Downloading .*\(([\d.]+ [kMG]B)\)", line))), None)
        if size is None:  # still asking the index
            continue
        if not announced:
            say(f"cudasplit tests: downloading {what} ({size}) into {cache_dir()}")
            announced = True
        # pip writes into its TMPDIR, then copies into wheels/: the largest file so far.
        got = max([_largest_under(scratch),
                   *(_largest_under(f) for f in wheels.iterdir() if f.name not in before)])
        say(f"cudasplit tests: {what}: {got / 1e6:,.0f} MB of {size}")


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
