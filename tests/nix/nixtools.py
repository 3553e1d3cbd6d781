"""Which Nix the tests run on: found on PATH, its version, and what a test does without it.

A test that needs Nix skips with the reason when ``nix-instantiate`` is missing (or older than
it needs); under ``CUDASPLIT_NIX_MIN=X.Y`` (set by CI, which installs Nix 2.26 with
``.ci/nix.sh``) a missing or older Nix fails instead, so a CI run proves every Nix test ran
on that version. No tests here."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

import pytest

MODERN = (2, 18)  # the oldest Nix Nixpkgs supports: flakes, lib.fileset, structured attrs


@functools.cache
def nix_version() -> tuple[int, ...] | None:
    """``nix-instantiate --version`` as a tuple; None when there is none."""
    if shutil.which("nix-instantiate") is None:
        return None
    done = subprocess.run(["nix-instantiate", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    return tuple(int(g) for g in found.groups() if g is not None) if found else None


def _required() -> tuple[int, ...] | None:
    wanted = os.environ.get("CUDASPLIT_NIX_MIN", "").strip()
    return tuple(int(p) for p in wanted.split(".")) if wanted else None


def need_nix(minimum: tuple[int, ...] | None = None, why: str = "") -> tuple[int, ...]:
    """Skip (or, under ``CUDASPLIT_NIX_MIN``, fail) unless Nix >= ``minimum`` is on PATH."""
    version = nix_version()
    required = _required()
    if required is not None and (version is None or version < required):
        pytest.fail(f"CUDASPLIT_NIX_MIN={'.'.join(map(str, required))} but nix-instantiate "
                    f"is {'missing' if version is None else '.'.join(map(str, version))}")
    if version is None:
        pytest.skip("nix-instantiate not found (bash .ci/nix.sh installs Nix 2.26)")
    if minimum is not None and version < minimum:
        pytest.skip(f"Nix {'.'.join(map(str, version))} is older than "
                    f"{'.'.join(map(str, minimum))}{': ' + why if why else ''} "
                    "(bash .ci/nix.sh installs Nix 2.26)")
    return version
