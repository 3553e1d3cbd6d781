"""``cudasplit nixify`` on two releases built from real NVIDIA wheels (12.9 and 13.0).

The generated files must parse, evaluate against a stub ``callPackage`` (no nixpkgs here), and
say what the package table and the soname graph say: each package's ``outputs`` and its
``buildInputs``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import inspect
from cudasplit._release.nixify import (
    EXTERNAL_PROVIDERS,
    nixify,
    package_roots,
    plan_release,
    render_package,
    table_needs,
)
from cudasplit._release.sonames import PackageLinks, provider_index, scan_elf_dir
from cudasplit._rulebook import Where, load_ruleset
from cudasplit.cli import main
from cudasplit.releases import load_manifest
from tests.nix.nixtools import need_nix
from tests.support.releases import Release, release

pytestmark = pytest.mark.slow

# No nixpkgs: just enough of lib/stdenv/fetchurl for the expressions to evaluate. mkDerivation
# returns its attributes, so the test reads outputs and buildInputs straight back.
STUB = r"""
{ dir, system }:
let
  stubs = {
    lib = {
      licenses.nvidiaCudaRedist = "nvidiaCudaRedist";
      sourceTypes.binaryNativeCode = "binaryNativeCode";
      getLib = p: p.pname;
      getOutput = o: p: "${p.pname}.${o}";
      makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${p.pname}/lib") ps);
    };
    stdenv = { mkDerivation = a: a; hostPlatform.system = system;
               cc.cc.lib = { pname = "gcc-lib"; }; };
    stdenvNoCC = { mkDerivation = a: a; hostPlatform.system = system; };
    fetchurl = a: a;
    cudasplit = { pname = "cudasplit"; };
    zlib = { pname = "zlib"; };
  };
  callPackage = f: extra:
    let fn = import f;
    in fn (builtins.intersectAttrs (builtins.functionArgs fn) (stubs // self)) // extra;
  self = import (dir + "/default.nix") { inherit callPackage; };
in
builtins.mapAttrs (name: d: {
  inherit (d) pname version outputs cudasplitStrict;
  buildInputs = map (p: p.pname) d.buildInputs;
  libraryPath = d.cudasplitLibraryPath or "";
  url = d.src.url;
  sha256 = d.src.sha256;
  platforms = d.meta.platforms;
}) self
"""


def _need_nix() -> None:
    need_nix()


def _evaluate(directory: Path, tmp_path: Path) -> dict[str, dict[str, object]]:
    stub = tmp_path / "stub.nix"
    stub.write_text(STUB)
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", str(stub),
         "--arg", "dir", str(directory), "--argstr", "system", "x86_64-linux"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, dict[str, object]] = json.loads(done.stdout)
    return result


def _expected_inputs(rel: Release) -> dict[str, set[str]]:
    """The soname graph, computed here from the unpacked wheels (not the tarballs nixify read)
    without nixify's planning code."""
    links = [PackageLinks(p, scan_elf_dir(rel.roots[p])) for p in rel.versions]
    index = provider_index(links)
    expected: dict[str, set[str]] = {}
    stub_names = {"stdenv.cc.cc.lib": "gcc-lib", "zlib": "zlib"}
    for package in links:
        providers = {o for name in package.needed for o in index.get(name, ())}
        providers |= {stub_names[EXTERNAL_PROVIDERS[n]] for n in package.needed
                      if n in EXTERNAL_PROVIDERS and n not in index}
        where = Where(rel.versions[package.package], rel.label.rsplit(".", 1)[0])
        table = set(table_needs(load_ruleset(package.package).package, where))
        expected[package.package] = (providers | (table & set(rel.versions))) \
            - {package.package}
    return expected


@pytest.fixture(scope="module", params=["12.9.1", "13.0.2"])
def generated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Release, Path]:
    rel = release(request.param)
    out = tmp_path_factory.mktemp(f"nixify-{request.param}")
    result = CliRunner().invoke(main, ["nixify", str(rel.manifest), "--tarballs",
                                       str(rel.tarballs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return rel, out


def test_every_file_parses(generated: tuple[Release, Path]) -> None:
    _need_nix()
    rel, out = generated
    files = sorted(out.glob("*.nix"))
    assert {f.stem for f in files} == {*rel.versions, "default"}
    assert len(rel.versions) >= 8
    for path in files:
        done = subprocess.run(["nix-instantiate", "--parse", str(path)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"{path.name}: {done.stderr[-1500:]}"


def test_outputs_and_build_inputs_match_table_and_soname_graph(
        generated: tuple[Release, Path], tmp_path: Path) -> None:
    _need_nix()
    rel, out = generated
    evaluated = _evaluate(out, tmp_path)
    manifest = json.loads(rel.manifest.read_text())
    expected_inputs = _expected_inputs(rel)
    assert set(evaluated) == set(rel.versions)
    for pname, attrs in evaluated.items():
        declared = load_ruleset(pname).package.outputs
        outputs = attrs["outputs"]
        assert isinstance(outputs, list) and outputs[0] == "out"
        # The table's outputs, less those this tarball leaves empty (the wheels lack static
        # archives and stubs): exactly the non-empty outputs `cudasplit inspect` reports.
        if declared is not None:
            assert set(outputs) <= {"out", *declared}, pname
        report = inspect(rel.tarball(pname))
        assert set(outputs) == {"out"} | {o for o, r in report.outputs.items() if r.files}
        assert set(attrs["buildInputs"]) == expected_inputs[pname], pname  # type: ignore[arg-type]
        entry = manifest[pname]["linux-x86_64"]
        assert attrs["sha256"] == entry["sha256"]
        assert str(attrs["url"]).endswith("/" + entry["relative_path"])
        assert attrs["version"] == manifest[pname]["version"]
        assert attrs["platforms"] == ["x86_64-linux"]
        assert attrs["cudasplitStrict"] is True


def _table_or(pname: str, computed: list[str]) -> list[str]:
    """``computed`` limited to the package table's outputs where it declares them."""
    declared = load_ruleset(pname).package.outputs
    if declared is None:
        return computed
    return [o for o in computed if o == "out" or o in declared]


def test_known_outputs_and_edges(generated: tuple[Release, Path], tmp_path: Path) -> None:
    """Facts of the real bytes, written down: they catch a classifier or graph that drifts.
    Where the package table declares outputs those win (the release-parity tables do)."""
    _need_nix()
    rel, out = generated
    evaluated = _evaluate(out, tmp_path)
    assert evaluated["cuda_nvcc"]["outputs"] == ["out"]  # single output by the table
    # The runtime wheel ships libcudart_static.a but no stubs: no stubs output.
    assert evaluated["cuda_cudart"]["outputs"] == ["out"]  # single output, as Nixpkgs
    assert "lib" not in evaluated["cuda_cccl"]["outputs"]  # type: ignore[operator]
    if rel.label.startswith("12."):
        # libcusparse.so.12 NEEDs libnvJitLink.so.12.
        # ... and libgcc_s.so.1, which Nixpkgs provides as stdenv.cc.cc.lib.
        assert evaluated["libcusparse"]["buildInputs"] == ["libnvjitlink", "gcc-lib"]
        assert evaluated["libcusparse"]["libraryPath"] == "libnvjitlink/lib:gcc-lib/lib"
    else:
        assert evaluated["cuda_crt"]["outputs"] == _table_or("cuda_crt", ["out", "include"])
        assert evaluated["libnvvm"]["outputs"] == _table_or("libnvvm", ["out", "include", "lib"])


def test_output_is_stable(tmp_path: Path) -> None:
    """Byte-identical on a second run: a release bump shows up as a readable diff. (13.0 only:
    12.9 costs a second full read of 1.1 GB for the same code path.)"""
    rel = release("13.0.2")
    first = nixify(load_manifest(rel.manifest), rel.tarballs, tmp_path / "first")
    again = nixify(load_manifest(rel.manifest), rel.tarballs, tmp_path / "again")
    assert first.files == again.files
    for name in again.files:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "first" / name).read_bytes()


def test_table_runtime_dependency_becomes_input_and_package_root(tmp_path: Path) -> None:
    """libcublas' table appends @cuda_nvrtc@/lib (cuBLASLt dlopens NVRTC): nixify makes
    cuda_nvrtc a buildInput and passes --package-root for it."""
    rel = release("12.9.1")
    manifest = json.loads(rel.manifest.read_text())
    # cuda_nvrtc's tarball, renamed to libcublas: a stand-in with real ELF members.
    manifest["libcublas"] = {**manifest["cuda_nvrtc"], "version": "12.9.1.4"}
    path = tmp_path / "redistrib.json"
    path.write_text(json.dumps(manifest))
    plans = {p.pname: p for p in plan_release(load_manifest(path), rel.tarballs,
                                              packages=["libcublas", "cuda_nvrtc"])}
    plan = plans["libcublas"]
    assert plan.build_inputs == ("cuda_nvrtc",)
    text = render_package(plan, "redistrib.json")
    assert '"cuda_nvrtc=${lib.getLib cuda_nvrtc}"' in text
    assert "cuda_nvrtc # package table: dlopen" in text
    assert 'cudasplitCudaVersion = "12.9";' in text


def test_missing_tarballs_are_an_error(tmp_path: Path) -> None:
    rel = release("13.0.2")
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["nixify", str(rel.manifest), "--tarballs",
                                       str(tmp_path / "empty"), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "none of its tarballs" in result.output


def test_dlopen_targets_become_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where dlopen detection is present, a dlopen target provided by another package of the
    release is a buildInput, marked as such. The detector is stood in for here (it is another
    module's work); the rest is the real path on real bytes."""
    import cudasplit._release.sonames as sonames

    def fake(file: str, info: object) -> tuple[str, ...]:
        soname = getattr(info, "soname", None) or ""
        return ("libcuda.so.1", "libnvJitLink.so.12") if soname.startswith("libcupti") else ()

    monkeypatch.setattr(sonames, "_dlopen_names", fake)
    rel = release("12.9.1")
    plans = {p.pname: p for p in plan_release(load_manifest(rel.manifest), rel.tarballs,
                                              packages=["cuda_cupti", "libnvjitlink"])}
    plan = plans["cuda_cupti"]
    assert plan.build_inputs == ("libnvjitlink",)
    assert plan.dlopened == ("libnvJitLink.so.12",)
    assert "libcuda.so.1" not in plan.unresolved  # the driver's: never a buildInput
    assert "libnvjitlink # dlopen \"libnvJitLink.so.12\"" in render_package(plan, "r.json")


def test_two_platforms_and_a_missing_one(tmp_path: Path) -> None:
    """Per-platform outputs and sources; a platform without a tarball is reported, not
    guessed. (The sbsa tarball is the x86_64 bytes under NVIDIA's sbsa name: only the
    planning and rendering are under test here.)"""
    _need_nix()
    rel = release("13.0.2")
    manifest = json.loads(rel.manifest.read_text())
    entry = manifest["cuda_crt"]
    x86 = entry["linux-x86_64"]
    sbsa_name = Path(x86["relative_path"]).name.replace("linux-x86_64", "linux-sbsa")
    tarballs = tmp_path / "tarballs"
    tarballs.mkdir()
    os.symlink(rel.tarball("cuda_crt"), tarballs / Path(x86["relative_path"]).name)
    os.symlink(rel.tarball("cuda_crt"), tarballs / sbsa_name)
    entry["linux-sbsa"] = {**x86, "relative_path": f"cuda_crt/linux-sbsa/{sbsa_name}"}
    entry["linux-ppc64le"] = {**x86, "relative_path": "cuda_crt/linux-ppc64le/none.tar"}
    path = tmp_path / "redistrib_13.0.2.json"
    path.write_text(json.dumps({k: v for k, v in manifest.items()
                                if k == "cuda_crt" or not isinstance(v, dict)}))
    result = CliRunner().invoke(main, ["nixify", str(path), "--tarballs", str(tarballs),
                                       "-o", str(tmp_path / "nix")])
    assert result.exit_code == 0, result.output
    assert "no tarball for: linux-ppc64le" in result.output
    text = (tmp_path / "nix" / "cuda_crt.nix").read_text()
    assert 'aarch64-linux = "linux-sbsa";' in text and 'x86_64-linux = "linux-x86_64";' in text
    assert 'platforms = [ "aarch64-linux" "x86_64-linux" ];' in text
    # Its noexcept edits are gated on the glibc the headers meet: stdenv's, as X.Y.
    assert "cudasplitGlibcVersion =" in text and "lib.versions.majorMinor libc.version" in text
    for system in ("x86_64-linux", "aarch64-linux"):
        stub = tmp_path / "stub.nix"
        stub.write_text(STUB)
        done = subprocess.run(
            ["nix-instantiate", "--eval", "--strict", "--json", str(stub), "--arg", "dir",
             str(tmp_path / "nix"), "--argstr", "system", system],
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-1500:]
        got = json.loads(done.stdout)["cuda_crt"]
        assert got["outputs"] == _table_or("cuda_crt", ["out", "include"])
        assert ("linux-sbsa" in got["url"]) == (system == "aarch64-linux")


def test_table_needs_gates_and_package_roots() -> None:
    """Every package the table names becomes an input, gated entries only where they apply,
    and each gets the --package-root key the split looks up (nvcc: PNAME.OUTPUT)."""
    nvcc = load_ruleset("cuda_nvcc").package
    on_13, on_12 = table_needs(nvcc, Where("13.0.88", "13.0")), \
        table_needs(nvcc, Where("12.9.86", "12.9"))
    assert on_13 == {"cuda_cccl": "nvcc_includes", "cuda_crt": "nvcc_includes",
                     "cuda_cudart": "nvcc_includes", "libnvvm": "copy_packages"}
    assert "libnvvm" not in on_12  # copied into nvvm/ from CUDA 13.0 on
    roots = dict(package_roots(nvcc, on_13))
    assert roots["cuda_cccl.include"] == \
        'lib.getOutput "include" (cuda_cccl.__spliced.targetTarget or cuda_cccl)'
    assert roots["cuda_cudart.lib"] == \
        "lib.getLib (cuda_cudart.__spliced.targetTarget or cuda_cudart)"
    assert roots["libnvvm.out"] == 'lib.getOutput "out" libnvvm'
    cublas = load_ruleset("libcublas").package
    assert table_needs(cublas, Where("12.9.1.4", "12.9")) == {"cuda_nvrtc": "dlopen"}
    assert table_needs(cublas, Where("12.6.4.1", "12.6")) == {}  # dlopen gated since 12.8

def test_stubs_and_driver_names_provide_nothing() -> None:
    """cuda_cudart's lib/stubs/libcuda.so (SONAME libcuda.so.1) must not make every package
    that needs or dlopens the driver depend on cuda_cudart; a real library still counts."""
    from cudasplit._release.sonames import ElfNames, dependencies

    cudart = PackageLinks("cuda_cudart", (
        ElfNames("lib/libcudart.so.12", "libcudart.so.12", ()),
        ElfNames("lib/stubs/libcuda.so", "libcuda.so.1", ()),
    ))
    user = PackageLinks("libcufft", (ElfNames(
        "lib/libcufft.so.11", "libcufft.so.11", ("libcuda.so.1", "libcudart.so.12", "libc.so.6"),
        ("libcuda.so.1", "libnvidia-ml.so.1")),))
    assert "libcuda.so.1" not in cudart.sonames
    deps, unresolved = dependencies(user, provider_index([cudart, user]))
    assert deps == {"cuda_cudart": ("libcudart.so.12",)}
    assert unresolved == ("libc.so.6",)  # the driver's names are neither inputs nor unresolved


# A real nix-build of generated expressions: stdenv.mkDerivation is a builtins.derivation whose
# bash builder loads the structured attrs and runs the shipped setup hook, as stdenv would.
BUILD_STUB = r"""
{ dir, tarballs, python, checkout, hook, nonce, ccLib }:
let
  lib = {
    licenses.nvidiaCudaRedist = "nvidiaCudaRedist";
    sourceTypes.binaryNativeCode = "binaryNativeCode";
    getLib = p: p.lib or p.out;
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getLib p}/lib") ps);
  };
  script = ''
    set -euo pipefail
    source "$NIX_ATTRS_SH_FILE"
    export PYTHONPATH
    runHook() { :; }
    source ${hook}
    [[ "$installPhase" == cudasplitInstallPhase ]]
    cudasplitInstallPhase
  '';
  stdenv = {
    hostPlatform.system = "x86_64-linux";
    cc.cc.lib = { lib = ccLib; };  # the host's libgcc_s/libstdc++ (no nixpkgs here)
    mkDerivation = a: builtins.derivation (removeAttrs a [ "meta" "nativeBuildInputs" ] // {
      name = "${a.pname}-${a.version}";
      system = builtins.currentSystem;
      builder = "/bin/bash";
      args = [ "-c" script ];
      cudasplitCommand = "${python} -m cudasplit";
      PYTHONPATH = checkout;
      inherit nonce;
    });
  };
  fetchurl = a: builtins.path { path = tarballs + "/${baseNameOf a.url}"; };
  stubs = { inherit lib stdenv fetchurl; stdenvNoCC = stdenv; cudasplit = ""; };
  callPackage = f: extra:
    let fn = import f;
    in fn (builtins.intersectAttrs (builtins.functionArgs fn) (stubs // self)) // extra;
  self = import (dir + "/default.nix") { inherit callPackage; };
in
self
"""


@pytest.mark.nix
def test_generated_expressions_build_with_the_setup_hook(tmp_path: Path) -> None:
    """libcusparse.nix from the 12.9 release, built for real: its buildInput libnvjitlink is
    built first, cudasplitLibraryPath resolves libnvJitLink.so.12 under --strict, and the
    store references show libcusparse's lib pointing at libnvjitlink's lib (its RUNPATH)."""
    import sys
    import uuid

    from cudasplit._release.closure import closure_of_roots
    from tests.nix.test_nix import CHECKOUT, HOOK, STORE_PATH, Nix, nix  # noqa: F401

    _need_nix()
    rel = release("12.9.1")
    out = tmp_path / "nix"
    nixify(load_manifest(rel.manifest), rel.tarballs, out, packages=["libcusparse",
                                                                     "libnvjitlink"])
    stub = tmp_path / "build.nix"
    stub.write_text(BUILD_STUB)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "nix.conf").write_text("sandbox = false\nbuild-users-group =\nsubstituters =\n")
    env = {**os.environ, "NIX_CONF_DIR": str(conf)}
    args = ["--arg", "dir", str(out), "--arg", "tarballs", str(rel.tarballs),
            "--argstr", "python", sys.executable, "--argstr", "checkout", str(CHECKOUT),
            "--argstr", "hook", str(HOOK), "--argstr", "nonce", uuid.uuid4().hex,
            "--argstr", "ccLib", str(_host_gcc_lib(tmp_path))]
    handle = Nix(env, tmp_path, "")
    try:
        names = json.loads(subprocess.run(
            ["nix-instantiate", "--eval", "--json", str(stub), *args, "-A",
             "libcusparse.outputs"], env=env, capture_output=True, text=True, check=True
        ).stdout)
        built = subprocess.run(["nix-build", str(stub), *args, "-A", "libcusparse",
                                "--no-out-link"], env=env, capture_output=True, text=True,
                               timeout=600)
        handle.created.update(STORE_PATH.findall(built.stdout + built.stderr))
        assert built.returncode == 0, built.stderr[-3000:]
        paths = {}
        for name in names:
            found = subprocess.run(["nix-build", str(stub), *args, "-A", f"libcusparse.{name}",
                                    "--no-out-link"], env=env, capture_output=True, text=True,
                                   check=True).stdout.split()
            handle.created.update(found)
            paths[name] = found[-1]
        lib_refs = handle.references(paths["lib"])
        assert any(p.endswith("-libnvjitlink-12.9.86-lib") for p in lib_refs), lib_refs
        report = closure_of_roots(paths)
        assert report.warnings == ()
        assert report.referenced("lib") == set()
        # The closure report sees the same store references as Nix, the dependency included.
        for name, path in paths.items():
            ours = {paths[t] for t in report.referenced(name)} | set(report.external[name])
            assert ours == set(handle.references(path)) - {path}, name
        assert any(p.endswith("-libnvjitlink-12.9.86-lib") for p in report.external["lib"])
    finally:
        handle.cleanup()


def _host_gcc_lib(tmp_path: Path) -> Path:
    """``<dir>/lib`` holding links to this machine's libgcc_s and libstdc++ (what
    ``stdenv.cc.cc.lib`` is in Nixpkgs)."""
    root = tmp_path / "gcc-lib"
    (root / "lib").mkdir(parents=True)
    for name in ("libgcc_s.so.1", "libstdc++.so.6"):
        found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                               text=True, check=True).stdout.strip()
        os.symlink(os.path.realpath(found), root / "lib" / name)
    return root
