"""dlopen audit of a consumer's files: which CUDA libraries they open by name, and where from.

A consumer (PyTorch, CuPy, a CUDA program) ``dlopen``s NVRTC, cuBLASLt, cuDNN's sub-libraries
or nvJitLink by name; nothing in its dynamic section says so, so neither the linker nor
autoPatchelf puts their directory into its RUNPATH and the load fails at run time
(nixpkgs#461334, #296179). Nixpkgs repairs it by hand with ``appendRunpaths``.

:func:`audit_dlopen` takes the loader view of every ELF file (:mod:`cudasplit._release.ldd`, whose
dlopen targets come from :mod:`cudasplit._elf.read.dlopen`'s read-only-data scan), keeps the names
of CUDA libraries (:data:`CUDA_LIBRARY_PATTERN`), and for each one says what it would load and,
when that is nothing, which of the consumer's input directories holds it: the entry the
consumer-guards hook (``cudasplit/nix/consumer-guards-hook.sh``, ``cudasplitDlopenRunpaths``)
appends to the file's RUNPATH. The hook greps the same pattern over the whole file, so it also
repairs a CUDA ``DT_NEEDED`` name that loads nothing (a prebuilt wheel's module NEEDing
``libnvrtc.so.12``): those are listed too, with ``kind = "needed"``. The grep may see a few more
names than the read-only-data scan; the hook never appends a directory that does not hold the
library.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cudasplit._release.ldd import LoadView

__all__ = ["CUDA_LIBRARY_PATTERN", "DlopenAudit", "audit_dlopen", "is_cuda_library"]

# Extended-regex (Python ``re`` and ``grep -E`` alike) for the file name of a CUDA library
# loaded by name, version or printf pattern included. The hook is written from this string.
CUDA_LIBRARY_PATTERN = (
    r"lib(nvrtc|nvrtc-builtins|nvJitLink|cudart|cublas|cublasLt|cufft|cufftw|curand|"
    r"cusparse|cusparseLt|cusolver|cusolverMg|nccl|cupti|nvperf_host|nvperf_target|"
    r"nvToolsExt|nvvm|cudnn[A-Za-z0-9_]*|nvinfer[A-Za-z0-9_]*|nvonnxparser|nvjpeg|"
    r"nvjpeg2k|npp[a-z_]*|cufile[a-z_]*|cutensor[A-Za-z]*|cudss[a-z_]*|nvshmem[a-z_]*|"
    r"nvimgcodec|nvfatbin|nvptxcompiler|nvtiff|nvcomp[a-z_]*)\.so(\.[0-9%][0-9A-Za-z%.]*)?"
)
_CUDA_LIBRARY = re.compile(CUDA_LIBRARY_PATTERN + r"\Z")


def is_cuda_library(name: str) -> bool:
    """Whether ``name`` (``libnvrtc.so.12``, ``libcudnn_ops.so.9``, ``libnvrtc.so.%s``) is a
    CUDA library a consumer may load by name."""
    return _CUDA_LIBRARY.match(name) is not None


@dataclass(frozen=True, slots=True, order=True)
class DlopenAudit:
    """One CUDA library a file opens, and what it would load.

    Attributes:
        file: the ELF file.
        name: the library name it dlopens (or needs: ``kind``).
        loads: the file it would load (``None``: nothing).
        append: the input directory holding it that the hook would add to the RUNPATH
            (``None``: none needed, or no input holds it).
        kind: ``dlopen``, or ``needed`` (a DT_NEEDED name, listed only when it loads nothing).

    Raises:
        Nothing: a value.
    """

    file: str
    name: str
    loads: str | None
    append: str | None
    kind: str = "dlopen"  # dlopen | needed (listed only when it loads nothing)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if self.loads is not None:
            return f"{self.file}: {self.kind} {self.name} => {self.loads}"
        if self.append is not None:
            return (f"{self.file}: {self.kind} {self.name} would load nothing; the hook "
                    f"appends {self.append} to its RUNPATH")
        return f"{self.file}: {self.kind} {self.name} would load nothing (no input holds it)"


def audit_dlopen(views: Sequence[LoadView], inputs: Sequence[str] = ()) -> list[DlopenAudit]:
    """One entry per CUDA library each file of ``views`` dlopens, and per CUDA DT_NEEDED name
    that loads nothing (see the module text); ``inputs`` are the consumer's library
    directories, searched in order."""
    found: list[DlopenAudit] = []
    for one in views:
        targets = [("dlopen", t) for t in one.dlopen] + [
            ("needed", t) for t in one.needed if t.path is None]
        for kind, target in targets:
            if not is_cuda_library(target.name):
                continue
            append = None if target.path is not None else _provider(target.name, inputs)
            found.append(DlopenAudit(one.path, target.name, target.path, append, kind))
    return sorted(found)


def _provider(name: str, inputs: Sequence[str]) -> str | None:
    """The first input directory with a file that fits ``name`` (a printf pattern fits any
    version: ``libnvrtc.so.%s`` matches ``libnvrtc.so.12``)."""
    pattern = re.sub(r"%[0-9.]*[sdu]", "*", name)
    for directory in inputs:
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        if any(fnmatch.fnmatchcase(e, pattern) and os.path.exists(os.path.join(directory, e))
               for e in entries):
            return directory
    return None
