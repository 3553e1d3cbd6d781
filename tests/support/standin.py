"""A stand-in ``libcuda.so.1`` for tests: no device, built from source by the test (never
NVIDIA's driver). cudart asks for the driver's entry points through ``cuGetProcAddress``; every
one but the version reports ``CUDA_ERROR_NO_DEVICE`` (100), which cudart returns as
``cudaErrorNoDevice`` (100)."""

from __future__ import annotations

import subprocess
from pathlib import Path

STAND_IN = r"""
/* A stand-in libcuda.so.1 without a device; never NVIDIA's driver. cudart asks for the
   driver's entry points through cuGetProcAddress; every one but the version reports
   CUDA_ERROR_NO_DEVICE (100). */
#include <string.h>
typedef int CUresult;
static CUresult no_device(void) { return 100; }
CUresult cuInit(unsigned flags) { (void)flags; return 100; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return 0; }
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                             unsigned long long flags, int *status) {
    (void)version; (void)flags;
    if (status) *status = 0;
    if (!strcmp(symbol, "cuDriverGetVersion")) *pfn = (void *)cuDriverGetVersion;
    else if (!strcmp(symbol, "cuGetProcAddress")) *pfn = (void *)cuGetProcAddress_v2;
    else *pfn = (void *)no_device;
    return 0;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                          unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
"""


def build_stand_in(cc: str, directory: Path) -> Path:
    """``directory/libcuda.so.1`` compiled with ``cc`` (gcc, or a cross gcc)."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "cuda.c"
    source.write_text(STAND_IN)
    library = directory / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(library),
                    str(source)], check=True)
    return library
