"""Real ``nix-build`` runs: a multi-output ``builtins.derivation`` whose builder calls cudasplit.

No nixpkgs: ``builder`` is ``/bin/sh`` (or ``/bin/bash`` for the setup hook), and because the
builder's ``PATH`` is unusable every program is named by absolute path (this interpreter with
``-m cudasplit`` and ``PYTHONPATH`` set to the checkout). Nix runs from a private ``nix.conf``
(``NIX_CONF_DIR``): ``sandbox = false`` so the builder can see the interpreter,
``build-users-group =`` so it runs as the invoking user, no substituters. Every derivation
carries a per-session nonce so it is really built, not answered from an earlier session's
store, and its outputs are deleted from the store afterwards.

Skipped, with the reason, when ``nix-build`` is missing or cannot build (probed once).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import cudasplit
from tests.nix.nixtools import need_nix
from tests.support.builders import build_redist_tree, dynamic_entries, write_tarball

pytestmark = pytest.mark.nix

CHECKOUT = Path(cudasplit.__file__).resolve().parent.parent
HOOK = CHECKOUT / "cudasplit" / "nix" / "setup-hook.sh"
OUTPUTS = ("out", "lib", "dev", "include", "static", "stubs")
VERSION = "12.9.79"
# Symlinks whose own path goes to one output and whose target to another, both directions:
# a path-based split (buildRedist's moves) would need store references lib <-> static.
LIB_TO_STATIC = ("lib/libdemo_static.a.current", "libdemo_static.a")
STATIC_TO_LIB = ("lib/libdemo-compat.a", f"libdemo.so.{VERSION}")
STORE_PATH = re.compile(r"/nix/store/[0-9a-z]{32}-[^\s'\"`]+")

# The derivation, generic over its parameters (read from JSON so no string needs Nix escaping).
DRV_NIX = r"""
{ paramsFile }:
let
  p = builtins.fromJSON (builtins.readFile paramsFile);
  src = builtins.path { path = p.src; name = baseNameOf p.src; };
  script = builtins.replaceStrings [ "@src@" ] [ "${src}" ] p.script;
  drv = builtins.derivation ({
  name = p.name;
  system = builtins.currentSystem;
  builder = p.builder;
  args = [ "-c" script ];
  outputs = p.outputs;
  inherit src;
  nonce = p.nonce;
} // p.extra);
in
# A list of every output, so nix-build prints each path (in the order of p.outputs).
map (o: drv.${o}) drv.outputs
"""


@dataclass(frozen=True)
class Nix:
    env: dict[str, str]
    workdir: Path
    nonce: str
    created: set[str] = field(default_factory=set)

    def build(self, name: str, script: str, *, src: Path, builder: str = "/bin/sh",
              outputs: tuple[str, ...] = OUTPUTS, extra: dict[str, object] | None = None
              ) -> subprocess.CompletedProcess[str]:
        params = {"name": name, "script": script, "src": str(src), "builder": builder,
                  "outputs": list(outputs), "nonce": self.nonce, "extra": extra or {}}
        params_file = self.workdir / f"{name}.json"
        params_file.write_text(json.dumps(params))
        cmd = ["nix-build", str(self.workdir / "drv.nix"), "--arg", "paramsFile",
               str(params_file), "--no-out-link"]
        result = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        self.created.update(STORE_PATH.findall(result.stdout + result.stderr))
        return result

    def references(self, path: str) -> list[str]:
        result = subprocess.run(["nix-store", "-q", "--references", path], env=self.env,
                                capture_output=True, text=True, check=True)
        return result.stdout.split()


    def cleanup(self) -> None:
        """Delete what this session put into the store: derivations, their sources and
        outputs (built with --no-out-link, so nothing roots them)."""
        drvs = {p for p in self.created if p.endswith(".drv")}
        built, sources = set(self.created), set()
        for drv in drvs:
            built.update(self._query("--outputs", drv))
            sources.update(self._query("--references", drv))
        # One alive path fails a whole --delete: sources may be shared with older sessions.
        for group in (built, sources - built):
            existing = sorted(p for p in group if os.path.lexists(p))
            if existing:
                subprocess.run(["nix-store", "--delete", *existing], env=self.env,
                               capture_output=True, check=False)

    def _query(self, query: str, path: str) -> list[str]:
        found = subprocess.run(["nix-store", "-q", query, path], env=self.env,
                               capture_output=True, text=True, check=False)
        return found.stdout.split()


@pytest.fixture(scope="session")
def nix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nix]:
    need_nix()
    if shutil.which("nix-build") is None or shutil.which("nix-store") is None:
        pytest.skip("nix-build not found (bash .ci/nix.sh installs Nix 2.26)")
    workdir = tmp_path_factory.mktemp("nix")
    conf = workdir / "conf"
    conf.mkdir()
    (conf / "nix.conf").write_text(
        "sandbox = false\nbuild-users-group =\nsubstituters =\n")
    env = {**os.environ, "NIX_CONF_DIR": str(conf)}
    (workdir / "drv.nix").write_text(DRV_NIX)
    probe_src = workdir / "probe.txt"
    probe_src.write_text("probe\n")
    handle = Nix(env, workdir, uuid.uuid4().hex)
    try:
        probe = handle.build("cudasplit-probe", 'echo ok > "$out"', src=probe_src,
                             outputs=("out",))
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"nix-build cannot run here: {exc}")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"nix-build cannot build here: {last}")
    try:
        yield handle
    finally:
        handle.cleanup()


@pytest.fixture(scope="session")
def nix_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A light demo package (lib, static, stubs, headers, pkg-config, cross-output links)."""
    root = tmp_path_factory.mktemp("nixsrc")
    top = build_redist_tree(
        root / "tree", version=VERSION, with_bin=False, with_hardlink=False,
        with_dir_symlink=False, with_cmake=False, with_doc=False, with_samples=False,
        with_python=False, with_host_target=False, with_src=False, with_nvvm=False,
        with_lib64=False, with_cross_symlinks=True, strip=True)
    for link, target in (LIB_TO_STATIC, STATIC_TO_LIB):
        os.symlink(target, top / link)
    (root / "dist").mkdir()
    return write_tarball(top, root / "dist", "xz")


def _python_call(arguments: str) -> str:
    return (f"PYTHONPATH={CHECKOUT} exec {sys.executable} -m cudasplit {arguments}")


def _direct_script() -> str:
    """``/bin/sh`` builder; ``@src@`` is replaced by the store path in the expression."""
    return _python_call('split "@src@" --nix --nix-support --strict --default-rules -q '
                        '--report "$NIX_BUILD_TOP/report.json"')


def _hook_script(structured: bool) -> str:
    """``/bin/bash`` builder that sources the shipped setup hook, like stdenv would."""
    load_attrs = 'source "$NIX_ATTRS_SH_FILE"\n' if structured else ""
    return (f"set -euo pipefail\n{load_attrs}runHook() {{ :; }}\n"
            f"source {HOOK}\n"
            '[[ "$installPhase" == cudasplitInstallPhase ]]\n'
            "cudasplitInstallPhase\n")


def _outputs(stdout: str, names: tuple[str, ...] = OUTPUTS) -> dict[str, Path]:
    """``nix-build`` prints one path per output, in the derivation's order."""
    paths = stdout.split()
    assert len(paths) == len(names), stdout
    return dict(zip(names, map(Path, paths), strict=True))


CASES = {
    "plain-sh": dict(structured=False, hook=False),
    "structured-sh": dict(structured=True, hook=False),
    "plain-hook": dict(structured=False, hook=True),
    "structured-hook": dict(structured=True, hook=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_nix_build_splits_into_store_outputs(nix: Nix, nix_tarball: Path, case: str) -> None:
    structured, hook = CASES[case]["structured"], CASES[case]["hook"]
    extra: dict[str, object] = {"__structuredAttrs": True} if structured else {}
    if hook:
        extra.update(cudasplitCommand=f"{sys.executable} -m cudasplit",
                     PYTHONPATH=str(CHECKOUT),
                     cudasplitFlags=["--strict", "--default-rules", "-q"] if structured
                     else "--strict --default-rules -q")
        script, builder = _hook_script(structured), "/bin/bash"
        if structured:  # nothing is exported under structured attrs: the script does it
            script = f"export PYTHONPATH={CHECKOUT}\n" + script
    else:
        script, builder = _direct_script(), "/bin/sh"
    result = nix.build(f"cudasplit-test-{case}", script, src=nix_tarball, builder=builder,
                       extra=extra)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = _outputs(result.stdout)
    assert set(outputs) == set(OUTPUTS)
    _check_contents(outputs)
    _check_runpaths(outputs)
    _check_references(nix, outputs)


def _check_contents(o: dict[str, Path]) -> None:
    assert (o["lib"] / f"lib/libdemo.so.{VERSION}").is_file()
    assert os.readlink(o["lib"] / "lib/libdemo.so") == "libdemo.so.12"
    assert (o["include"] / "include/cuda_demo.h").is_file()
    assert (o["static"] / "lib/libdemo_static.a").is_file()
    assert (o["stubs"] / "lib/stubs/libcuda.so").is_file()
    assert (o["out"] / "LICENSE").is_file()
    # Links travel with their targets, as relative links: no output points into another.
    assert os.readlink(o["stubs"] / "lib/libcuda.so") == "stubs/libcuda.so"
    assert not os.path.lexists(o["lib"] / "lib/libcuda.so")
    assert os.readlink(o["static"] / LIB_TO_STATIC[0]) == LIB_TO_STATIC[1]
    assert os.readlink(o["lib"] / STATIC_TO_LIB[0]) == STATIC_TO_LIB[1]
    assert not os.path.lexists(o["lib"] / LIB_TO_STATIC[0])
    pc = (o["dev"] / "share/pkgconfig/demo-12.9.pc").read_text()
    assert f"libdir={o['lib']}/lib" in pc and f"includedir={o['include']}/include" in pc
    for path in o.values():
        assert (path / "nix-support/include-in-cudatoolkit-root").is_file()
    # out propagates include and lib, never static or stubs.
    propagated = (o["out"] / "nix-support/propagated-build-inputs").read_text().split()
    assert sorted(propagated) == sorted(str(o[n]) for n in ("include", "lib"))


def _check_runpaths(o: dict[str, Path]) -> None:
    for name in ("libdemo.so", "libdemoBlas.so", "libdemoRtc.so"):
        runpath = dynamic_entries(o["lib"] / f"lib/{name}.{VERSION}")["RUNPATH"][0].split(":")
        assert runpath[0] == "/run/opengl-driver/lib", runpath
        assert "$ORIGIN" in runpath
        assert not any("stubs" in entry or str(o["stubs"]) in entry for entry in runpath)
        assert all(e.startswith(("/run/", "$ORIGIN", str(o["lib"]))) for e in runpath if e)
    # The stub itself is not patched: it must never reach into the driver.
    assert "RUNPATH" not in dynamic_entries(o["stubs"] / "lib/stubs/libcuda.so")


def _check_references(nix: Nix, o: dict[str, Path]) -> None:
    lib_refs = nix.references(str(o["lib"]))
    assert str(o["static"]) not in lib_refs and str(o["stubs"]) not in lib_refs, lib_refs
    for name in ("static", "stubs", "include", "lib"):
        refs = set(nix.references(str(o[name]))) - {str(o[name])}
        assert not refs, f"{name} references {refs}"  # nothing may point back at out
    out_refs = set(nix.references(str(o["out"])))
    assert out_refs >= {str(o["include"]), str(o["lib"])}
    assert not out_refs & {str(o["static"]), str(o["stubs"])}


def test_cross_output_links_both_ways_are_a_nix_cycle(nix: Nix, nix_tarball: Path) -> None:
    """What a path-based split has to do to keep those links working, and why it cannot."""
    lib_link, lib_target = LIB_TO_STATIC
    static_link, static_target = STATIC_TO_LIB
    script = (
        '/bin/mkdir -p "$lib/lib" "$static/lib" "$out"\n'
        f'/bin/ln -s "$static/lib/{lib_target}" "$lib/{lib_link}"\n'
        f'/bin/ln -s "$lib/lib/{static_target}" "$static/{static_link}"\n'
    )
    naive = nix.build("cudasplit-test-naive", script, src=nix_tarball,
                      outputs=("out", "lib", "static"))
    assert naive.returncode != 0
    assert "cycle detected" in naive.stderr, naive.stderr[-2000:]
    # The same package split by cudasplit: each link lives with its target, no cycle.
    split = nix.build("cudasplit-test-links", _direct_script(), src=nix_tarball)
    assert split.returncode == 0, split.stderr[-3000:]
    outputs = _outputs(split.stdout)
    assert str(outputs["static"]) not in nix.references(str(outputs["lib"]))
    assert str(outputs["lib"]) not in nix.references(str(outputs["static"]))


def test_outputs_the_derivation_lacks_fall_back_to_out(nix: Nix, nix_tarball: Path) -> None:
    """cuDNN-style: no stubs/include/dev outputs; their content goes to out, and out (which
    propagates the others) is still referenced by none of them."""
    names = ("out", "lib", "static")
    result = nix.build("cudasplit-test-fallback", _direct_script(), src=nix_tarball,
                       outputs=names)
    assert result.returncode == 0, result.stderr[-3000:]
    o = _outputs(result.stdout, names)
    assert (o["out"] / "lib/stubs/libcuda.so").is_file()
    assert (o["out"] / "include/cuda_demo.h").is_file()
    assert (o["static"] / "lib/libdemo_static.a").is_file()
    for name in ("lib", "static"):
        assert str(o["out"]) not in nix.references(str(o[name]))


def test_setup_hook_command_prints_the_shipped_file() -> None:
    from click.testing import CliRunner

    from cudasplit.cli import main

    result = CliRunner().invoke(main, ["nix", "setup-hook"])
    assert result.exit_code == 0, result.output
    path = Path(result.stdout.strip())
    assert path.is_file() and path.samefile(HOOK)
    assert "cudasplitInstallPhase()" in path.read_text()
