"""Nixpkgs' CUDA tables as data: ``data/nixpkgs.toml`` and ``data/pins.toml``, loaded once.

The files hold what Nixpkgs' package files and ``pkgs/top-level/cuda-packages.nix`` say
(propagation edges, build inputs, broken packages, capability assertions, vulnerabilities,
``outputNameVarFallbacks``, per-set pins), so a reader can diff them against Nixpkgs; this
module only gives them types.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["BROKEN", "CAPABILITIES", "NEEDS", "NEEDS_OUTSIDE", "OUTPUT_FALLBACKS", "PINS",
           "PINS_SOURCE", "PIN_CLASSES", "PROPAGATES", "TARGET_PROPAGATES", "VULNERABILITIES",
           "Assertion", "Pin", "pin_for"]

# The build classes a pin distinguishes, in the order the generated Nix tests them.
PIN_CLASSES = ("jetson", "aarch64", "x86_64")


@dataclass(frozen=True, slots=True)
class Assertion:
    """One of Nixpkgs' capability assertions (``platformAssertions``) of a package, for the
    package versions from ``since`` (``""``: every one). ``test`` is a Nix expression over the
    set's ``cudaCapabilities``, ``redistSystem``, ``hasJetsonCudaCapability`` and
    ``cudaMajorMinorVersion``; ``why`` the problem when it is false, followed by what was found
    (``found``, a Nix expression: the requested capabilities unless said otherwise)."""

    since: str
    test: str
    why: str
    found: str = "builtins.toJSON cudaCapabilities"


_FOUND = "builtins.toJSON cudaCapabilities"


@dataclass(frozen=True, slots=True)
class Pin:
    """The manifest version (``release_label``) one set takes for a Jetson build, another
    ``aarch64-linux`` build and an ``x86_64-linux`` build."""

    jetson: str
    aarch64: str
    x86_64: str

    def version(self, build: str) -> str:
        return {"jetson": self.jetson, "aarch64": self.aarch64, "x86_64": self.x86_64}[build]

    def builds(self, version: str) -> tuple[str, ...]:
        """The build classes that take ``version``."""
        return tuple(b for b in PIN_CLASSES if self.version(b) == version)


def _load(name: str) -> dict[str, Any]:
    text = resources.files("cudasplit._release.nixify").joinpath("data", name).read_text()
    return tomllib.loads(text)


def _lists(table: Mapping[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in table.items()}


_TABLES = _load("nixpkgs.toml")
_PINS = _load("pins.toml")

PROPAGATES: Mapping[str, tuple[str, ...]] = _lists(_TABLES["propagates"])
TARGET_PROPAGATES: Mapping[str, tuple[str, ...]] = _lists(_TABLES["target_propagates"])
NEEDS: Mapping[str, tuple[str, ...]] = _lists(_TABLES["needs"])
NEEDS_OUTSIDE: Mapping[str, tuple[str, ...]] = _lists(_TABLES["needs_outside"])
BROKEN: Mapping[str, str] = dict(_TABLES["broken"])
OUTPUT_FALLBACKS: Mapping[str, tuple[str, ...]] = _lists(_TABLES["output_fallbacks"])
CAPABILITIES: Mapping[str, tuple[Assertion, ...]] = {}
for _row in _TABLES["capability"]:
    CAPABILITIES = {**CAPABILITIES, _row["pname"]: (*CAPABILITIES.get(_row["pname"], ()),
                    Assertion(_row.get("since", ""), _row["test"], _row["why"],
                              _row.get("found", _FOUND)))}
VULNERABILITIES: Mapping[str, tuple[tuple[str, str], ...]] = {}
for _row in _TABLES["vulnerability"]:
    VULNERABILITIES = {**VULNERABILITIES, _row["pname"]: (
        *VULNERABILITIES.get(_row["pname"], ()), (_row["below"], _row["text"]))}

PINS_SOURCE: str = _PINS["source"]
# product (the manifest's release_product) -> CUDA release of the set -> Pin.
PINS: Mapping[str, Mapping[str, Pin]] = {
    product: {release: Pin(**row) for release, row in rows.items()}
    for product, rows in _PINS.items() if isinstance(rows, dict)}


def pin_for(product: str, release: str) -> Pin | None:
    """The pin of ``product`` in the set of CUDA ``release`` (``major.minor``); None when the
    table has no row for either."""
    return PINS.get(product, {}).get(release)
