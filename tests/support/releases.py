"""Two small CUDA releases (12.9 and 13.0) laid out as NVIDIA redistributables, from real wheels.

Each pinned wheel's ``nvidia/<dir>/`` tree becomes ``<pname>-linux-x86_64-<version>-archive/``
in an uncompressed tarball (the bytes are NVIDIA's; the compression is not what is tested here,
and plain tar keeps building and reading them cheap), plus a ``redistrib_<label>.json`` that
names them with their sha256 (NVIDIA's relative paths, so the URLs look real). Built once into
``<cache>/releases/<label>/`` and reused; a different pin set gets a different directory.

The release-parity work may bring a shared helper (``tests/wheeltrees.py``); this one is kept
private and small until then.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.realwheels import CU12, CU13, _locked, cache_dir, wheel_root


@dataclass(frozen=True)
class Pin:
    pname: str      # redistributable name
    wheel: str      # PyPI name
    subdir: str     # the wheel's directory under nvidia/


# CUDA 12.9: eight packages, libcusparse -> libnvjitlink is a real cross-package DT_NEEDED.
RELEASE_12_9 = (
    Pin("cuda_cccl", "nvidia-cuda-cccl-cu12", "cuda_cccl"),
    Pin("cuda_cudart", "nvidia-cuda-runtime-cu12", "cuda_runtime"),
    Pin("cuda_cupti", "nvidia-cuda-cupti-cu12", "cuda_cupti"),
    Pin("cuda_nvcc", "nvidia-cuda-nvcc-cu12", "cuda_nvcc"),
    Pin("cuda_nvrtc", "nvidia-cuda-nvrtc-cu12", "cuda_nvrtc"),
    Pin("libcurand", "nvidia-curand-cu12", "curand"),
    Pin("libcusparse", "nvidia-cusparse-cu12", "cusparse"),
    Pin("libnvjitlink", "nvidia-nvjitlink-cu12", "nvjitlink"),
)
# CUDA 13.0: nvcc's crt headers, CCCL and NVVM are packages of their own (cuda_crt, libnvvm).
RELEASE_13_0 = (
    Pin("cuda_cccl", "nvidia-cuda-cccl", "cu13"),
    Pin("cuda_crt", "nvidia-cuda-crt", "cu13"),
    Pin("cuda_cudart", "nvidia-cuda-runtime", "cu13"),
    Pin("cuda_cupti", "nvidia-cuda-cupti", "cu13"),
    Pin("cuda_nvcc", "nvidia-cuda-nvcc", "cu13"),
    Pin("cuda_nvrtc", "nvidia-cuda-nvrtc", "cu13"),
    Pin("libnvjitlink", "nvidia-nvjitlink", "cu13"),
    Pin("libnvvm", "nvidia-nvvm", "cu13"),
)
RELEASES = {"12.9.1": (RELEASE_12_9, CU12), "13.0.2": (RELEASE_13_0, CU13)}
_SKIP = ("__init__.py", "__pycache__", ".metadata")
LAYOUT = 1


@dataclass(frozen=True)
class Release:
    label: str
    manifest: Path
    tarballs: Path          # flat directory of the tarballs
    versions: dict[str, str]  # pname -> version
    roots: dict[str, Path]    # pname -> the unpacked wheel directory its tarball was made from

    def tarball(self, pname: str) -> Path:
        return self.tarballs / f"{pname}-linux-x86_64-{self.versions[pname]}-archive.tar"


def release(label: str) -> Release:
    """Build (once) and return the release; skips the test when a wheel cannot be had."""
    pins, versions = RELEASES[label]
    have = {p.pname: versions[p.wheel] for p in pins}
    # Bump LAYOUT when _build changes what it writes: the cache key changes with it.
    key = hashlib.sha256(json.dumps([LAYOUT, sorted(have.items())]).encode()).hexdigest()[:12]
    base = cache_dir() / "releases" / f"{label}-{key}"
    roots = {p.pname: wheel_root(p.wheel, versions[p.wheel]) / "nvidia" / p.subdir for p in pins}
    with _locked(cache_dir() / ".releases.lock"):
        if not (base / "done").exists():
            _build(base, label, pins, have, roots)
    return Release(label, base / f"redistrib_{label}.json", base / "tarballs", have, roots)


def _build(base: Path, label: str, pins: tuple[Pin, ...], versions: dict[str, str],
           roots: dict[str, Path]) -> None:
    out = base / "tarballs"
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {"release_date": "2025-01-01", "release_label": label,
                                   "release_product": "cuda"}
    for pin in pins:
        version = versions[pin.pname]
        top = f"{pin.pname}-linux-x86_64-{version}-archive"
        path = out / f"{top}.tar"
        _write_tar(roots[pin.pname], top, path)
        data = path.read_bytes()
        manifest[pin.pname] = {
            "name": pin.pname.replace("_", " "), "license": "CUDA Toolkit",
            "license_path": f"{pin.pname}/LICENSE.txt", "version": version,
            "linux-x86_64": {
                "relative_path": f"{pin.pname}/linux-x86_64/{path.name}",
                "sha256": hashlib.sha256(data).hexdigest(),
                "md5": hashlib.md5(data).hexdigest(),  # NVIDIA's manifest field
                "size": str(len(data))}}
    (base / f"redistrib_{label}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (base / "done").touch()


def _write_tar(root: Path, top: str, dest: Path) -> None:
    """Sorted members, zero mtimes: the same bytes every time."""
    tmp = dest.with_suffix(".partial")
    with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(_info(top + "/", tarfile.DIRTYPE, 0o755))
        license_text = b"NVIDIA redistributable (test tarball built from a PyPI wheel)\n"
        tar.addfile(_info(f"{top}/LICENSE", tarfile.REGTYPE, 0o644, len(license_text)),
                    io.BytesIO(license_text))
        for rel in _entries(root):
            full = root / rel
            name = f"{top}/{rel}"
            if full.is_symlink():
                info = _info(name, tarfile.SYMTYPE, 0o777)
                info.linkname = os.readlink(full)
                tar.addfile(info)
            elif full.is_dir():
                tar.addfile(_info(name + "/", tarfile.DIRTYPE, 0o755))
            else:
                mode = 0o755 if os.access(full, os.X_OK) else 0o644
                with open(full, "rb") as fh:
                    tar.addfile(_info(name, tarfile.REGTYPE, mode, full.stat().st_size), fh)
    tmp.rename(dest)


def _entries(root: Path) -> list[str]:
    found = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirs + [f for f in files if f not in _SKIP]):
            found.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return sorted(found)


def _info(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name.rstrip("/") if kind == tarfile.DIRTYPE else name)
    info.type, info.mode, info.size, info.mtime = kind, mode, size, 0
    info.uname = info.gname = "root"
    return info
