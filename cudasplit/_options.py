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

from ._elfapply import PATCHERS
from ._elfedit import UnknownPatcherError
from ._model import OUTPUT_NAMES, PackageId
from ._rules import default_rules_dir
from ._runpath import RunpathPolicy
from ._targets import PLATFORM_MACHINES
from .errors import OptionsError

if TYPE_CHECKING:
    from ._pipeline import SplitOptions



def check_options(options: SplitOptions) -> None:
    _check_outputs(options.outputs)
    if not isinstance(options.runpath, RunpathPolicy):
        raise OptionsError(f"runpath must be a RunpathPolicy, not {options.runpath!r}")
    if options.patcher not in PATCHERS:
        raise UnknownPatcherError(f"patcher must be one of {', '.join(PATCHERS)}, "
                           f"not {options.patcher!r}")
    if options.package is not None and not isinstance(options.package, PackageId):
        raise OptionsError(f"package must be a PackageId, not {options.package!r} "
                           "(e.g. PackageId('cuda_cudart'))")
    if isinstance(options.rules_files, str):
        raise OptionsError("rules_files must be a tuple of paths, not one string")
    _check_count("jobs", options.jobs, minimum=0)
    if options.strip_components is not None:
        _check_count("strip_components", options.strip_components, minimum=0)
    _check_count("max_total_bytes", options.max_total_bytes, minimum=1)
    if not isinstance(options.max_ratio, (int, float)) or not options.max_ratio > 0:
        raise OptionsError(f"max_ratio must be a positive number, not {options.max_ratio!r}")
    if options.cuda_major is not None and not str(options.cuda_major).split(".")[0].isdigit():
        raise OptionsError(f"cuda_major must be a CUDA major such as '12', "
                           f"not {options.cuda_major!r}")
    hook = getattr(options, "cuda_component_hook", None)
    if hook is not None and (not str(hook).startswith("/")
                             or any(not ch.isprintable() for ch in str(hook))):
        raise OptionsError(f"cuda_component_hook must be an absolute path, not {hook!r}")
    python = getattr(options, "python_version", None)
    if python is not None and not re.fullmatch(r"\d+\.\d+", str(python)):
        raise OptionsError(f"python_version must be X.Y such as '3.12', not {python!r}")
    target = getattr(options, "target_platform", None)
    if target is not None and target not in PLATFORM_MACHINES:
        raise OptionsError(f"target_platform must be one of {', '.join(PLATFORM_MACHINES)}, "
                           f"not {target!r}")


def _check_outputs(outputs: object) -> None:
    if outputs is None:
        return
    if isinstance(outputs, str) or not isinstance(outputs, tuple):
        raise OptionsError(f"outputs must be a tuple of output names such as ('lib', 'dev'), "
                           f"not {outputs!r}")
    unknown = [name for name in outputs if name not in OUTPUT_NAMES]
    if unknown:
        raise OptionsError(f"unknown output(s) {', '.join(map(repr, unknown))}; "
                           f"known: {', '.join(OUTPUT_NAMES)}")


def _check_count(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
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
