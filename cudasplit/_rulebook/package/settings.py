"""The package table's value for one package: :class:`PackageSettings` and what it answers.

Built from the ``[package]`` tables of the rule files (:mod:`cudasplit._rulebook.package.load`),
it holds every per-package fact the split needs besides the rules themselves;
:func:`describe_package` reads it out as ``key = value`` lines (``rules show --package``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, is_dataclass
from typing import Any

from cudasplit._globs import Glob
from cudasplit._rulebook.package.table import (
    AddNeeded,
    DlopenNeed,
    DropEdit,
    LinkInto,
    OutputWhen,
    PackageLink,
    PcEdit,
    RunpathPackage,
    TextEdit,
    TextEditsFrom,
    Where,
    declared_outputs,
)

__all__ = ["PackageSettings", "describe_package"]


@dataclass(frozen=True, slots=True)
class PackageSettings:
    """Per-package facts from ``[package]`` tables (first file that sets a key wins)."""

    outputs: tuple[str, ...] | None = None
    cuda_compat: bool = False
    runpath_append: tuple[str, ...] = ()
    # Directory globs whose match is removed from member paths (nsight's
    # ``nsight-systems/<ver>/``): ``lift = ["nsight-systems/*"]``.
    lift: tuple[Glob, ...] = ()
    # Extra symlinks, path -> relative target, created where the target landed
    # (cuda_cudart: ``"lib/stubs/libcuda.so.1" = "libcuda.so"``).
    stub_links: Mapping[str, str] = field(default_factory=dict)
    # .pc files: append ``-Wl,-rpath,<driver link>/lib`` to Libs (cuda_cudart).
    pkgconfig_driver_rpath: bool = False
    # .pc file-name globs whose libdir points at the stubs output (``cuda-*.pc``).
    pkgconfig_stubs_libdir: tuple[Glob, ...] = ()
    # Declared outputs that may stay empty (cuda_cupti's static exists on some platforms only).
    optional_outputs: tuple[str, ...] = ()
    # DT_NEEDED renames in every ELF file of the package (nsight: libtiff.so.5 -> libtiff.so).
    replace_needed: Mapping[str, str] = field(default_factory=dict)
    # Packages this one dlopens, version-gated: their lib dir goes into RUNPATH
    # (cudasplit/_split/elfcontext.py).
    dlopen: tuple[DlopenNeed, ...] = ()
    # Outputs that out (and dev) propagate besides bin/include/lib (Nixpkgs'
    # propagatedBuildOutputs): cuda_cudart adds static and stubs, cuda_nvml_dev stubs.
    propagated_outputs: tuple[str, ...] = ()
    pkgconfig_edits: tuple[PcEdit, ...] = ()
    # checkCudaFhsRefs: references to /usr/ fail --check-fhs-refs unless allowed.
    allow_fhs_references: bool = False
    output_when: tuple[OutputWhen, ...] = ()
    drops: tuple[DropEdit, ...] = ()
    # The compiler's path inside its output (nix-support/cuda-component ``compiler``).
    compiler: str | None = None
    # Where the package comes from and its Nixpkgs file: shown by ``rules show``.
    redist: str = "cuda"
    # nvcc.profile: other packages whose include (and lib, lib/stubs) dirs nvcc searches.
    nvcc_includes: tuple[str, ...] = ()
    nvcc_libraries: tuple[str, ...] = ()
    # Other packages copied into this one (cuda_nvcc 13: libnvvm into nvvm/), version-gated;
    # ``subdir`` is the destination directory.
    copy_packages: tuple[RunpathPackage, ...] = ()
    # DT_NEEDED names added to matching ELF files, gated (tensorrt's trtexec, cuDNN 8).
    add_needed: tuple[AddNeeded, ...] = ()
    # Links in a directory to every placed file matching a glob (tensorrt's include/onnx).
    link_into: tuple[LinkInto, ...] = ()
    # Text replacements in package files (libcudss's CMake configs;
    # cudasplit/_split/rewrites/textedits.py).
    text_edits: tuple[TextEdit, ...] = ()
    # Packages whose text_edits apply here too, gated (cuda_nvcc < 13: cuda_crt's); load_ruleset
    # appends them to text_edits.
    text_edits_from: tuple[TextEditsFrom, ...] = ()
    # Profiles whose outputs share one prefix (conda-forge): output -> the outputs its links
    # may point into, and links synthesized at the end of the run.
    link_edges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    links: tuple[PackageLink, ...] = ()

    def may_link(self, source: str, target: str) -> bool:
        """A link placed in ``source`` may point at something in ``target``."""
        return source == target or target in self.link_edges.get(source, ())

    def outputs_for(self, where: Where) -> tuple[str, ...] | None:
        """Declared outputs on this platform/version (gated ones left out where they fail)."""
        if self.outputs is None:
            return None
        return declared_outputs(self.outputs, self.output_when, where)

    def propagated(self, outputs: Sequence[str]) -> tuple[str, ...]:
        """Nixpkgs' default bin/include/lib (those that exist) plus the package's own."""
        base = [o for o in ("bin", "include", "lib") if o in outputs]
        return tuple(base + [o for o in self.propagated_outputs if o in outputs and o not in base])

    def dropped(self, path: str, where: Where, *, lifted: bool = False) -> bool:
        """``path`` (after ``lift``; ``lifted``: the lift moved it) is dropped by the table."""
        return any(d.matches(path, where, lifted=lifted) for d in self.drops)

    def lift_path(self, path: str) -> str | None:
        """``path`` with a lifted directory prefix removed; None when ``path`` is that directory."""
        if not self.lift:
            return path
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if any(glob.matches(prefix) for glob in self.lift):
                rest = "/".join(parts[depth:])
                return rest or None
        return path


def describe_package(package: PackageSettings) -> list[str]:
    """The package-table entry as ``key: value`` lines (``rules show --package``); keys left
    at their defaults are shown too, so the entry reads the same for every package."""
    return [f"{name} = {_describe(getattr(package, name))}"
            for name in PackageSettings.__dataclass_fields__]


def _describe(value: Any) -> str:
    if isinstance(value, Glob):
        return value.pattern
    if isinstance(value, RunpathPackage):
        gate = value.gate.describe()
        return value.entry() + (f" ({gate})" if gate else "")
    if is_dataclass(value) and not isinstance(value, type):  # PcEdit, DropEdit, DlopenNeed, ...
        parts = []
        for name in type(value).__dataclass_fields__:
            item = getattr(value, name)
            if name == "gate":
                if item.describe():
                    parts.append(f"when {item.describe()}")
            elif item not in ((), False, None, ""):
                parts.append(f"{name}={_describe(item)}")
        return "{" + "; ".join(parts) + "}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return str(value)
