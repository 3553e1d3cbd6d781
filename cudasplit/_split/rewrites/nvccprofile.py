"""Rewriting ``bin/nvcc.profile`` so nvcc finds its pieces wherever the outputs landed.

nvcc reads ``bin/nvcc.profile`` and expands ``$(TOP)`` (``$(_HERE_)/..``, the unpacked toolkit
root) to find cicc and libdevice (NVVM), headers and libraries. After a split those live in
different outputs, so each ``$(TOP)/...`` reference is replaced with the absolute location of
the output that really holds it. Both layouts are handled: CUDA 12 writes
``$(TOP)/$(_NVVM_BRANCH_)`` for NVVM, CUDA 13 writes ``$(TOP)/nvvm``.

CUDA 13 moved headers nvcc needs out of its archive: ``crt/`` into cuda_crt, CCCL into
cuda_cccl (``SYSTEM_INCLUDES ... $(TOP)/$(_TARGET_DIR_)/include/cccl``) and the runtime into
cuda_cudart. With their package roots known, the CCCL reference points at cuda_cccl's include
dir and :class:`ProfileExtras` adds ``-I``/``-L`` for the others to NVIDIA's own ``INCLUDES`` and
``LIBRARIES`` assignments. In those, not in lines after them: ``nvcc -v`` prints every assignment
as it reads it (``#$ INCLUDES=...``) and CMake's FindCUDAToolkit takes the first one it sees, so
a second ``INCLUDES +=`` line would be invisible to it (Nixpkgs' cuda_nvcc says the same and
rewrites those assignments too).

Each line naming ``$(TOP)/$(_TARGET_DIR_)`` is also kept as NVIDIA wrote it, relative
to nvcc's own directory (``$(_HERE_)/..``; nvcc takes it from the path it was run by, symlinks
unresolved). In the split output nothing is there and the package roots decide; with nvcc and
its profile linked into a prefix that has ``targets/`` (a plain symlink join), the prefix's
``targets/<dir>`` comes first, so nvcc's own choice (``-ccbin aarch64-linux-gnu-g++`` ->
``targets/sbsa-linux``, ``-target-dir``) holds. (``cudasplit toolkit`` writes NVIDIA's own
profile instead.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# NVIDIA's bin/nvcc.profile (CUDA 13; CUDA 12's differs only in spelling nvvm as
# $(_NVVM_BRANCH_), which nvcc sets to nvvm, and in not naming include/cccl): right for nvcc in
# a prefix that holds nvvm/ and targets/<dir>/ (`cudasplit toolkit`, the conda-forge profile).
PREFIX_PROFILE = """
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/$(_TARGET_DIR_)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" \
"-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""

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


_HERE_TARGET = "$(_HERE_)/../$(_TARGET_DIR_)"


def _keep_target_dir(text: str) -> tuple[str, str]:
    """Each ``$(TOP)/$(_TARGET_DIR_)`` line also as ``$(_HERE_)/../$(_TARGET_DIR_)``, placed
    so its directories come first. In nvcc.profile ``=+`` appends and ``+=`` prepends (seen in
    ``nvcc -dryrun``): an ``=+`` copy goes right before its line; ``+=`` copies are returned
    apart, to end the file, after every other line that prepends."""
    out, last = [], []
    for line in text.splitlines(keepends=True):
        if "$(TOP)/$(_TARGET_DIR_)" not in line:
            out.append(line)
            continue
        kept = line.replace("$(TOP)/$(_TARGET_DIR_)", _HERE_TARGET).rstrip("\n") + "\n"
        if re.match(r"^\s*\w+\s*=\+", line):
            out.append(kept)
        else:
            last.append(kept)
        out.append(line)
    return "".join(out), "".join(last)


def rewrite_nvcc_profile(text: str, roots: Mapping[str, str],
                         extras: ProfileExtras | None = None, *,
                         keep_target_dir: bool = True) -> str:
    """``roots``: absolute output roots for ``include``, ``lib``, ``stubs``, ``nvvm``, ``bin``
    (and ``cccl``: cuda_cccl's root, when known; else the reference stays nvcc's own).
    ``keep_target_dir``: keep NVIDIA's ``$(_TARGET_DIR_)`` lines relative to nvcc's directory
    (see the module docstring)."""
    text, last = _keep_target_dir(text) if keep_target_dir else (text, "")
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
    if last:  # last, as they prepend: a prefix's targets/<dir> goes before the package roots
        text = text.rstrip("\n") + "\n\n# Added by cudasplit: NVIDIA's target-dir lines, " \
            "relative to nvcc\n" + last
    return text


# The first assignment of a variable, whatever it holds: CMake's FindCUDAToolkit reads only the
# first one ``nvcc -v`` prints (a kept ``=+`` target-dir copy comes first, so it carries them).
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
