"""Library names a search path treats specially (glibc, the NVIDIA driver) and the library index.

The name tests are pure; :func:`index_library_paths` is the one helper that reads the
filesystem, once per run.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence

from cudasplit.errors import SourceError

# glibc and the dynamic loader come from the libc the program runs with, never from RUNPATH:
# pinning them would mix two glibcs in one process (autoPatchelf drops libc for the same reason).
_GLIBC_NAMES = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libpthread.so.0",
        "libdl.so.2",
        "librt.so.1",
        "libutil.so.1",
        "libresolv.so.2",
        "libanl.so.1",
        "libnsl.so.1",
        "libBrokenLocale.so.1",
        "libmvec.so.1",
        "libc_malloc_debug.so.0",
        "libthread_db.so.1",
    }
)
_GLIBC_PATTERNS = ("ld-linux*.so.*", "ld64.so.*", "ld.so.*")

# Libraries of the NVIDIA driver: they must match the running kernel module, so they are found
# through the driver link at run time, never resolved at build time. Besides libcuda and the
# libnvidia-* family, the driver ships its GL/EGL/GLES vendor libraries (which CUPTI dlopens),
# OptiX, VDPAU and the CUDA debugger's back end.
_DRIVER_PATTERNS = (
    "libcuda.so*",
    "libnvidia-ml.so*",
    "libnvidia-*.so*",
    "libnvcuvid.so*",
    "libnvrm*",
    "libEGL_nvidia.so*",
    "libGLX_nvidia.so*",
    "libGLESv1_CM_nvidia.so*",
    "libGLESv2_nvidia.so*",
    "libnvoptix.so*",
    "libvdpau_nvidia.so*",
    "libcudadebugger.so*",
)

_SHARED_OBJECT_NAME = re.compile(r"\.so(\.|$)")


def is_glibc_name(name: str) -> bool:
    """Whether ``name`` is a glibc library or the dynamic loader (never put on RUNPATH)."""
    return name in _GLIBC_NAMES or _matches_any(name, _GLIBC_PATTERNS)


def is_driver_name(name: str) -> bool:
    """Whether ``name`` is a library the NVIDIA driver provides at run time."""
    return _matches_any(name, _DRIVER_PATTERNS)


def index_library_paths(paths: Sequence[str]) -> dict[str, str]:
    """Map each shared-object name found in ``paths`` to the first directory holding it.

    Missing directories (and empty path strings, which would otherwise mean the current
    directory) are ignored; relative paths are made absolute so that no relative entry can
    reach a RUNPATH. Other read errors raise :class:`~cudasplit.errors.SourceError`.
    """
    index: dict[str, str] = {}
    for directory in paths:
        if not directory:
            continue
        final = directory if os.path.isabs(directory) else os.path.abspath(directory)
        for name in _library_names(directory):
            index.setdefault(name, final)
    return index


def _matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _library_names(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as listing:
            return sorted(
                entry.name
                for entry in listing
                if _SHARED_OBJECT_NAME.search(entry.name) and not entry.is_dir()
            )
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise SourceError(
            f"cannot list library path: {error.strerror}", source=directory
        ) from error
