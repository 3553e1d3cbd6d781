"""Nixpkgs' CUDA tables as data: ``data/nixpkgs.toml`` and ``data/pins.toml``, loaded once.

The files hold what Nixpkgs' package files and ``pkgs/top-level/cuda-packages.nix`` say
(its packages and their redists, propagation edges, build inputs, broken packages, capability
assertions, vulnerabilities, licences, buildRedist's output tables, per-set pins), so a reader
can diff them against Nixpkgs; this module only gives them types.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["ATTRIBUTES", "BROKEN", "CAPABILITIES", "EXPECTED_OUTPUTS", "LICENSES", "LICENSE_OF",
           "NEEDS", "NEEDS_OUTSIDE", "NIXPKGS_PACKAGES", "OUTPUT_FALLBACKS", "OUTPUT_PATTERNS",
           "PINS", "PINS_SOURCE", "PIN_CLASSES", "PROPAGATES", "PROPAGATES_OUTSIDE",
           "RELEASE_FROM", "TARGET_PROPAGATES", "VULNERABILITIES", "Assertion", "OutsideEdge",
           "Pin", "ReleaseFrom",
           "attribute_of", "pin_for"]

# The build classes a pin distinguishes, in the order the generated Nix tests them.
PIN_CLASSES = ("jetson", "aarch64", "x86_64")


@dataclass(frozen=True, slots=True, kw_only=True)
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

    @property
    def uniform(self) -> bool:
        """Every build takes the same version."""
        return self.jetson == self.aarch64 == self.x86_64


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseFrom:
    """A package that takes another manifest key's entry (and archive) before CUDA
    ``cuda_before`` (cuda_crt: cuda_nvcc's on CUDA 12)."""

    package: str
    cuda_before: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OutsideEdge:
    """A package from outside the set that one of the set's packages propagates, from CUDA
    ``cuda_since`` on (libcuobjclient -> rdma-core from 13.4)."""

    package: str
    cuda_since: str = ""


def _load(name: str) -> dict[str, Any]:
    text = resources.files("cudasplit._release.nixify").joinpath("data", name).read_text()
    return tomllib.loads(text)


def _lists(table: Mapping[str, list[str]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in table.items()}


def _pin(row: str | Mapping[str, str]) -> Pin:
    """A row of pins.toml: one version for every build, or one per build class."""
    if isinstance(row, str):
        return Pin(row, row, row)
    return Pin(**row)


_TABLES = _load("nixpkgs.toml")
_PINS = _load("pins.toml")

PROPAGATES: Mapping[str, tuple[str, ...]] = _lists(_TABLES["propagates"])
TARGET_PROPAGATES: Mapping[str, tuple[str, ...]] = _lists(_TABLES["target_propagates"])
NEEDS: Mapping[str, tuple[str, ...]] = _lists(_TABLES["needs"])
NEEDS_OUTSIDE: Mapping[str, tuple[str, ...]] = _lists(_TABLES["needs_outside"])
BROKEN: Mapping[str, str] = dict(_TABLES["broken"])
OUTPUT_FALLBACKS: Mapping[str, tuple[str, ...]] = _lists(_TABLES["output_fallbacks"])
OUTPUT_PATTERNS: Mapping[str, tuple[str, ...]] = _lists(_TABLES["output_patterns"])
EXPECTED_OUTPUTS: tuple[str, ...] = tuple(_TABLES["build_redist"]["expected_outputs"])
# Nixpkgs' redistributable packages (by attribute) -> the redist (redistName) of each.
NIXPKGS_PACKAGES: Mapping[str, str] = dict(_TABLES["packages"])
# Manifest key -> the attribute Nixpkgs names its package by (cuda_cccl -> cccl).
ATTRIBUTES: Mapping[str, str] = dict(_TABLES["attributes"])
LICENSE_OF: Mapping[str, str] = dict(_TABLES["license_of"])
LICENSES: Mapping[str, Mapping[str, str]] = dict(_TABLES["licenses"])
CAPABILITIES: Mapping[str, tuple[Assertion, ...]] = {}
for _row in _TABLES["capability"]:
    CAPABILITIES = {**CAPABILITIES, _row["pname"]: (*CAPABILITIES.get(_row["pname"], ()),
                    Assertion(since=_row.get("since", ""), test=_row["test"], why=_row["why"],
                              found=_row.get("found", _FOUND)))}
VULNERABILITIES: Mapping[str, tuple[tuple[str, str], ...]] = {}
for _row in _TABLES["vulnerability"]:
    VULNERABILITIES = {**VULNERABILITIES, _row["pname"]: (
        *VULNERABILITIES.get(_row["pname"], ()), (_row["below"], _row["text"]))}
PROPAGATES_OUTSIDE: Mapping[str, tuple[OutsideEdge, ...]] = {}
for _row in _TABLES["propagates_outside"]:
    PROPAGATES_OUTSIDE = {**PROPAGATES_OUTSIDE, _row["pname"]: (
        *PROPAGATES_OUTSIDE.get(_row["pname"], ()),
        OutsideEdge(package=_row["package"], cuda_since=_row.get("cuda_since", "")))}

RELEASE_FROM: Mapping[str, ReleaseFrom] = {
    pname: ReleaseFrom(**row) for pname, row in _TABLES["release_from"].items()}

PINS_SOURCE: str = _PINS["source"]
# product (the manifest's release_product) -> CUDA release of the set -> Pin.
PINS: Mapping[str, Mapping[str, Pin]] = {
    product: {release: _pin(row) for release, row in rows.items()}
    for product, rows in _PINS.items() if isinstance(rows, dict)}


def pin_for(product: str, release: str) -> Pin | None:
    """The pin of ``product`` in the set of CUDA ``release`` (``major.minor``); None when the
    table has no row for either."""
    return PINS.get(product, {}).get(release)


def attribute_of(pname: str) -> str:
    """The attribute Nixpkgs' set names the package of manifest key ``pname`` by."""
    return ATTRIBUTES.get(pname, pname)
