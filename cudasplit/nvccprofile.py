"""Rewriting ``bin/nvcc.profile`` so nvcc finds its pieces wherever the outputs landed.

nvcc reads ``bin/nvcc.profile`` and expands ``$(TOP)`` (``$(_HERE_)/..``, the unpacked toolkit
root) to find cicc and libdevice (NVVM), headers and libraries. After a split those live in
different outputs, so each ``$(TOP)/...`` reference is replaced with the absolute location of
the output that really holds it. Both layouts are handled: CUDA 12 writes
``$(TOP)/$(_NVVM_BRANCH_)`` for NVVM, CUDA 13 writes ``$(TOP)/nvvm``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_TARGET = r"\$\(TOP\)/\$\(_TARGET_DIR_\)"
# Most specific first: the first pattern that matches a reference decides its output.
_REWRITES: tuple[tuple[str, str, str], ...] = (
    (_TARGET + r"/include", "include", "/include"),
    (_TARGET + r"/lib\$\(_TARGET_SIZE_\)/stubs", "stubs", "/lib/stubs"),
    (_TARGET + r"/lib\$\(_TARGET_SIZE_\)", "lib", "/lib"),
    (r"\$\(TOP\)/\$\(_NVVM_BRANCH_\)", "nvvm", "/nvvm"),
    (r"\$\(TOP\)/nvvm", "nvvm", "/nvvm"),
    (r"\$\(TOP\)/include", "include", "/include"),
    (r"\$\(TOP\)/lib64", "lib", "/lib"),
    (r"\$\(TOP\)/lib", "lib", "/lib"),
)


def _constant(value: str) -> Callable[[re.Match[str]], str]:
    """A replacement function: re.sub would interpret backslashes in a replacement string."""
    return lambda _match: value


def rewrite_nvcc_profile(text: str, roots: Mapping[str, str]) -> str:
    """``roots``: absolute output roots for ``include``, ``lib``, ``stubs``, ``nvvm``, ``bin``."""
    for pattern, output, suffix in _REWRITES:
        replacement = roots[output] + suffix
        text = re.sub(pattern + r"(?=[/\"\s:]|$)", _constant(replacement), text,
                      flags=re.MULTILINE)
    # $(TOP) itself no longer names one place; point it at the compiler's own output so any
    # reference we do not know about still resolves inside the package.
    return re.sub(r"^(TOP\s*=\s*).*$", lambda m: m[1] + roots["bin"], text, count=1,
                  flags=re.MULTILINE)
