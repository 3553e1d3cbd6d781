"""Real ``nix-build`` runs of package-table derivations (cudart, nvml_dev, cupti, libcublas).

Each package's member list (tests/data/trees/packages/) is built into a tarball and split by a
``builtins.derivation`` with exactly the outputs the package table declares (the harness of
tests/test_nix.py: no nixpkgs, sandbox off). Then:

* ``nix-store -q --references`` of ``out`` names no static or stubs output;
* a consumer linked with a RUNPATH entry naming the stubs dir gets the driver dir instead,
  through the ``nix-support/setup-hook`` the stubs output carries. Without nixpkgs there is no
  stdenv, so the consumer's builder does what stdenv does for a dependency: source its
  ``nix-support/setup-hook`` and run ``postFixupHooks`` after the build;
* ``pkg-config --libs nvidia-ml`` from the split nvml output links a program against the stub
  and puts the driver dir into its RUNPATH.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from cudasplit.rules import load_ruleset
from tests.nix import test_nix
from tests.nix.test_nix import CHECKOUT, Nix
from tests.support.builders import (
    dynamic_entries,
    have_compiler,
    tree_from_reference,
    write_tarball,
)
from tests.support.paths import DATA

# The session fixture ``nix`` of tests/test_nix.py (pytest names a fixture after the attribute).
nix = test_nix.nix

pytestmark = [pytest.mark.nix,
              pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")]

LISTS = DATA / "trees" / "packages"
DRIVER = "/run/opengl-driver/lib"
PACKAGES = ("cuda_cudart", "cuda_nvml_dev", "cuda_cupti", "libcublas")
OVERRIDDEN = {"cuda_cudart": ("out", "dev", "include", "lib", "static", "stubs")}


def _tarball(pname: str, tmp: Path) -> Path:
    top = tree_from_reference(LISTS / f"{pname}.txt", tmp / "tree")
    (tmp / "dist").mkdir()
    return write_tarball(top, tmp / "dist", "xz")


def _split_script(cuda: str) -> str:
    return (f"PYTHONPATH={CHECKOUT} exec {sys.executable} -m cudasplit split \"@src@\" --nix "
            f"--nix-support --cuda-version {cuda} -q --report \"$NIX_BUILD_TOP/report.json\"")


def _outputs_of(stdout: str, names: tuple[str, ...]) -> dict[str, Path]:
    paths = stdout.split()
    assert len(paths) == len(names), stdout
    return dict(zip(names, map(Path, paths), strict=True))


@pytest.fixture(scope="module")
def built(nix: Nix, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    result = {}
    for pname in PACKAGES:
        # cuda_cudart is single-output by default (as Nixpkgs); built here with its outputs
        # overridden, as Nixpkgs' redist-outputs.nix does, to test propagation and stubs.
        outputs = OVERRIDDEN.get(pname) or load_ruleset(pname).package.outputs
        assert outputs is not None
        src = _tarball(pname, tmp_path_factory.mktemp(pname))
        cuda = "12.8" if pname == "cuda_cupti" else "12.9"
        done = nix.build(f"cuda12.9-{pname}", _split_script(cuda), src=src, outputs=outputs)
        assert done.returncode == 0, done.stderr[-3000:]
        result[pname] = _outputs_of(done.stdout, outputs)
    return result


@pytest.mark.parametrize("pname", PACKAGES)
def test_out_references_no_static_or_stubs(nix: Nix, built: dict[str, dict[str, Path]],
                                           pname: str) -> None:
    o = built[pname]
    refs = set(nix.references(str(o["out"])))
    heavy = {str(o[n]) for n in ("static", "stubs") if n in o}
    assert not refs & heavy, f"out of {pname} references {refs & heavy}"
    for name in ("include", "lib"):
        if name in o:
            assert str(o[name]) in refs  # what consumers need is still propagated
    if "dev" in o and pname in ("cuda_cudart", "cuda_nvml_dev"):
        # The build-time interface (dev, which stdenv hands consumers) still brings the stubs.
        assert str(o["stubs"]) in (o["dev"] / "nix-support/propagated-build-inputs").read_text()


# The stubs built from the member lists define ref_add (tests/builders.py's library source).
CONSUMER_C = "int ref_add(int, int); int main(void) { return ref_add(1, 2) == 12345; }\n"


def test_consumer_of_stubs_gets_the_driver_dir(nix: Nix, built: dict[str, dict[str, Path]],
                                               tmp_path: Path) -> None:
    stubs = built["cuda_cudart"]["stubs"]
    hook = stubs / "nix-support/setup-hook"
    assert hook.is_file()
    src = tmp_path / "consumer.c"
    src.write_text(CONSUMER_C)
    gcc, patchelf = shutil.which("gcc"), shutil.which("patchelf")
    assert gcc and patchelf
    script = f"""
set -eu
export PATH=/usr/bin:/bin
postFixupHooks=()
source {hook}
mkdir -p "$out/bin"
{gcc} "@src@" -o "$out/bin/consumer" -L{stubs}/lib/stubs -lcuda \\
    -Wl,--enable-new-dtags,-rpath,{stubs}/lib/stubs -Wl,-rpath,/opt/keep
before="$({patchelf} --print-rpath "$out/bin/consumer")"
case "$before" in *"{stubs}/lib/stubs"*) ;; *) echo "link did not record the stubs dir" >&2; exit 1;; esac
for hook in "${{postFixupHooks[@]}}"; do "$hook"; done
"""
    done = nix.build("cuda-consumer", script, src=src, builder="/bin/bash", outputs=("out",))
    assert done.returncode == 0, done.stderr[-3000:]
    binary = Path(done.stdout.split()[0]) / "bin/consumer"
    runpath = dynamic_entries(binary)["RUNPATH"][0].split(":")
    assert runpath == [DRIVER, "/opt/keep"], runpath
    assert str(stubs) not in nix.references(str(binary.parent.parent))


NVML_C = CONSUMER_C


def test_pkg_config_nvidia_ml_links_the_stub_with_the_driver_rpath(
        nix: Nix, built: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    nvml = built["cuda_nvml_dev"]
    src = tmp_path / "nvml.c"
    src.write_text(NVML_C)
    gcc, pkg_config = shutil.which("gcc"), shutil.which("pkg-config")
    if pkg_config is None:
        pytest.skip("pkg-config not installed")
    script = f"""
set -eu
export PATH=/usr/bin:/bin
export PKG_CONFIG_PATH={nvml['dev']}/share/pkgconfig
flags="$({pkg_config} --libs --cflags nvidia-ml)"
mkdir -p "$out/bin"
echo "$flags" > "$out/flags"
{gcc} "@src@" -o "$out/bin/nvml" $flags
"""
    done = nix.build("nvml-consumer", script, src=src, builder="/bin/bash", outputs=("out",))
    assert done.returncode == 0, done.stderr[-3000:]
    out = Path(done.stdout.split()[0])
    flags = (out / "flags").read_text()
    assert f"-L{nvml['stubs']}/lib/stubs" in flags and f"-Wl,-rpath,{DRIVER}" in flags, flags
    entries = dynamic_entries(out / "bin/nvml")
    assert "libnvidia-ml.so.1" in entries["NEEDED"]
    assert DRIVER in (entries.get("RUNPATH") or entries.get("RPATH"))[0].split(":")
