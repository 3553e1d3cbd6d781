"""The per-package table's structured entries: what each version/platform gate guards.

Each entry is a frozen value parsed from one ``[package]`` key (``package.parse``) and gated by a
:class:`~cudasplit._rulebook.gates.Gate` (``gates`` says how gates read the package's and the
CUDA release's versions). ``Where``, ``Gate`` and the version helpers are re-exported here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cudasplit._globs import Glob, compile_glob
from cudasplit._rulebook.gates import (
    GATE_KEYS,
    UNGATED,
    Gate,
    Where,
    version_at_least,
    version_tuple,
)

__all__ = [
    "GATE_KEYS",
    "AddNeeded",
    "DlopenNeed",
    "DropEdit",
    "Gate",
    "LinkInto",
    "OutputWhen",
    "PcEdit",
    "RunpathPackage",
    "TextEdit",
    "TextEditsFrom",
    "Where",
    "added_needed",
    "declared_outputs",
    "version_at_least",
    "version_key",
    "version_tuple",
]


@dataclass(frozen=True, slots=True)
class RunpathPackage:
    """``{package = "libnvvm", subdir = "nvvm", cuda_since = "13.0"}``: another package
    (root from ``--package-root``), gated; ``copy_packages`` copies it into ``subdir``."""

    package: str
    subdir: str = "lib"
    gate: Gate = UNGATED

    def entry(self) -> str:
        return f"@{self.package}@/{self.subdir}" if self.subdir else f"@{self.package}@"


@dataclass(frozen=True, slots=True)
class PcEdit:
    """One edit of the ``.pc`` files whose name matches ``files`` (see README, Rules)."""

    files: tuple[Glob, ...]
    gate: Gate = UNGATED
    drop: bool = False                    # the file is not shipped (npp's nppi/nppicom)
    requires: tuple[str, ...] = ()        # "cudart" -> "Requires: cudart-<X.Y of the file>"
    requires_modules: tuple[str, ...] = ()  # outside modules, as named: "libibverbs"
    replace: tuple[tuple[str, str], ...] = ()  # literal text substitutions
    libdir_output: str | None = None      # libdir=<that output>/lib (nvml: stubs)
    driver_rpath: bool = False            # Libs: ... -Wl,-rpath,<driver link>/lib
    drop_cudaroot: bool = False           # cudart: the cudaroot= line is removed
    cflags_packages: tuple[str, ...] = ()  # Cflags: -I<root of pname>/include (cudart 13)

    def matches(self, name: str, where: Where, text: str = "") -> bool:
        """Whether the edit applies to the ``.pc`` file ``name`` (with ``text``, when read).
        Where the run knows no CUDA release (an archive renamed and split with ``--package
        cuda_cudart``), the gate reads the file's own: a CUDA 12.9 ``cudart-12.9.pc`` never
        gets a CUDA 13 edit."""
        if where.cuda_version is None:
            release = pc_release(name, text)
            if release is not None:
                where = replace(where, cuda_version=release)
        return any(g.matches(name) for g in self.files) and self.gate.applies(where)


_PC_RELEASE = re.compile(r"-(\d+\.\d+)\.pc$")
_PC_VERSION = re.compile(r"^Version:\s*(\d+\.\d+)", re.M)


def pc_release(name: str, text: str = "") -> str | None:
    """The CUDA ``major.minor`` a ``.pc`` file belongs to: its name's (``cudart-12.9.pc``),
    else its ``Version:`` line's; None when neither says."""
    match = _PC_RELEASE.search(name) or _PC_VERSION.search(text)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class OutputWhen:
    """An output declared only where the gate applies (cuda_cupti's static)."""

    output: str
    gate: Gate


@dataclass(frozen=True, slots=True)
class DropEdit:
    """Members dropped where the gate applies (cuda_crt on CUDA 12: the nvcc payload), except
    those matching ``keep``. ``@python@`` in a ``keep`` glob is the build's Python X.Y
    (cuda_gdb keeps only its ``cuda-gdb-python<X.Y>-tui``); without one the entry drops
    nothing -- which wrapper the build can run is unknown."""

    globs: tuple[Glob, ...]
    gate: Gate = UNGATED
    keep: tuple[str, ...] = ()
    # Only members ``lift`` left where they were: nsight_systems' top-level bin/ wrappers go,
    # a nested release's own nsight-systems/<v>/bin/ (lifted to bin/) stays, as in Nixpkgs,
    # which deletes the wrappers before lifting.
    unlifted: bool = False

    def needs_python(self) -> bool:
        return any("@python@" in k for k in self.keep)

    def matches(self, path: str, where: Where, *, lifted: bool = False) -> bool:
        if self.unlifted and lifted:
            return False
        if not any(g.matches(path) for g in self.globs) or not self.gate.applies(where):
            return False
        if self.needs_python() and where.python_version is None:
            return False
        python = where.python_version or ""
        return not any(compile_glob(k.replace("@python@", python)).matches(path)
                       for k in self.keep)


@dataclass(frozen=True, slots=True)
class AddNeeded:
    """``DT_NEEDED`` names added to the ELF files whose path matches ``files`` (Nixpkgs'
    ``patchelf --add-needed`` in a postFixup: tensorrt's ``trtexec``, cuDNN 8). ``@major@`` in a
    name is the package version's major (``libnvinfer_plugin.so.@major@``)."""

    files: tuple[Glob, ...]
    names: tuple[str, ...]
    gate: Gate = UNGATED

    def resolve(self, version: str | None) -> tuple[str, ...]:
        """The names to add for a package of ``version`` (empty: the gate fails). A name that
        needs ``@major@`` is left out when the version is unknown (it cannot be written)."""
        if not self.gate.applies(Where(version=version)):
            return ()
        if not version:
            return tuple(n for n in self.names if "@major@" not in n)
        major = str(version_tuple(version)[0])
        return tuple(n.replace("@major@", major) for n in self.names)


def added_needed(entries: Sequence[AddNeeded],
                 version: str | None) -> tuple[tuple[tuple[Glob, ...], tuple[str, ...]], ...]:
    """``add_needed`` entries resolved for one package version: (file globs, names) pairs."""
    return tuple((e.files, names) for e in entries if (names := e.resolve(version)))


@dataclass(frozen=True, slots=True)
class LinkInto:
    """A relative link in ``directory`` to every placed file whose path matches ``files``, in
    the file's output (tensorrt: ``include/onnx/NvOnnxParser.h -> ../NvOnnxParser.h``, what
    Nixpkgs' ``ln -srt include/onnx/ NvOnnx*.h`` makes)."""

    files: tuple[Glob, ...]
    directory: str
    gate: Gate = UNGATED

    def links(self, placed: Iterable[tuple[str, str]],
              where: Where) -> list[tuple[str, str, str]]:
        """``(output, link path, link text)`` for the placed ``(output, path)`` pairs."""
        if not self.gate.applies(where):
            return []
        found = []
        for output, dest in sorted(placed):
            if posixpath.dirname(dest) != self.directory and any(
                    g.matches(dest) for g in self.files):
                found.append((output, posixpath.join(self.directory, posixpath.basename(dest)),
                              posixpath.relpath(dest, self.directory)))
        return found


@dataclass(frozen=True, slots=True)
class PackageLink:
    """``[[package.links]]``: a relative link at ``path`` in ``output`` to ``target`` (a path in
    the shared prefix that this run places, file or directory), made once the stream has
    ended; conda-forge's ``targets/x86_64-linux/nvvm -> ../../nvvm``.

    Attributes:
        output: the output holding the link.
        path: where the link is, relative to the prefix.
        target: what it points to, relative to the prefix.

    Raises:
        Nothing: a value.
    """

    output: str
    path: str
    target: str

    def text(self) -> str:
        return posixpath.relpath(self.target, posixpath.dirname(self.path) or ".")


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replacements in the text files whose path in their output matches ``files`` (libcudss's
    CMake configs; applied as the split writes them): ``replace`` literal
    ``(old, new)`` pairs, ``regex`` ``(pattern, new)`` pairs (Python ``re``, one line at a time
    like ``sed -E``). ``quiet``: a text not found is no problem (Nixpkgs' ``--replace-quiet``,
    ``sed``); ``forbid``: texts that must not remain once the pairs are done (tensorrt's
    ``${_IMPORT_PREFIX}/``)."""

    files: tuple[Glob, ...]
    replace: tuple[tuple[str, str], ...] = ()
    regex: tuple[tuple[str, str], ...] = ()
    gate: Gate = UNGATED
    quiet: bool = False
    forbid: tuple[str, ...] = ()

    def matches(self, path: str, where: Where) -> bool:
        return any(g.matches(path) for g in self.files) and self.gate.applies(where)


@dataclass(frozen=True, slots=True)
class TextEditsFrom:
    """``[package] text_edits_from = [{ package = "cuda_crt", cuda_before = "13.0" }]``: that
    package's ``text_edits`` apply here too, where this gate and each edit's own apply (CUDA
    12's nvcc carries the crt headers Nixpkgs edits in cuda_crt)."""

    package: str
    gate: Gate = UNGATED


def declared_outputs(outputs: Sequence[str], when: Sequence[OutputWhen],
                     where: Where) -> tuple[str, ...]:
    """``outputs`` less the gated ones whose gates all fail here."""
    gated: dict[str, bool] = {}
    for entry in when:
        gated[entry.output] = gated.get(entry.output, False) or entry.gate.applies(where)
    return tuple(o for o in outputs if gated.get(o, True))


@dataclass(frozen=True, slots=True)
class DlopenNeed:
    """``[package] dlopen = [{ package = "cuda_nvrtc", since = "12.8" }]``: every ELF file
    of this package gets ``<root of package>/lib`` in its RUNPATH (the root comes from
    ``--package-root PNAME=DIR``) when the package's version is ``>= since`` and ``< before``."""

    package: str
    since: str | None = None
    before: str | None = None

    def applies_to(self, version: str | None) -> bool:
        # An unknown version gets the entry: an extra directory costs nothing, a missing one
        # breaks the dlopen at run time.
        if version is None or not version_key(version):
            return True
        key = version_key(version)
        return ((self.since is None or key >= version_key(self.since))
                and (self.before is None or key < version_key(self.before)))


def version_key(version: str) -> tuple[int, ...]:
    """``12.8`` -> ``(12, 8)``; ``()`` (no version) when a number has more than 18 digits
    (``int()`` of thousands raised from a rule file's gate) or none is there."""
    parts = re.findall(r"[0-9]+", version)
    if any(len(part) > 18 for part in parts):
        return ()
    return tuple(int(part) for part in parts)
