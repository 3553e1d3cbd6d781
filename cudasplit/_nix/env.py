"""The Nix builder seen from inside: its outputs (``$outputs`` + one variable each, or structured
attrs), its loader and library dirs, and the RUNPATH policy ``--nix`` derives from them.

With ``__structuredAttrs = true`` Nix exports no attribute as a variable: the outputs and the
inputs (``buildInputs``, ``propagatedBuildInputs``) are in the JSON file ``$NIX_ATTRS_JSON_FILE``
names (in ``.attrs.sh`` they are bash arrays, which a child process does not see). Both are
read from there, so a structured derivation whose libstdc++ is only in ``buildInputs`` (a
``stdenvNoCC`` one has no ``NIX_LDFLAGS`` either) resolves it."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from cudasplit._elf.plan import RunpathPolicy, loader_arch
from cudasplit._model import OUTPUT_NAMES
from cudasplit.errors import NixEnvironmentError

__all__ = ["nix_dynamic_linker", "nix_library_dirs", "nix_outputs", "with_nix_defaults"]


def nix_outputs(env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Output name -> store path, from the builder environment.

    With ``__structuredAttrs = true`` Nix puts everything into the JSON file named by
    ``$NIX_ATTRS_JSON_FILE`` (``outputs`` is then an object name -> path); otherwise
    ``$outputs`` lists the names and each name is a variable holding its path.
    """
    env = os.environ if env is None else env
    attrs_file = env.get("NIX_ATTRS_JSON_FILE")
    outputs = _from_attrs(Path(attrs_file)) if attrs_file else _from_variables(env)
    unknown = sorted(set(outputs) - set(OUTPUT_NAMES))
    if unknown:
        raise NixEnvironmentError(
            f"Nix output(s) {', '.join(unknown)} are not cudasplit outputs "
            f"(known: {', '.join(OUTPUT_NAMES)})")
    if "out" not in outputs:
        raise NixEnvironmentError("the Nix outputs do not include 'out'")
    return outputs


def _from_variables(env: Mapping[str, str]) -> dict[str, Path]:
    names = env.get("outputs", "").split()
    if not names:
        raise NixEnvironmentError(
            "$outputs is not set: a split into a Nix build's outputs (split_nix) must run "
            "inside a Nix builder "
            "(or set NIX_ATTRS_JSON_FILE with structured attrs)")
    result: dict[str, Path] = {}
    for name in names:
        value = env.get(name)
        if not value:
            raise NixEnvironmentError(f"$outputs names {name!r} but ${name} is not set")
        result[name] = _store_path(value, name)
    return result


def _attrs(path: Path) -> dict[str, object]:
    """The structured attrs (an object), or a ``NixEnvironmentError`` naming the file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise NixEnvironmentError(f"{path}: cannot read NIX_ATTRS_JSON_FILE ({exc})") from exc
    if not isinstance(data, dict):
        raise NixEnvironmentError(f"{path}: structured attrs are not a JSON object")
    return data


def _from_attrs(path: Path) -> dict[str, Path]:
    data = _attrs(path)
    outputs = data.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise NixEnvironmentError(f"{path}: structured attrs have no 'outputs' object")
    return {str(k): _store_path(str(v), str(k)) for k, v in outputs.items()}


def _store_path(value: str, name: str) -> Path:
    if not value.startswith("/"):
        raise NixEnvironmentError(f"output {name!r} is not an absolute path: {value!r}")
    return Path(value)


def nix_dynamic_linker(env: Mapping[str, str] | None = None) -> str | None:
    """The loader the cc-wrapper links against: ``$NIX_CC/nix-support/dynamic-linker``
    (what Nixpkgs' autoPatchelf sets as the interpreter), or None when there is none."""
    env = os.environ if env is None else env
    cc = env.get("NIX_CC")
    if not cc:
        return None
    try:
        text = (Path(cc) / "nix-support" / "dynamic-linker").read_text().strip()
    except OSError:
        return None
    return text if text.startswith("/") else None


def nix_library_dirs(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Where a Nix build finds libraries, in autoPatchelf's order: every ``buildInputs`` (and
    propagated) entry's ``lib`` (and ``<config>/lib``, a cross gcc's), then the ``-L`` dirs of
    ``$NIX_LDFLAGS`` and of the compiler wrapper's ``nix-support/cc-ldflags`` (gcc's own lib
    dir: libstdc++, libgcc_s). With structured attrs the inputs come from
    ``$NIX_ATTRS_JSON_FILE`` (Nix exports no variable then)."""
    env = os.environ if env is None else env
    dirs: list[str] = []
    for path in _inputs(env):
        if path.startswith("/"):
            dirs += [f"{path.rstrip('/')}/lib", *_config_lib_dirs(path)]
    dirs += _link_dirs(env.get("NIX_LDFLAGS", ""))
    cc = env.get("NIX_CC")
    if cc:
        with contextlib.suppress(OSError):
            dirs += _link_dirs((Path(cc) / "nix-support" / "cc-ldflags").read_text())
    return tuple(dict.fromkeys(dirs))


_INPUTS = ("buildInputs", "propagatedBuildInputs")


def _inputs(env: Mapping[str, str]) -> list[str]:
    """The store paths of ``buildInputs`` then ``propagatedBuildInputs``: the structured attrs'
    lists where ``$NIX_ATTRS_JSON_FILE`` is set (strings only; a derivation's attribute that
    is not a list is ignored, as stdenv would fail on it first), and the variables (plain
    attrs; empty under structured attrs, where Nix sets none)."""
    words: list[str] = []
    attrs_file = env.get("NIX_ATTRS_JSON_FILE")
    if attrs_file:
        data = _attrs(Path(attrs_file))
        for name in _INPUTS:
            value = data.get(name)
            if isinstance(value, list):
                words += [w for v in value if isinstance(v, str) for w in v.split()]
    for name in _INPUTS:
        words += env.get(name, "").split()
    return words


_TRIPLE = re.compile(r"^[a-z0-9_]+(-[a-z0-9_]+){2,3}$")


def _config_lib_dirs(prefix: str) -> list[str]:
    """``<prefix>/<config>/lib``: where a cross gcc's ``cc.lib`` keeps libstdc++ and libgcc_s
    (``aarch64-unknown-linux-gnu/lib``; autoPatchelf misses it, nixpkgs#242050)."""
    try:
        names = sorted(os.listdir(prefix))
    except OSError:
        return []
    return [f"{prefix.rstrip('/')}/{name}/lib" for name in names
            if _TRIPLE.match(name) and os.path.isdir(os.path.join(prefix, name, "lib"))]


def _link_dirs(flags: str) -> list[str]:
    """``-L/dir`` and ``-L /dir`` entries of a linker flag string."""
    words = flags.split()
    dirs = []
    for i, word in enumerate(words):
        if word == "-L" and i + 1 < len(words):
            dirs.append(words[i + 1])
        elif word.startswith("-L") and len(word) > 2:
            dirs.append(word[2:])
    return [d for d in dirs if d.startswith("/")]


def with_nix_defaults(policy: RunpathPolicy, env: Mapping[str, str] | None = None
                      ) -> RunpathPolicy:
    """``--nix`` mode: unresolved names fail the run (files of the loader's arch only, as
    autoPatchelf skips the others), the build environment's library dirs are searched after
    ``--library-path`` (the host's own are not: the sandbox has none), and executables of the
    loader's arch get ``$NIX_CC/nix-support/dynamic-linker`` unless ``--interpreter`` named
    one."""
    interpreters = policy.interpreters
    loader = nix_dynamic_linker(env)
    arch = loader_arch(loader) if loader is not None else platform.machine()
    if loader is not None and policy.interpreter_for(arch) is None:
        interpreters = (*interpreters, (arch, loader))
    return replace(policy, interpreters=interpreters, fail_unresolved=True, fail_unpatched=True,
                   host_loader=False,
                   target_arch=policy.target_arch or arch,
                   library_paths=(*policy.library_paths, *nix_library_dirs(env)))
