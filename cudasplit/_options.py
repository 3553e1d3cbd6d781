"""Checks of :class:`~cudasplit._pipeline.SplitOptions` at construction, and the CPU count.

A wrong value fails where it is made, with a :class:`OptionsError` that names the field,
not later inside the split (``outputs="lib,dev"`` used to fail as "unknown output 'l'").
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ._apiargs import check_path
from ._elfapply import PATCHERS
from ._elfedit import UnknownPatcherError
from ._model import OUTPUT_NAMES, PackageId
from ._rules import default_rules_dir
from ._runpath import RunpathPolicy
from ._source_topdir import PLATFORMS
from .errors import OptionsError, OptionsTypeError

if TYPE_CHECKING:
    from ._pipeline import SplitOptions



_FLAGS = ("patch", "strict", "dry_run", "overwrite", "nix_markers", "check_fhs_refs",
          "default_rules", "fsync", "skip_unsafe_members")
_CUDA_VERSION = re.compile(r"\d+\.\d+(\.\d+)?")


def check_options(options: SplitOptions) -> None:
    """Every field, at construction (issue 24): a wrong type is an :class:`OptionsTypeError`
    (also a ``TypeError``), a wrong value an :class:`OptionsError`; both name the field."""
    _check_outputs(options.outputs)
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
    if options.jobs is not None:
        _check_count("jobs", options.jobs, minimum=1)
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
                 "cuda_component_hook"):
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
    hook = options.cuda_component_hook
    if hook is not None and (not hook.startswith("/")
                             or any(not ch.isprintable() for ch in hook)):
        raise OptionsError(f"cuda_component_hook must be an absolute path, not {hook!r}")
    python = options.python_version
    if python is not None and not re.fullmatch(r"\d+\.\d+", python):
        raise OptionsError(f"python_version must be X.Y such as '3.12', not {python!r}")


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
        check_path(path, f"rules_files[{index}]")
    if rules_dir is not None:
        check_path(rules_dir, "rules_dir")


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


def _check_outputs(outputs: object) -> None:
    if outputs is None:
        return
    if isinstance(outputs, str) or not isinstance(outputs, tuple):
        raise OptionsTypeError(f"outputs must be a tuple of output names such as "
                               f"('lib', 'dev'), not {outputs!r}")
    if not outputs:
        raise OptionsError("outputs must name at least one output (None: all of them)")
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


def available_cpus(env: Mapping[str, str] | None = None) -> int:
    """CPUs this process may use: ``NIX_BUILD_CORES`` inside a Nix builder (0 there means
    "all"), else the CPU affinity mask (a container or ``taskset`` limit), not ``cpu_count``."""
    env = os.environ if env is None else env
    affinity = max(1, len(os.sched_getaffinity(0)))
    cores = env.get("NIX_BUILD_CORES", "").strip()
    if cores.isdigit() and int(cores) > 0:
        return min(int(cores), affinity)
    return affinity


def known_packages(rules_dir: Path | None = None) -> list[str]:
    """The pnames with a rules file in ``rules/packages/`` (what ``--package`` accepts)."""
    base = rules_dir or default_rules_dir()
    return sorted(p.stem for p in (base / "packages").glob("*.toml"))


def check_package_known(options: SplitOptions) -> None:
    """A ``--package`` name without a rules file is most likely misspelt: refuse it unless
    ``default_rules`` says the default rules are meant."""
    package = options.package
    if package is None or options.default_rules:
        return
    known = known_packages(options.rules_dir)
    if package.name in known:
        return
    near = difflib.get_close_matches(package.name, known, n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise OptionsError(f"unknown package {package.name!r}: no rules/packages/{package.name}.toml"
                       f"{hint}; add --default-rules to split it with the default rules")
