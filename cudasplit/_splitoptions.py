"""What a split is asked to do: :class:`SplitOptions` (frozen, checked when built) and the
:class:`Progress` value handed to the progress callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ._model import PackageId
from ._options import available_cpus, check_options
from ._runpath import RunpathPolicy
from ._sources import DEFAULT_MAX_MEMBERS, DEFAULT_MAX_RATIO, DEFAULT_MAX_TOTAL_BYTES

__all__ = ["Progress", "SplitOptions", "cuda_version"]


def cuda_version(options: SplitOptions, package: PackageId) -> str | None:
    """The CUDA major.minor for gates: given, else a ``cuda_*`` package's own version."""
    if options.cuda_version:
        return options.cuda_version
    if package.name.startswith("cuda_") and package.version:
        return ".".join(package.version.split(".")[:2])
    return None


@dataclass(frozen=True, slots=True)
class Progress:
    """Handed to ``SplitOptions.progress`` after each member (the API itself never prints)."""

    source: str
    members: int          # members taken so far
    bytes: int            # member bytes written so far (uncompressed)
    current: str          # the member just taken
    done: bool = False    # the last call of a run


@dataclass(frozen=True, slots=True)
class SplitOptions:
    """Everything that changes what a split does. Frozen: one value serves a whole run."""

    outputs: tuple[str, ...] | None = None      # limit the outputs (others fall back)
    patch: bool = True                          # rewrite RUNPATHs
    runpath: RunpathPolicy = field(default_factory=RunpathPolicy)
    patcher: str = "auto"                       # auto | lief
    strict: bool = False                        # problems fail the run
    dry_run: bool = False                       # plan, write nothing
    package: PackageId | None = None            # override the parsed identity
    rules_files: tuple[str, ...] = ()           # extra rule files, highest precedence
    rules_dir: Path | None = None               # replaces the shipped rules/
    jobs: int = 0                               # 0: the CPUs available to the process
    overwrite: bool = False
    cuda_major: str | None = None               # lift lib/<major>/; default: the _cudaNN suffix
    progress: Callable[[Progress], None] | None = None  # called after every member
    # Where other packages live, for ``@pname@`` in package rules' runpath_append
    # (libcublas and cuDNN dlopen NVRTC: ``runpath_append = ["@cuda_nvrtc@/lib"]``).
    package_roots: tuple[tuple[str, str], ...] = ()
    nix_markers: bool = False                   # write nix-support/ files (see _nixsupport.py)
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES  # bomb guard: expanded bytes (--max-size)
    max_ratio: float = DEFAULT_MAX_RATIO        # bomb guard: expanded/compressed (--max-ratio)
    max_members: int = DEFAULT_MAX_MEMBERS      # member count guard (--max-members)
    # The CUDA release (major.minor) for the package table's cuda_since/cuda_before gates and
    # nix-support/cuda-component; default: the version of a cuda_* package.
    cuda_version: str | None = None
    check_fhs_refs: bool = False                # fail on /usr/ references (checkCudaFhsRefs)
    platform: str | None = None                 # for gates; default: the tarball's platform
    python_version: str | None = None           # X.Y: cuda_gdb keeps that Python's TUI only
    cuda_component_hook: str | None = None      # cudaComponentHook's root: source line (nixsupport)
    # Issue 14: archives without an NVIDIA top directory need an explicit strip count;
    # a --package without rules file needs default_rules; fsync before the final renames.
    strip_components: int | None = None
    default_rules: bool = False
    fsync: bool = True
    # Inside a Nix builder (split_nix): what only warns elsewhere -- a package without rules,
    # a missing nvcc.profile package root -- would build a wrong derivation: an error there.
    nix_build: bool = False

    def __post_init__(self) -> None:
        check_options(self)

    def effective_jobs(self) -> int:
        if self.jobs > 0:
            return self.jobs
        return available_cpus()
