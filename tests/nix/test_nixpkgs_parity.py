"""The eight sets ``nixify-sets`` writes in one run from Nixpkgs' manifests, held package by
package against what Nixpkgs' ``buildRedist`` makes of the same manifests
(tests/data/nixpkgs-buildredist.toml: the reference, written from reading Nixpkgs' files).

For every set (12.6, 12.8, 12.9, 13.0-13.4) and three builds (x86_64-linux, aarch64-linux
sbsa, aarch64-linux Jetson Orin) the set is evaluated (tests/data/nix/sets-standin.nix; with the
real Nixpkgs lib too where ``CUDASPLIT_NIXPKGS_LIB`` names one) and each package's name,
version, outputs, passthru (its keys; supportedReleases/-Systems, the output tables, the
assertions' messages, the manifest entry), meta (licence, platforms, badPlatforms,
sourceProvenance, broken and problems under each config) compared with the reference, computed
here from the manifests' JSON as Nixpkgs computes it. Every difference must be a row of
docs/reference/nixpkgs-parity.md's table (its package and aspect), and every row must still
be a difference somewhere: the page and the sets cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from cudasplit.nixify import nixify_sets
from tests.nix.nixtools import need_nix
from tests.support.paths import DATA, REPO

REFERENCE = tomllib.loads((DATA / "nixpkgs-buildredist.toml").read_text())
PAGE = REPO / "docs" / "reference" / "nixpkgs-parity.md"
MANIFEST_DIR = DATA / "manifests"
SET_NAMES = sorted(REFERENCE["sets"], key=lambda s: [int(p) for p in s.split("_")[1:]])
# build -> (Nix system, cudaCapabilities): a desktop GPU, a Grace Hopper server, Jetson Orin.
BUILDS = {"x86_64": ("x86_64-linux", ("8.9",)), "sbsa": ("aarch64-linux", ("9.0",)),
          "jetson": ("aarch64-linux", ("8.7",))}
PIN_CLASS = {"x86_64": "x86_64", "sbsa": "aarch64", "jetson": "jetson"}
UNSUPPORTED = "0-unsupported"


def _inputs() -> list[Path]:
    """Every manifest Nixpkgs' eight sets take that is here (cuSPARSELt 0.7.1 is not)."""
    wanted = {f"redistrib_{s['cuda']}.json" for s in REFERENCE["sets"].values()}
    for row in REFERENCE["sets"].values():
        for build in ("all", "jetson", "aarch64", "x86_64"):
            wanted |= {f"{p}_redistrib_{v}.json" for p, v in row.get(build, {}).items()}
    wanted |= {f"{p}_redistrib_{v}.json" for p, v in REFERENCE["every_set"].items()}
    return sorted(MANIFEST_DIR / n for n in wanted if (MANIFEST_DIR / n).is_file())


@pytest.fixture(scope="module")
def sets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eight")
    result = nixify_sets(_inputs(), out)
    assert [s.name for s in result.sets] == SET_NAMES  # one run, eight sets
    return out


def _real_lib() -> str | None:
    found = os.environ.get("CUDASPLIT_NIXPKGS_LIB", "")
    return found if found and (Path(found) / "default.nix").is_file() else None


@cache
def _eval(sets_dir: Path, set_name: str, build: str, lib: str | None = None,
          cuda_support: bool = True, compat: bool = False) -> dict[str, dict[str, Any]]:
    need_nix()
    system, caps = BUILDS[build]
    cmd = ["nix-instantiate", "--eval", "--strict", "--json",
           str(DATA / "nix" / "sets-standin.nix"), "--arg", "dir", str(sets_dir),
           "--argstr", "system", system, "--argstr", "setName", set_name,
           "--arg", "caps", "[ " + " ".join(f'"{c}"' for c in caps) + " ]",
           "--arg", "cudaSupport", "true" if cuda_support else "false",
           "--arg", "enableCompat", "true" if compat else "false"]
    if lib is not None:
        cmd += ["--arg", "realLib", lib]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


# -- the reference, computed from the manifests' JSON as buildRedist does ----------------------


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _at_least(version: str, floor: str) -> bool:
    return _version_key(version) >= _version_key(floor)


@cache
def _manifest(product: str, version: str) -> dict[str, Any] | None:
    name = f"redistrib_{version}.json" if product == "cuda" else \
        f"{product}_redistrib_{version}.json"
    path = MANIFEST_DIR / name
    return json.loads(path.read_text()) if path.is_file() else None


def _taken(set_name: str, build: str, product: str) -> str | None:
    row = REFERENCE["sets"][set_name]
    if product == "cuda":
        return str(row["cuda"])
    for key in (PIN_CLASS[build], "all"):
        if product in row.get(key, {}):
            return str(row[key][product])
    found = REFERENCE["every_set"].get(product)
    return None if found is None else str(found)


def _redist_system(set_name: str, build: str) -> str:
    system, caps = BUILDS[build]
    if system == "x86_64-linux":
        return "linux-x86_64"
    threshold = "10.1" if set_name < "cudaPackages_13" else "8.7"
    jetson = [c for c in caps if c in ("5.3", "6.2", "7.2", "8.7", "8.8", "10.1", "11.0")]
    return "linux-sbsa" if all(_at_least(c, threshold) for c in jetson) else "linux-aarch64"


def _supported(release: Mapping[str, Any] | None, cuda: str) -> dict[str, Any]:
    """getSupportedReleases: source, else linux-all, else each platform object (its cuda<X.Y>,
    else cuda<X> entry where the package has cuda_variant)."""
    if release is None:
        return {}
    for only in ("source", "linux-all"):
        if only in release:
            return {only: release[only]}
    variants = [f"cuda{cuda}", f"cuda{cuda.split('.')[0]}"]
    found = {}
    for name, value in release.items():
        if not isinstance(value, dict):
            continue
        variant = next((v for v in variants if v in value), None)
        if "cuda_variant" in release and variant is None:
            continue
        found[name] = value[variant] if variant else value
    return found


def _nix_systems(redist_systems: list[str]) -> list[str]:
    systems = {"linux-x86_64": ["x86_64-linux"], "linux-sbsa": ["aarch64-linux"],
               "linux-aarch64": ["aarch64-linux"], "linux-all": ["aarch64-linux", "x86_64-linux"],
               "source": ["aarch64-linux", "x86_64-linux"]}
    return sorted({s for r in redist_systems for s in systems.get(r, [])})


def _declared(spec: Mapping[str, Any], version: str, redist: str) -> list[str]:
    outputs = list(spec["outputs"])
    for when in spec.get("output_when", []):
        if redist not in when.get("systems", [redist]):
            continue
        if "since" in when and not _at_least(version, when["since"]):
            continue
        if "before" in when and _at_least(version, when["before"]):
            continue
        outputs.append(when["output"])
    return outputs


def _capabilities_hold(spec: Mapping[str, Any], version: str, build: str, redist: str,
                       cuda: str) -> bool:
    caps = BUILDS[build][1]
    jetson = {"5.3", "6.2", "7.2", "8.7", "8.8", "10.1", "11.0"}
    for rule in spec.get("capabilities", []):
        if version == UNSUPPORTED and "since" in rule:
            continue
        if "since" in rule and not _at_least(version, rule["since"]):
            continue
        held = (("only" not in rule or all(c in rule["only"] for c in caps))
                and ("min" not in rule or all(_at_least(c, rule["min"]) for c in caps))
                and ("l4t_only" not in rule or redist != "linux-aarch64"
                     or list(caps) == rule["l4t_only"])
                and ("l4t_cuda_min" not in rule or redist != "linux-aarch64"
                     or _at_least(cuda, rule["l4t_cuda_min"]))
                and ("no_jetson" not in rule or not jetson & set(caps)))
        if not held:
            return False
    return True


def expected(set_name: str, build: str, cuda_support: bool = True,
             compat: bool = False) -> dict[str, dict[str, Any]]:
    """Each Nixpkgs package of the set for this build, as buildRedist makes it."""
    cuda = set_name.removeprefix("cudaPackages_").replace("_", ".")
    redist = _redist_system(set_name, build)
    out: dict[str, dict[str, Any]] = {}
    for attr, spec in REFERENCE["packages"].items():
        version_taken = _taken(set_name, build, spec["redist"])
        manifest = _manifest(spec["redist"], version_taken) if version_taken else {}
        pname = next((n for since, n in spec.get("pname_before", {}).items()
                      if not _at_least(cuda, since)), attr)
        if manifest is None:  # a pinned manifest this repository does not hold
            out[attr] = {"missing_manifest": f"{spec['redist']} {version_taken}"}
            continue
        key = next((n for since, n in spec.get("release_before", {}).items()
                    if not _at_least(cuda, since)), pname)
        release = manifest.get(key)
        supported = _supported(release, cuda)
        preferred = supported.get("source") or supported.get("linux-all") or supported.get(redist)
        version = release["version"] if release else UNSUPPORTED
        declared = _declared(spec, version, redist)
        outputs = ["out"] if preferred is None else [
            o for o in REFERENCE["build_redist"]["expected_outputs"] if o in declared]
        redist_systems = sorted(supported)
        is_supported = any(r in (redist, "linux-all", "source") for r in redist_systems)
        platform_ok = is_supported and _capabilities_hold(spec, version, build, redist, cuda)
        problems = ([spec["problem"]] if "problem" in spec and not compat else [])
        out[attr] = {
            "pname": pname, "version": version, "drvName": f"cuda{cuda}-{pname}-{version}",
            "outputs": outputs, "redistName": spec["redist"],
            "supportedRedistSystems": redist_systems,
            "supportedNixSystems": _nix_systems(redist_systems),
            "platforms": _nix_systems(redist_systems),
            "broken": bool(spec.get("broken")) or not cuda_support,
            "badPlatforms": [] if platform_ok else [BUILDS[build][0]],
            "problemNames": problems,
            "licenses": [spec.get("license", REFERENCE["build_redist"]["default_license"])],
            "vulnerable": (version != UNSUPPORTED and "vulnerable_before" in spec
                           and not _at_least(version, spec["vulnerable_before"])),
            "platformMessages": [
                REFERENCE["build_redist"]["platform_assertions"][0],
                REFERENCE["build_redist"]["platform_assertions"][1].format(
                    redist=redist, supported=json.dumps(redist_systems,
                                                        separators=(",", ":")))],
            "release": release}
    return out


# -- comparing --------------------------------------------------------------------------------


def _release_differs(ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> bool:
    if ours is None or theirs is None:
        return (ours is None) != (theirs is None)
    for key in ("name", "version", "license", "license_path", "cuda_variant"):
        if ours.get(key) != theirs.get(key):
            return True
    return any(ours.get(p) != theirs.get(p) for p in theirs
               if p.startswith("linux-") and isinstance(theirs[p], dict))


def differences(got: Mapping[str, Mapping[str, Any]],
                want: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, str]]:
    """(package, aspect) for each way ``got`` (one set and build, evaluated) differs from
    ``want`` (the reference)."""
    build_redist = REFERENCE["build_redist"]
    for attr in sorted(set(got) | set(want)):
        if attr not in got or attr not in want:
            yield attr, "name"
            continue
        mine, theirs = got[attr], want[attr]
        if "missing_manifest" in theirs:
            yield attr, "manifest"
            continue
        for aspect in ("pname", "version", "drvName", "outputs", "redistName", "platforms",
                       "supportedRedistSystems", "supportedNixSystems", "broken",
                       "badPlatforms", "problemNames", "licenses", "platformMessages"):
            have = mine[aspect][:2] if aspect == "platformMessages" else mine[aspect]
            if have != theirs[aspect]:
                yield attr, aspect
        if bool(mine["knownVulnerabilities"]) != theirs["vulnerable"]:
            yield attr, "knownVulnerabilities"
        if _release_differs(mine["release"], theirs["release"]):
            yield attr, "release"
        if sorted(mine["passthruKeys"]) != sorted(build_redist["passthru"]):
            yield attr, "passthru"
        if mine["brokenMessages"][:5] != build_redist["broken_assertions"]:
            yield attr, "brokenAssertions"
        for key in sorted(set(build_redist["meta"]) - set(mine["metaKeys"])):
            yield attr, f"meta.{key}"
        if (mine["expectedOutputs"] != build_redist["expected_outputs"]
                or mine["outputToPatterns"] != build_redist["output_to_patterns"]
                or mine["outputNameVarFallbacks"] != build_redist["output_name_var_fallbacks"]):
            yield attr, "outputTables"
        if mine["sourceProvenance"] != ["binaryNativeCode"] or \
                mine["longDescription"] != build_redist["long_description"]:
            yield attr, "meta"


def documented() -> set[tuple[str, str]]:
    """(package, aspect) of every row of the page's table of differences."""
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", PAGE.read_text(), re.M)
    return set(rows)


def _is_documented(diff: tuple[str, str], rows: set[tuple[str, str]]) -> bool:
    return diff in rows or ("*", diff[1]) in rows


def _all_differences(sets_dir: Path, lib: str | None) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for set_name in SET_NAMES:
        for build in BUILDS:
            got = _eval(sets_dir, set_name, build, lib)
            for diff in differences(got, expected(set_name, build)):
                found.setdefault(diff, set()).add(f"{set_name}/{build}")
    return found


@pytest.mark.parametrize("lib", ["stand-in", "real"])
def test_every_set_and_build_equals_nixpkgs_or_the_difference_is_documented(
        sets_dir: Path, lib: str) -> None:
    real = _real_lib()
    if lib == "real" and real is None:
        pytest.skip("the real Nixpkgs lib is not here (set CUDASPLIT_NIXPKGS_LIB=DIR to a copy "
                    "of nixpkgs.lib's lib/)")
    found = _all_differences(sets_dir, real if lib == "real" else None)
    rows = documented()
    undocumented = {d: sorted(w)[:3] for d, w in found.items() if not _is_documented(d, rows)}
    assert not undocumented, undocumented
    stale = {r for r in rows if r[0] != "*" and r not in found} | {
        r for r in rows if r[0] == "*" and not any(d[1] == r[1] for d in found)}
    assert not stale, f"rows of {PAGE.name} that are no longer a difference: {sorted(stale)}"


def test_the_differences_are_few(sets_dir: Path) -> None:
    """What the page lists, and no more: the sets are Nixpkgs' but for these."""
    found = _all_differences(sets_dir, None)
    assert {a for a, aspect in found if aspect != "meta.teams"} <= {
        "cuda_compat_orin", "cudnn_jit", "cudnn", "libcusparse_lt"}, sorted(found)


def test_broken_and_problems_under_each_config(sets_dir: Path) -> None:
    """cudaSupport unset: every package broken (buildRedist's first assertion); cuda_compat's
    problem goes with config.enableCudaDriverCompat, as Nixpkgs' opt-in."""
    off = _eval(sets_dir, "cudaPackages_13_4", "x86_64", None, False)
    assert all(p["broken"] for p in off.values())
    assert all(p["brokenFailed"][0] == "CUDA support is enabled by config.cudaSupport"
               for p in off.values())
    want = expected("cudaPackages_13_4", "x86_64", cuda_support=False)
    assert all(want[a]["broken"] for a in want)
    for compat in (False, True):
        got = _eval(sets_dir, "cudaPackages_12_9", "jetson", None, True, compat)
        ref = expected("cudaPackages_12_9", "jetson", compat=compat)
        assert got["cuda_compat"]["problemNames"] == ref["cuda_compat"]["problemNames"]
        assert got["cuda_compat"]["unavailable"] is not compat  # L4T: the archive is there
        assert list(differences(got, ref)) == list(differences(
            _eval(sets_dir, "cudaPackages_12_9", "jetson"), expected("cudaPackages_12_9",
                                                                      "jetson")))


def test_jetson_builds_take_the_jetson_pins(sets_dir: Path) -> None:
    """Orin on CUDA 12 takes the L4T archives, cuDNN 9.20.0 and TensorRT 10.7.0; on CUDA 13
    sbsa ones, TensorRT 10.16.1 (13.0, 13.1) or 11.1.0 (from 13.2)."""
    s126 = _eval(sets_dir, "cudaPackages_12_6", "jetson")
    assert s126["cudnn"]["version"].startswith("9.20.0")
    assert s126["tensorrt"]["version"].startswith("10.7.0") and ".l4t." in s126["tensorrt"]["url"]
    assert "/linux-aarch64/" in s126["cuda_cudart"]["url"]
    for set_name, trt in (("cudaPackages_13_0", "10.16.1"), ("cudaPackages_13_2", "11.1.0")):
        got = _eval(sets_dir, set_name, "jetson")
        assert got["tensorrt"]["version"].startswith(trt)
        assert "/linux-sbsa/" in got["cuda_cudart"]["url"]
    sbsa = _eval(sets_dir, "cudaPackages_12_6", "sbsa")
    assert sbsa["tensorrt"]["version"].startswith("10.13.0")


def test_libcudla_declares_nixpkgs_five_outputs_on_every_system(sets_dir: Path) -> None:
    """The declaration is the same everywhere (13.0 has no libcudla at all: still declared);
    a system without an archive builds only out, as buildRedist's `outputs` does."""
    for set_name in ("cudaPackages_13_4", "cudaPackages_13_0"):
        text = (sets_dir / f"{set_name}.nix").read_text()
        call = text.split("      libcudla = ", 1)[1].split("      }) { };", 1)[0]
        assert 'outputs = [ "out" "dev" "include" "lib" "stubs" ];' in call, set_name
    assert _eval(sets_dir, "cudaPackages_13_4", "x86_64")["libcudla"]["outputs"] == ["out"]
    assert _eval(sets_dir, "cudaPackages_13_4", "jetson")["libcudla"]["outputs"] == [
        "out", "dev", "include", "lib", "stubs"]


def test_libcuobjclient_propagates_rdma_core_from_13_4(sets_dir: Path) -> None:
    s134, s133 = (_eval(sets_dir, f"cudaPackages_{v}", "x86_64") for v in ("13_4", "13_3"))
    assert s134["libcuobjclient"]["propagated"] == ["libcufile", "rdma-core"]
    assert s133["libcuobjclient"]["propagated"] == ["libcufile"]
    # libcufile resolves its DT_NEEDED (cudasplit's table), the others as libcuobjclient.nix.
    assert s134["libcuobjclient"]["buildInputs"] == ["libcufile", "numactl", "rdma-core"]
    assert "rdma-core not propagated" in s134["libcuobjclient"]["tests"]["propagation"]


@pytest.mark.parametrize("lib", ["stand-in", "real"])
def test_overlay_keeps_the_rest_of_nixpkgs_set(sets_dir: Path, lib: str) -> None:
    """Over Nixpkgs' own set (overlay.nix passes it), the packages are replaced and the rest
    stays: its nccl builds against the generated cuda_cudart (the real lib's overrideScope
    too, where CUDASPLIT_NIXPKGS_LIB names it)."""
    need_nix()
    real = _real_lib()
    if lib == "real" and real is None:
        pytest.skip("the real Nixpkgs lib is not here (set CUDASPLIT_NIXPKGS_LIB)")
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", str(DATA / "nix" / "sets-standin.nix"),
         "--arg", "dir", str(sets_dir), "--argstr", "system", "x86_64-linux",
         "--argstr", "setName", "cudaPackages_13_4", "--arg", "withBase", "true",
         *(["--arg", "realLib", real] if lib == "real" and real else [])],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"cudaMajorMinorVersion": "nixpkgs",
                                       "cudart": "13.4.92", "ncclCudart": "13.4.92"}


def test_every_generated_file_parses(sets_dir: Path) -> None:
    need_nix()
    files = sorted(sets_dir.glob("*.nix"))
    assert len(files) == 12  # eight sets, mk-redist, default, overlay, release
    done = subprocess.run(["nix-instantiate", "--parse", *map(str, files)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
