"""No input becomes Nix code: arbitrary text in every manifest field, package key and
``DT_NEEDED`` name either comes out of the generated files as the same data (they parse with
``nix-instantiate --parse`` and evaluate to it) or is refused with a one-line
``CudasplitError``; files are written all or none (a full disk leaves the old ones)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cudasplit._release.manifest import parse_manifest
from cudasplit._release.nixify import (
    PackagePlan,
    PlatformPlan,
    nixify,
    render_package,
    write_atomically,
)
from cudasplit.errors import CudasplitError, OutputError
from cudasplit.nixify import nixify_sets
from tests.nix.nixtools import need_nix
from tests.support.builders import compile_shared, write_tarball
from tests.support.paths import DATA

pytestmark = pytest.mark.nix

EXAMPLES = int(os.environ.get("CUDASPLIT_HYPOTHESIS_EXAMPLES", "40")) // 2 or 1
# Any text, line breaks, quotes, `${`, backslashes and non-ASCII included.
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=24) | \
    st.sampled_from(['"; preInstall = "x"; #', "${builtins.abort \"x\"}", "a\nb = 1;", "\\${",
                     "''${x}", "$", "\\", "' or 1"])
_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
KEY = st.one_of(_NAME, _NAME, TEXT)  # mostly names, so most examples get as far as Nix
_HEX = st.from_regex(r"[0-9a-f]{64}", fullmatch=True)
SHA = _HEX  # the manifest loader refuses anything else (its own tests)
# The loader wants a version and a relative path: mostly such, sometimes anything.
VERSION = st.one_of(st.from_regex(r"[0-9][0-9.]{0,8}", fullmatch=True), TEXT)
PATH = st.one_of(st.from_regex(r"[a-z_]{1,8}/[a-z0-9_.-]{1,12}\.tar\.xz", fullmatch=True),
                 TEXT)


def _eval(expr: str) -> Any:
    done = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "-E", expr],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _parses(path: Path) -> None:
    done = subprocess.run(["nix-instantiate", "--parse", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, (path.name, done.stderr[-2000:])


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=KEY, label=TEXT, name=TEXT, license_=TEXT, version=VERSION, path=PATH, sha=SHA,
       date=TEXT)
def test_manifest_text_is_data_or_refused(tmp_path: Path, key: str, label: str, name: str,
                                          license_: str, version: str, path: str, sha: str,
                                          date: str) -> None:
    need_nix()
    manifest = {"release_label": "13.4." + label, "release_date": date,
                 "release_product": "cuda",
                 key: {"name": name, "license": license_, "version": version,
                       "linux-x86_64": {"relative_path": path, "sha256": sha, "size": "1"}}}
    out = tmp_path / f"sets-{abs(hash((key, label, name, path)))}"
    source = out.with_suffix(".json")
    source.write_text(json.dumps(manifest))
    try:
        nixify_sets([source], out)
    except CudasplitError as exc:
        assert "\n" not in str(exc).strip(), str(exc)
        event("refused")
        return
    event("evaluated")
    for file in out.glob("*.nix"):
        _parses(file)
    got = _eval(f"(import {DATA}/nix/sets-standin.nix {{ dir = {out}; system = "
                f"\"x86_64-linux\"; setName = \"cudaPackages_13_4\"; }}).{json.dumps(key)}")
    # The loader names a nameless package by its key.
    assert got["description"] == (name or key) and got["release"]["license"] == license_
    assert got["version"] == version and got["sha256"] == sha
    assert got["url"] == "https://developer.download.nvidia.com/compute/cuda/redist/" + path
    assert got["pname"] == key


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pname=KEY, version=TEXT, description=TEXT, url=TEXT, sha=TEXT,
       needed=st.lists(TEXT, max_size=3, unique=True), resolved=TEXT)
def test_nixify_text_is_data_or_refused(tmp_path: Path, pname: str, version: str,
                                        description: str, url: str, sha: str,
                                        needed: list[str], resolved: str) -> None:
    """One package's expression, every string of its plan arbitrary: DT_NEEDED names that
    nothing provides (a comment and passthru.unresolvedNeeded) and resolved ones (comments)."""
    need_nix()
    plan = PackagePlan(
        pname=pname, version=version, description=description, license=None,
        platforms=(PlatformPlan(platform="linux-x86_64", url=url, sha256=sha,
                                outputs=("out", "lib")),),
        build_inputs=("libdep",), resolves={"libdep": (resolved,)}, unresolved=tuple(needed),
        dlopened=(), package_roots=(), cuda_version="13.4")
    try:
        text = render_package(plan, "redistrib_" + description + ".json")
    except CudasplitError as exc:
        assert "\n" not in str(exc).strip(), str(exc)
        event("refused")
        return
    event("evaluated")
    file = tmp_path / f"p{abs(hash(text))}.nix"
    file.write_text(text)
    _parses(file)
    stub = ("let f = import " + str(file) + "; lib = import " + str(DATA / "nix/lib-standin.nix")
            + "; mk = a: a // (a.passthru or { }); arg = n: { pname = n; outPath = \"/x\"; };"
            " args = builtins.mapAttrs (n: _: arg n) (builtins.functionArgs f) // { inherit lib;"
            " stdenv = { hostPlatform.system = \"x86_64-linux\"; mkDerivation = mk; };"
            " stdenvNoCC = { mkDerivation = mk; }; fetchurl = a: a; };"
            " d = f args; in { inherit (d) pname version; description = d.meta.description;"
            " url = d.src.url; sha256 = d.src.sha256; unresolved = d.unresolvedNeeded or [ ];"
            " keys = builtins.attrNames d; }")
    got = _eval(stub)
    assert (got["pname"], got["version"], got["description"]) == (pname, version, description)
    assert (got["url"], got["sha256"]) == (url, sha)
    assert got["unresolved"] == sorted(needed) or got["unresolved"] == needed
    assert not {"preInstall", "postInstall", "installPhase", "builder"} & set(got["keys"])


def test_a_dt_needed_name_with_a_newline_stays_data(tmp_path: Path) -> None:
    """The reproduced injection: an ELF file in the tarball NEEDs a name that ends nixify's
    comment and adds ``preInstall``; now it is a string in passthru.unresolvedNeeded."""
    need_nix()
    placeholder = "libPLACEHOLDER" + "x" * 60 + ".so"
    evil = 'libq.so\n  preInstall = "touch /tmp/injected";\n  #'
    top = tmp_path / "tree" / "libinj-linux-x86_64-1.0.0-archive"
    (top / "lib").mkdir(parents=True)
    lib = compile_shared(top / "lib", "libinj.so.1", "int inj(void) { return 1; }\n",
                         soname="libinj.so.1", needed_libs=[placeholder])
    data = lib.read_bytes()
    assert data.count(placeholder.encode()) == 1
    lib.write_bytes(data.replace(placeholder.encode(),
                                 evil.encode().ljust(len(placeholder), b"\0")))
    (tmp_path / "dist").mkdir()
    tarball = write_tarball(top, tmp_path / "dist", "xz")
    manifest = parse_manifest({"release_label": "13.4.0", "libinj": {
        "name": "inj", "license": "x", "version": "1.0.0", "linux-x86_64": {
            "relative_path": f"libinj/linux-x86_64/{tarball.name}", "sha256": "0" * 64,
            "size": str(tarball.stat().st_size)}}}, source="redistrib_13.4.0.json")
    nixify(manifest, tmp_path / "dist", tmp_path / "nix")
    text = (tmp_path / "nix" / "libinj.nix").read_text()
    assert "preInstall" not in text.replace("\\n  preInstall", "")
    _parses(tmp_path / "nix" / "libinj.nix")
    got = _eval(f"let f = import {tmp_path}/nix/libinj.nix; lib = import "
                f"{DATA}/nix/lib-standin.nix; mk = a: a // a.passthru; in (f {{ inherit lib; "
                "stdenv = { hostPlatform.system = \"x86_64-linux\"; }; "
                "stdenvNoCC.mkDerivation = mk; fetchurl = a: a; cudasplit = null; })")
    assert got["unresolvedNeeded"] == [evil] and "preInstall" not in got


def test_package_keys_and_paths_that_leave_the_tree_are_refused(tmp_path: Path) -> None:
    """A key of ``../`` components would make nixify-sets read any .toml; a relative_path
    with ``..`` would make nixify read any file: both refused, naming the manifest."""
    cases = [{"release_label": "13.4.0", "../../../../etc/x": {"version": "1", "linux-x86_64": {
                 "relative_path": "a/b.tar.xz", "sha256": "0", "size": "1"}}},
             {"release_label": "13.4.0", "cuda_cudart": {"version": "1", "linux-x86_64": {
                 "relative_path": "../../etc/passwd", "sha256": "0", "size": "1"}}},
             {"release_label": "13.4\"; x = 1; #.0", "cuda_cudart": {"version": "1"}}]
    for i, case in enumerate(cases):
        path = tmp_path / f"redistrib_{i}.json"
        path.write_text(json.dumps(case))
        with pytest.raises(CudasplitError, match=str(path.name)):
            nixify_sets([path], tmp_path / f"out{i}")
        assert not (tmp_path / f"out{i}").exists() or not any((tmp_path / f"out{i}").iterdir())


def test_writes_are_all_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk in the middle of writing: the old files are left as they were, no
    temporary file stays behind."""
    write_atomically(tmp_path, {"a.nix": "old a", "b.nix": "old b"})
    real_fdopen = os.fdopen
    calls = {"n": 0}

    def full_disk(fd: int, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", full_disk)
    with pytest.raises(OutputError, match="No space left"):
        write_atomically(tmp_path, {"a.nix": "new a", "b.nix": "new b"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.nix", "b.nix"]
    assert (tmp_path / "a.nix").read_text() == "old a"
