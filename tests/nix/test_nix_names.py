"""Names that are not packages: a manifest key equal to a name the generated Nix gives
something else (the set's own attributes and machinery, the Nixpkgs attributes its packages
take, nixify's ``default.nix`` and ``cudaToolkit``) is refused in one line naming the manifest,
before anything is written; any other key makes files that all parse
(``nix-instantiate --parse``) and a set that has the package by that name."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cudasplit._release.nixify import RESERVED
from cudasplit.cli import main
from cudasplit.errors import ManifestError
from cudasplit.nixify import nixify_manifest, nixify_sets
from tests.nix.nixtools import need_nix
from tests.support.paths import DATA

pytestmark = pytest.mark.nix

EXAMPLES = int(os.environ.get("CUDASPLIT_HYPOTHESIS_EXAMPLES", "40")) // 2 or 1
# The names the issue named, each of which used to make an unparsable set or a lost file.
NAMED = ["mkRedist", "lib", "callPackage", "cudaCapabilities", "default", "cudaToolkit",
         "outputFallbacks", "redistSystem", "overrideScope", "stdenv", "rdma-core"]


def _manifest(path: Path, key: str) -> Path:
    path.write_text(json.dumps({"release_label": "13.4.2", "release_product": "cuda", key: {
        "name": "x", "license": "x", "version": "1.0", "linux-x86_64": {
            "relative_path": f"x/{key}-linux-x86_64-1.0-archive.tar.xz", "sha256": "0" * 64,
            "size": "1"}}}))
    return path


@pytest.mark.parametrize("key", NAMED)
def test_a_key_the_sets_use_is_refused_in_one_line(tmp_path: Path, key: str) -> None:
    assert key in RESERVED
    source = _manifest(tmp_path / "redistrib_13.4.2.json", key)
    done = CliRunner().invoke(main, ["nixify-sets", str(source), "-o", str(tmp_path / "sets")])
    assert done.exit_code == 2, done.output
    line = done.output.strip()
    assert "\n" not in line and "redistrib_13.4.2.json" in line and repr(key) in line, line
    assert "Traceback" not in done.output and not (tmp_path / "sets").exists()


@pytest.mark.parametrize("key", ["default", "cudaToolkit", "lib"])
def test_nixify_refuses_them_before_reading_a_tarball(tmp_path: Path, key: str) -> None:
    """``default`` would be overwritten by default.nix, ``cudaToolkit`` by --toolkit's file."""
    source = _manifest(tmp_path / "redistrib_13.4.2.json", key)
    (tmp_path / "dist").mkdir()
    with pytest.raises(ManifestError, match=f"package key '{key}' is a name the generated Nix"):
        nixify_manifest(source, tmp_path / "dist", tmp_path / "nix")
    assert not (tmp_path / "nix").exists()


_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_'-]{0,12}", fullmatch=True)
KEYS = st.one_of(st.sampled_from(sorted(RESERVED)), _IDENT,
                 st.sampled_from(["if", "in", "or", "with", "rec", "assert", "let", "inherit",
                                  "true", "null", "__curPos", "cuda_cudart", "cccl",
                                  "cuda_cccl", "cuda_crt", "x-y", "a'b"]))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=KEYS)
def test_every_key_is_refused_or_every_file_parses(tmp_path: Path, key: str) -> None:
    need_nix()
    out = tmp_path / f"sets-{abs(hash(key))}"
    source = _manifest(out.with_suffix(".json"), key)
    try:
        nixify_sets([source], out)
    except ManifestError as exc:
        assert "\n" not in str(exc).strip() and source.name in str(exc)
        assert not out.exists()
        event("refused")
        return
    event("written")
    files = sorted(str(f) for f in out.glob("*.nix"))
    done = subprocess.run(["nix-instantiate", "--parse", *files], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    attrs = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "-E",
         f"builtins.attrNames (import {DATA}/nix/sets-standin.nix {{ dir = {out}; system = "
         "\"x86_64-linux\"; setName = \"cudaPackages_13_4\"; })"],
        capture_output=True, text=True, timeout=60, check=False)
    assert attrs.returncode == 0, attrs.stderr[-2000:]
    wanted = "cccl" if key == "cuda_cccl" else key
    assert wanted in json.loads(attrs.stdout)
