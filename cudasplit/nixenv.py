"""Reading a Nix builder's outputs: ``$outputs`` + one variable each, or structured attrs."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from .errors import NixEnvironmentError
from .model import OUTPUT_NAMES


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
            "$outputs is not set: --nix must run inside a Nix builder "
            "(or set NIX_ATTRS_JSON_FILE with structured attrs)")
    result: dict[str, Path] = {}
    for name in names:
        value = env.get(name)
        if not value:
            raise NixEnvironmentError(f"$outputs names {name!r} but ${name} is not set")
        result[name] = _store_path(value, name)
    return result


def _from_attrs(path: Path) -> dict[str, Path]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise NixEnvironmentError(f"{path}: cannot read NIX_ATTRS_JSON_FILE ({exc})") from exc
    outputs = data.get("outputs") if isinstance(data, dict) else None
    if not isinstance(outputs, dict) or not outputs:
        raise NixEnvironmentError(f"{path}: structured attrs have no 'outputs' object")
    return {str(k): _store_path(str(v), str(k)) for k, v in outputs.items()}


def _store_path(value: str, name: str) -> Path:
    if not value.startswith("/"):
        raise NixEnvironmentError(f"output {name!r} is not an absolute path: {value!r}")
    return Path(value)
