"""Parameters of tests/data/nix/build-standin.nix (the buildable Nixpkgs stand-in): the host
pieces it copies into the store, and one ``nix-build`` of it. No tests here."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from cudasplit._elf.read import read_elf_info
from tests.nix.test_nix import CHECKOUT, STORE_PATH, Nix
from tests.support.paths import DATA

STANDIN = DATA / "nix" / "build-standin.nix"


def host_library(name: str) -> str:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True,
                           check=False)
    path = Path(found.stdout.strip()).resolve()
    if not path.is_file():
        pytest.skip(f"gcc does not know {name}")
    return str(path)


def host_zlib() -> str:
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
        if (Path(directory) / "libz.so.1").exists():
            return str((Path(directory) / "libz.so.1").resolve())
    pytest.skip("no host libz.so.1")


def host_loader() -> dict[str, str]:
    info = read_elf_info(Path(sys.executable).resolve())
    assert info is not None and info.interp is not None
    return {Path(info.interp).name: str(Path(info.interp).resolve())}


def write_params(path: Path, nix: Nix, srcs: Mapping[str, str], sets_dir: Path | None = None
                 ) -> Path:
    """The stand-in's paramsFile: ``srcs`` maps an URL's file name to a local tarball."""
    data = {"dir": str(sets_dir or path.parent), "srcs": dict(srcs), "nonce": nix.nonce,
            "checkout": str(CHECKOUT), "python": sys.executable,
            "gccLibs": {n: host_library(n) for n in ("libstdc++.so.6", "libgcc_s.so.1")},
            "zlibLibs": {"libz.so.1": host_zlib()}, "loader": host_loader()}
    path.write_text(json.dumps(data))
    return path


def build(nix: Nix, params: Path, attrs: list[str], *, args: Mapping[str, str] | None = None,
          timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """``nix-build`` the stand-in with ``--arg NAME EXPR`` for each of ``args``."""
    cmd = ["nix-build", str(STANDIN), "--arg", "paramsFile", str(params), "--no-out-link",
           "--keep-going"]
    for name, value in (args or {}).items():
        cmd += ["--arg", name, value]
    for attr in attrs:
        cmd += ["-A", attr]
    done = subprocess.run(cmd, env=nix.env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    nix.created.update(STORE_PATH.findall(done.stdout + done.stderr))
    return done
