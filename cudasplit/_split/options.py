"""What a split is asked to do: :class:`SplitOptions` (frozen, checked when built). The
:class:`Progress` value and the jobs count are the run core's (:mod:`cudasplit._run`).

A wrong value fails where it is made, with an :class:`OptionsError` that names the field,
not later inside the split (``outputs="lib,dev"`` used to fail as "unknown output 'l'").
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit._argcheck import check_value, checked
from cudasplit._elf.plan import RunpathPolicy
from cudasplit._model import DEFAULT_PROFILE, OUTPUT_NAMES, PackageId
from cudasplit._run import (
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_TOTAL_BYTES,
    PATCHERS,
    Progress,
    available_cpus,
    check_jobs,
    resolve_jobs,
)
from cudasplit._source import PLATFORMS
from cudasplit.errors import OptionsError, OptionsTypeError, UnknownPatcherError

__all__ = ["Progress", "SplitOptions", "available_cpus", "cuda_version"]


def cuda_version(options: SplitOptions, package: PackageId) -> str | None:
    """The CUDA major.minor for gates: given, else a ``cuda_*`` package's own version."""
    if options.cuda_version:
        return options.cuda_version
    if package.name.startswith("cuda_") and package.version:
        return ".".join(package.version.split(".")[:2])
    return None


@checked
@dataclass(frozen=True, slots=True)
class SplitOptions:
    """Everything that changes what a split does. Frozen: one value serves a whole run.

    Attributes:
        outputs: limit the outputs (the others fall back to them); ``None``: all.
        patch: rewrite RUNPATHs (and interpreters) of ELF files.
        runpath: the :class:`RunpathPolicy` of the run.
        patcher: ``auto`` (fast tiers, LIEF fallback), ``lief`` or ``native``.
        strict: problems (and the warnings ``needed-unresolved``, ``package-root-missing``) fail
            the run with :class:`ProblemsFound`.
        dry_run: plan, write nothing.
        package: override the identity parsed from the top directory (:func:`package_id`).
        rules_files: extra rule files, highest precedence.
        rules_dir: a directory replacing the shipped ``rules/``.
        jobs: the most cores the split keeps busy (decoder threads, the writer, ELF patch
            workers); ``None`` or 0: every CPU the process may use (the affinity mask, the
            cgroup CPU quota, ``NIX_BUILD_CORES`` in a Nix build).
        overwrite: replace existing outputs.
        cuda_major: the CUDA major whose ``lib/<major>/`` is lifted (default: the ``_cudaNN``
            suffix).
        progress: called with a :class:`Progress` after every member (and within large ones).
        package_roots: where other packages live, for ``@pname@`` in the package table.
        nix_markers: write the ``nix-support/`` files.
        max_total_bytes: decompression bomb guard: expanded bytes.
        max_ratio: decompression bomb guard: expanded / compressed.
        max_members: member count guard.
        cuda_version: the CUDA release (major.minor) for the package table's gates.
        check_fhs_refs: fail on ``/usr/`` references (checkCudaFhsRefs).
        platform: the platform for gates (default: the tarball's).
        python_version: ``X.Y``: cuda_gdb keeps that Python's TUI only.
        glibc_version: ``X.Y``: the glibc the files will be used with (cuda_crt's
            ``noexcept`` edits need >= 2.42; unknown: left out).
        consumer_guards: write the consumer-guards hook into the ``lib`` output's (else
            ``out``'s) ``nix-support/setup-hook``.
        cuda_component_hook: the root of cudaComponentHook's source line.
        strip_components: leading components to strip (archives without NVIDIA's top directory).
        default_rules: accept a package without ``rules/packages/<NAME>.toml``.
        fsync: make the output durable before the final renames.
        target_platform: the platform a compiler package (nvcc) builds for; its
            ``cuda_cudart`` package roots must hold that machine's ELF files (default: the
            archive's own platform).
        nix_build: inside a Nix builder (set by :func:`split_nix`): a package without rules
            or a missing ``nvcc.profile`` package root is an error, not a warning.
        memory_limit: bytes the decoder may use: decoded data held and its threads'
            dictionaries together (at least 1 MiB; the run's peak RSS stays within it plus
            about 150 MB): the ``xz`` binary gets it as ``--memlimit-decompress`` (fewer
            threads where more would not fit); below one xz thread's dictionary the
            in-process decoder streams within it. ``None``: the binary gets what its threads
            need (within RAM/4 and what the bomb guards let the archive expand to); the
            in-process decoder, where it runs, holds (jobs + 1) whole xz blocks, within
            64 MiB and min(4 GiB, RAM/4).
        skip_unsafe_members: skip (with a problem) a member that would leave the output, such
            as a symlink to ``/etc``, instead of refusing the archive.
        inside: read what ELF files and static archives carry (GPU code per architecture,
            glibc floor) into the report; a dry run spools those members to read them.
        max_glibc: ``X.Y``: fail the run (:class:`ProblemsFound`) when a file needs a newer
            ``GLIBC_`` version, naming the file and the symbol (needs ``inside``).
        profile: whose layout the rules describe: ``default`` (Nixpkgs' outputs) or another
            profile of the rules directory (``conda-forge``: one output per conda package).

    Raises:
        OptionsError: a value out of range or contradicting another (naming the field).
        OptionsTypeError: a value of the wrong type (also a ``TypeError``).
    """

    outputs: tuple[str, ...] | None = None      # limit the outputs (others fall back)
    patch: bool = True                          # rewrite RUNPATHs
    runpath: RunpathPolicy = field(default_factory=RunpathPolicy)
    patcher: str = "auto"                       # auto | lief
    strict: bool = False                        # problems fail the run
    dry_run: bool = False                       # plan, write nothing
    package: PackageId | None = None            # override the parsed identity
    rules_files: tuple[str, ...] = ()           # extra rule files, highest precedence
    rules_dir: Path | None = None               # replaces the shipped rules/
    jobs: int | None = None                     # None or 0: every CPU the process may use
    overwrite: bool = False
    cuda_major: str | None = None               # lift lib/<major>/; default: the _cudaNN suffix
    progress: Callable[[Progress], None] | None = None  # called after every member
    # Where other packages live, for ``@pname@`` in package rules' runpath_append
    # (libcublas and cuDNN dlopen NVRTC: ``runpath_append = ["@cuda_nvrtc@/lib"]``).
    package_roots: tuple[tuple[str, str], ...] = ()
    nix_markers: bool = False                   # write nix-support/ files (_nix/support.py)
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES  # bomb guard: expanded bytes (--max-size)
    max_ratio: float = DEFAULT_MAX_RATIO        # bomb guard: expanded/compressed (--max-ratio)
    max_members: int = DEFAULT_MAX_MEMBERS      # member count guard (--max-members)
    # The CUDA release (major.minor) for the package table's cuda_since/cuda_before gates and
    # nix-support/cuda-component; default: the version of a cuda_* package.
    cuda_version: str | None = None
    check_fhs_refs: bool = False                # fail on /usr/ references (checkCudaFhsRefs)
    platform: str | None = None                 # for gates; default: the tarball's platform
    python_version: str | None = None           # X.Y: cuda_gdb keeps that Python's TUI only
    glibc_version: str | None = None            # X.Y: glibc_since gates (cuda_crt's noexcept)
    cuda_component_hook: str | None = None      # cudaComponentHook's root: source line (nixsupport)
    # write consumer-guards-hook.sh into lib's (else out's) nix-support/setup-hook
    consumer_guards: bool = False
    # Archives without an NVIDIA top directory need an explicit strip count;
    # a --package without rules file needs default_rules; fsync before the final renames.
    strip_components: int | None = None
    default_rules: bool = False
    fsync: bool = True
    # A member that would leave the output (a symlink whose target is absolute or
    # climbs out of the package root) fails the run unless asked to skip such members.
    skip_unsafe_members: bool = False
    # Bytes of decoded data the parallel decoder may hold at once (--memory-limit); None:
    # (jobs + 1) whole xz blocks within [64 MiB, min(4 GiB, RAM/4)]. Smaller is slower (fewer
    # blocks decode at once), never wrong. The source's codecs document peak RSS.
    memory_limit: int | None = None
    # The platform a compiler package (nvcc) builds for; its cuda_cudart package roots must
    # hold that machine's ELF files. Default: the archive's own platform.
    target_platform: str | None = None
    # Inside a Nix builder (split_nix): what only warns elsewhere -- a package without rules,
    # a missing nvcc.profile package root -- would build a wrong derivation: an error there.
    nix_build: bool = False
    # What ELF files and static archives carry (GPU code, glibc floor), read in the same pass;
    # max_glibc fails the run on a file that needs a newer GLIBC_ version.
    inside: bool = True
    max_glibc: str | None = None
    # Whose layout the rules describe: rules/ (default) or rules/profiles/<name>/.
    profile: str = DEFAULT_PROFILE

    def __post_init__(self) -> None:
        check_options(self)

    def effective_jobs(self) -> int:
        """The cores ``jobs`` stands for (``None`` and 0: every CPU the process may use)."""
        return resolve_jobs(self.jobs)

# The smallest decoder budget accepted: one decoded chunk (below it nothing could be held).
MIN_MEMORY_LIMIT = 1 << 20
_FLAGS = ("patch", "strict", "dry_run", "overwrite", "nix_markers", "check_fhs_refs",
          "default_rules", "fsync", "skip_unsafe_members", "nix_build", "inside",
          "consumer_guards")
# ASCII digits, a few of them: "٢.٢" matched \d, and 5,000 digits made int() raise later.
_CUDA_VERSION = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?")
_X_Y = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}")
_PATH = str | os.PathLike[str]


def check_options(options: SplitOptions) -> None:
    """Every field, at construction: a wrong type is an :class:`OptionsTypeError`
    (also a ``TypeError``), a wrong value an :class:`OptionsError`; both name the field."""
    _check_profile(options.profile, options.rules_dir)
    # Another profile's packages name their own outputs: checked against them when read.
    _check_outputs(options.outputs, known=options.profile == DEFAULT_PROFILE)
    for name in _FLAGS:
        _check_type(name, getattr(options, name), bool, "True or False")
    if not isinstance(options.runpath, RunpathPolicy):
        raise OptionsTypeError(f"runpath must be a RunpathPolicy, not {options.runpath!r}")
    _check_type("patcher", options.patcher, str, "a str")
    if options.patcher not in PATCHERS:
        raise UnknownPatcherError(f"patcher must be one of {', '.join(PATCHERS)}, "
                           f"not {options.patcher!r}")
    if options.package is not None and not isinstance(options.package, PackageId):
        raise OptionsTypeError(f"package must be a PackageId, not {options.package!r} "
                               "(e.g. PackageId('cuda_cudart'))")
    _check_rules(options.rules_files, options.rules_dir)
    check_jobs(options.jobs)
    if options.memory_limit is not None:
        _check_count("memory_limit", options.memory_limit, minimum=MIN_MEMORY_LIMIT)
    if options.strip_components is not None:
        _check_count("strip_components", options.strip_components, minimum=0)
    _check_count("max_total_bytes", options.max_total_bytes, minimum=1)
    _check_count("max_members", options.max_members, minimum=1)
    if isinstance(options.max_ratio, bool) or not isinstance(options.max_ratio, (int, float)):
        raise OptionsTypeError(f"max_ratio must be a number, not {options.max_ratio!r}")
    if not options.max_ratio > 0 or options.max_ratio != options.max_ratio:
        raise OptionsError(f"max_ratio must be a positive number, not {options.max_ratio!r}")
    if options.progress is not None and not callable(options.progress):
        raise OptionsTypeError(f"progress must be callable or None, not {options.progress!r}")
    _check_package_roots(options.package_roots)
    _check_words(options)


def _check_words(options: SplitOptions) -> None:
    """The string fields that must be one of a few forms."""
    for name in ("cuda_major", "cuda_version", "platform", "python_version",
                 "glibc_version", "cuda_component_hook", "max_glibc"):
        value = getattr(options, name)
        if value is not None:
            _check_type(name, value, str, "a str")
    if options.cuda_major is not None and not str(options.cuda_major).split(".")[0].isdigit():
        raise OptionsError(f"cuda_major must be a CUDA major such as '12', "
                           f"not {options.cuda_major!r}")
    if options.cuda_version is not None and not _CUDA_VERSION.fullmatch(options.cuda_version):
        raise OptionsError(f"cuda_version must be X.Y such as '12.9', "
                           f"not {options.cuda_version!r}")
    if options.platform is not None and options.platform not in PLATFORMS:
        raise OptionsError(unknown_platform(options.platform, "platform"))
    target = options.target_platform
    if target is not None:
        # Only when given: the ELF machines table loads the ELF reader (a split loads it while
        # it decodes, not before).
        from cudasplit._split.targets import PLATFORM_MACHINES

        _check_type("target_platform", target, str, "a str")
        if target not in PLATFORM_MACHINES:
            raise OptionsError(f"target_platform must be one of {', '.join(PLATFORM_MACHINES)}, "
                               f"not {target!r}")
    hook = options.cuda_component_hook
    if hook is not None and (not hook.startswith("/")
                             or any(not ch.isprintable() for ch in hook)):
        raise OptionsError(f"cuda_component_hook must be an absolute path, not {hook!r}")
    python = options.python_version
    if python is not None and not _X_Y.fullmatch(python):
        raise OptionsError(f"python_version must be X.Y such as '3.12', not {python!r}")
    glibc = options.glibc_version
    if glibc is not None and not _X_Y.fullmatch(glibc):
        raise OptionsError(f"glibc_version must be X.Y such as '2.42', not {glibc!r}")
    ceiling = options.max_glibc
    if ceiling is not None and not _X_Y.fullmatch(ceiling):
        raise OptionsError(f"max_glibc must be X.Y such as '2.28', not {ceiling!r}")
    if ceiling is not None and not options.inside:
        raise OptionsError("max_glibc needs inside=True (the glibc floor is read with it)")


def unknown_platform(word: str, name: str) -> str:
    """The message for a platform name cudasplit does not know (with the nearest ones)."""
    near = difflib.get_close_matches(word, PLATFORMS, n=2)
    hint = f"; did you mean {' or '.join(map(repr, near))}?" if near else ""
    return (f"{name} {word!r} is unknown{hint} (known: {', '.join(PLATFORMS)}, "
            "x86_64-linux, aarch64-linux:CAP)")


def _check_rules(files: object, rules_dir: object) -> None:
    if isinstance(files, str) or not isinstance(files, tuple):
        raise OptionsTypeError("rules_files must be a tuple of paths, not "
                               f"{type(files).__name__}")
    for index, path in enumerate(files):
        check_value(f"rules_files[{index}]", path, _PATH)
    if rules_dir is not None:
        check_value("rules_dir", rules_dir, _PATH)


def _check_package_roots(roots: object) -> None:
    if not isinstance(roots, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2
            and all(isinstance(x, str) for x in pair) for pair in roots):
        raise OptionsTypeError("package_roots must be a tuple of (pname, directory) str pairs, "
                               f"not {roots!r}")


def _check_type(name: str, value: object, kind: type, words: str) -> None:
    if not isinstance(value, kind):
        raise OptionsTypeError(f"{name} must be {words}, not {type(value).__name__} "
                               f"{value!r}")


def _check_profile(profile: object, rules_dir: Path | None) -> None:
    _check_type("profile", profile, str, "a str")
    assert isinstance(profile, str)
    if profile == DEFAULT_PROFILE:
        return
    from cudasplit._rulebook import available_profiles, default_rules_dir  # only for profiles

    base = rules_dir or default_rules_dir()
    if profile not in available_profiles(base):
        raise OptionsError(f"profile must be one of {', '.join(available_profiles(base))}, "
                           f"not {profile!r}")


def _check_outputs(outputs: object, *, known: bool = True) -> None:
    if outputs is None:
        return
    if isinstance(outputs, str) or not isinstance(outputs, tuple):
        raise OptionsTypeError(f"outputs must be a tuple of output names such as "
                               f"('lib', 'dev'), not {outputs!r}")
    if not outputs:
        raise OptionsError("outputs must name at least one output (None: all of them)")
    if not known:
        return
    unknown = [name for name in outputs if name not in OUTPUT_NAMES]
    if unknown:
        raise OptionsError(f"unknown output(s) {', '.join(map(repr, unknown))}; "
                           f"known: {', '.join(OUTPUT_NAMES)}")


def _check_count(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionsTypeError(f"{name} must be an integer, not {type(value).__name__} "
                               f"{value!r}")
    if value < minimum:
        raise OptionsError(f"{name} must be an integer >= {minimum}, not {value!r}")


def known_packages(rules_dir: Path | None = None,
                   profile: str = DEFAULT_PROFILE) -> list[str]:
    """The pnames with a rules file in the profile's ``packages/`` (what ``--package``
    accepts)."""
    from cudasplit._rulebook import default_rules_dir, profile_dir  # loaded while decoding

    base = profile_dir(rules_dir or default_rules_dir(), profile)
    return sorted(p.stem for p in (base / "packages").glob("*.toml"))


def check_package_known(options: SplitOptions) -> None:
    """A ``--package`` name without a rules file is most likely misspelt: refuse it unless
    ``default_rules`` says the default rules are meant."""
    package = options.package
    if package is None or options.default_rules:
        return
    known = known_packages(options.rules_dir, options.profile)
    if package.name in known:
        return
    near = difflib.get_close_matches(package.name, known, n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise OptionsError(f"unknown package {package.name!r}: no rules/packages/{package.name}.toml"
                       f"{hint}; split it with the default rules (default_rules)")
