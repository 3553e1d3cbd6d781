"""Rewriting ``bin/nvcc.profile`` so nvcc finds its pieces wherever the outputs landed.

nvcc reads ``bin/nvcc.profile`` and expands ``$(TOP)`` (``$(_HERE_)/..``, the unpacked toolkit
root) to find cicc and libdevice (NVVM), headers and libraries. After a split those live in
different outputs, so each ``$(TOP)/...`` reference is replaced with the absolute location of
the output that really holds it. Both layouts are handled: CUDA 12 writes
``$(TOP)/$(_NVVM_BRANCH_)`` for NVVM, CUDA 13 writes ``$(TOP)/nvvm``.

CUDA 13 moved headers nvcc needs out of its archive (D7): ``crt/`` into cuda_crt, CCCL into
cuda_cccl (``SYSTEM_INCLUDES ... $(TOP)/$(_TARGET_DIR_)/include/cccl``) and the runtime into
cuda_cudart. With their package roots known, the CCCL reference points at cuda_cccl's include
dir and :class:`ProfileExtras` adds ``-I``/``-L`` for the others to NVIDIA's own ``INCLUDES`` and
``LIBRARIES`` assignments. In those, not in lines after them: ``nvcc -v`` prints every assignment
as it reads it (``#$ INCLUDES=...``) and CMake's FindCUDAToolkit takes the first one it sees, so
a second ``INCLUDES +=`` line would be invisible to it (Nixpkgs' cuda_nvcc says the same and
rewrites those assignments too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_TARGET = r"\$\(TOP\)/\$\(_TARGET_DIR_\)"
# Most specific first: the first pattern that matches a reference decides its output.
_REWRITES: tuple[tuple[str, str, str], ...] = (
    (_TARGET + r"/include/cccl", "cccl", "/include"),
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


@dataclass(frozen=True, slots=True)
class ProfileExtras:
    """Directories of other packages nvcc must search (absolute)."""

    includes: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def lines(self) -> str:
        out = []
        if self.includes:
            flags = " ".join(f'"-I{d}"' for d in self.includes)
            out.append(f"INCLUDES        +=  {flags} $(_SPACE_)")
        if self.libraries:
            flags = " ".join(f'"-L{d}"' for d in self.libraries)
            out.append(f"LIBRARIES        =+ $(_SPACE_) {flags}")
        return "".join(line + "\n" for line in out)


def rewrite_nvcc_profile(text: str, roots: Mapping[str, str],
                         extras: ProfileExtras | None = None) -> str:
    """``roots``: absolute output roots for ``include``, ``lib``, ``stubs``, ``nvvm``, ``bin``
    (and ``cccl``: cuda_cccl's root, when known; else the reference stays nvcc's own)."""
    for pattern, output, suffix in _REWRITES:
        if output not in roots:
            continue
        replacement = roots[output] + suffix
        text = re.sub(pattern + r"(?=[/\"\s:]|$)", _constant(replacement), text,
                      flags=re.MULTILINE)
    # $(TOP) itself no longer names one place; point it at the compiler's own output so any
    # reference we do not know about still resolves inside the package.
    text = re.sub(r"^(TOP\s*=\s*).*$", lambda m: m[1] + roots["bin"], text, count=1,
                  flags=re.MULTILINE)
    if extras is not None and extras.lines():
        text = _merge_extras(text, extras)
    return text


_ASSIGNMENT = r"^({name}[ \t]*(?:\+=|=\+|=)[^\n]*?)([ \t]*\$\(_SPACE_\))?[ \t]*$"


def _appender(flags: str) -> Callable[[re.Match[str]], str]:
    """``NAME += NVIDIA's flags`` -> ``... flags``, a trailing ``$(_SPACE_)`` kept last."""
    return lambda m: f"{m[1]} {flags}{m[2] or ''}"


def _merge_extras(text: str, extras: ProfileExtras) -> str:
    """The extra flags inside the first ``INCLUDES``/``LIBRARIES`` assignment (after NVIDIA's
    own flags, before a trailing ``$(_SPACE_)``); a new line only where the profile has none."""
    missing = []
    for name, dirs, flag in (("INCLUDES", extras.includes, "-I"),
                             ("LIBRARIES", extras.libraries, "-L")):
        if not dirs:
            continue
        flags = " ".join(f'"{flag}{d}"' for d in dirs)
        pattern = re.compile(_ASSIGNMENT.format(name=name), re.MULTILINE)
        if pattern.search(text) is None:
            missing.append(ProfileExtras(**{name.lower(): dirs}).lines())
            continue
        text = pattern.sub(_appender(flags), text, count=1)
    if missing:
        text = text.rstrip("\n") + "\n\n# Added by cudasplit: split-out packages nvcc needs\n"
        text += "".join(missing)
    return text
