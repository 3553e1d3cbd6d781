"""``cudasplit sbom``: CycloneDX and SPDX documents that their own libraries accept, the
same bytes every time (one package for two platforms too), archives checked against the
manifest, purls, supplier, licences, the dependency edges, split directories identified from
what the split wrote; a tarball the manifest does not vouch for is refused."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cudasplit import CudasplitError, ManifestError, OptionsError, SourceError, split_to_dir
from cudasplit._release.sbom import SbomPackage, read_report_identity, split_identity
from cudasplit.cli import main
from cudasplit.sbom import sbom, sbom_documents
from tests.support.builders import compile_shared
from tests.support.paths import REPO
from tests.support.tarutil import write_archive

pytest.importorskip("cyclonedx")
pytest.importorskip("spdx_tools")

VERSION = "13.0.96"
SOURCE = "int f{n}(void) {{ return {n}; }}\n"
TOOL_ENV = {"SOURCE_DATE_EPOCH": "1700000000"}


def _top(pname: str, platform: str = "linux-x86_64", version: str = VERSION) -> str:
    return f"{pname}-{platform}-{version}-archive"


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libdemob.so.1, and libdemoa.so.1 that needs it (DT_NEEDED)."""
    root = tmp_path_factory.mktemp("libs")
    b = compile_shared(root, "libdemob.so.1", SOURCE.format(n=2), soname="libdemob.so.1")
    a = compile_shared(root, "libdemoa.so.1", SOURCE.format(n=1), soname="libdemoa.so.1",
                       needed_libs=[b])
    return {"a": a, "b": b}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, libs: dict[str, Path]) -> dict[str, Path]:
    """Two packages (cuda_demoa needs cuda_demob's library) for two platforms, a manifest
    naming them (and one more whose tarball is not there)."""
    root = tmp_path_factory.mktemp("release")
    tarballs = root / "tarballs"
    tarballs.mkdir()
    manifest: dict[str, Any] = {"release_date": "2026-01-01", "release_label": "13.0.2",
                                "release_product": "cuda"}
    for pname, lib in (("cuda_demoa", libs["a"]), ("cuda_demob", libs["b"])):
        entry: dict[str, Any] = {"name": pname, "license": "CUDA Toolkit",
                                 "license_path": f"{pname}/LICENSE.txt", "version": VERSION}
        for platform in ("linux-x86_64", "linux-sbsa"):
            name = f"{_top(pname, platform)}.tar.xz"
            archive = write_archive(tarballs / name, [
                ("file", f"lib/{lib.name}", lib.read_bytes()),
                ("file", f"include/{pname}.h", f"/* {pname} {platform} */\n".encode()),
                ("file", "LICENSE", b"NVIDIA\n")], top=_top(pname, platform))
            data = archive.read_bytes()
            entry[platform] = {"relative_path": f"{pname}/{platform}/{name}",
                               "sha256": hashlib.sha256(data).hexdigest(),
                               "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}
        manifest[pname] = entry
    manifest["cuda_gone"] = {"name": "gone", "license": "CUDA Toolkit", "version": VERSION,
                             "linux-x86_64": {
                                 "relative_path": "cuda_gone/linux-x86_64/gone.tar.xz",
                                 "sha256": "0" * 64, "size": "10"}}
    path = root / "redistrib_13.0.2.json"
    path.write_text(json.dumps(manifest, indent=2))
    return {"root": root, "manifest": path, "tarballs": tarballs}


def _cdx_valid(text: str) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None


def _spdx_valid(text: str, tmp_path: Path) -> Any:
    from spdx_tools.spdx.parser.parse_anything import parse_file
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document
    path = tmp_path / "doc.spdx.json"
    path.write_text(text)
    document = parse_file(str(path))
    assert validate_full_spdx_document(document) == []
    return document


def _by_ref(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["bom-ref"]: c for c in doc["components"]}


def _props(component: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for p in component.get("properties", ()):
        found.setdefault(p["name"], []).append(p["value"])
    return found


def test_a_release_in_both_formats_valid_checked_and_linked(release: dict[str, Path],
                                                            tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture,
                                                            ) -> None:
    docs = sbom_documents([release["tarballs"]], manifest=release["manifest"],
                          platform=["linux-x86_64", "linux-sbsa"])
    _cdx_valid(docs["cyclonedx"])
    spdx = _spdx_valid(docs["spdx"], tmp_path)
    assert "cuda_gone/linux-x86_64 [tarball-missing]" in caplog.text.replace(
        ": no tarball gone.tar.xz in " + str(release["tarballs"]) + "; left out of the SBOM", "")
    doc = json.loads(docs["cyclonedx"])
    components = _by_ref(doc)
    assert sorted(components) == [f"cuda_demo{x}@{VERSION}/{p}" for x in "ab"
                                  for p in ("linux-sbsa", "linux-x86_64")]
    manifest = json.loads(release["manifest"].read_text())
    for ref, component in components.items():
        pname, platform = ref.split("@")[0], ref.split("/")[1]
        entry = manifest[pname][platform]
        tarball = release["tarballs"] / Path(entry["relative_path"]).name
        # the archive's identity, checked against the bytes
        assert component["hashes"] == [{"alg": "SHA-256", "content": entry["sha256"]}]
        assert entry["sha256"] == hashlib.sha256(tarball.read_bytes()).hexdigest()
        (dist,) = component["externalReferences"]
        assert dist["type"] == "distribution"
        assert dist["url"] == ("https://developer.download.nvidia.com/compute/cuda/redist/"
                               + entry["relative_path"])
        props = _props(component)
        assert props["cudasplit:archive:size"] == [entry["size"]]
        assert props["cudasplit:archive:relative-path"] == [entry["relative_path"]]
        assert component["purl"] == f"pkg:generic/nvidia/{pname}@{VERSION}?platform={platform}"
        assert component["supplier"]["name"] == "NVIDIA Corporation"
        (licence,) = component["licenses"]
        assert licence["license"]["name"] == "CUDA Toolkit"
        assert licence["license"]["url"].endswith(f"/{pname}/LICENSE.txt")
        files = {f["name"]: f for f in component["components"]}
        header = files[f"include/{pname}.h"]
        assert header["hashes"][0]["content"] == hashlib.sha256(
            f"/* {pname} {platform} */\n".encode()).hexdigest()
    assert _props(doc["metadata"]["component"])["cudasplit:left-out"] == [
        "cuda_gone/linux-x86_64"]
    edges = {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}
    for platform in ("linux-x86_64", "linux-sbsa"):   # edges stay within a platform
        assert edges[f"cuda_demoa@{VERSION}/{platform}"] == [f"cuda_demob@{VERSION}/{platform}"]
        assert edges[f"cuda_demob@{VERSION}/{platform}"] == []
    assert _props(components[f"cuda_demoa@{VERSION}/linux-x86_64"])["cudasplit:depends-on"] \
        == [f"cuda_demob@{VERSION}/linux-x86_64: libdemob.so.1"]
    # SPDX says the same: packages, purls, archive checksums, DEPENDS_ON
    from spdx_tools.spdx.model import RelationshipType
    packages = {p.spdx_id: p for p in spdx.packages}
    assert len(packages) == 4
    depends = [(packages[r.spdx_element_id].name, packages[r.related_spdx_element_id].name)
               for r in spdx.relationships if r.relationship_type is RelationshipType.DEPENDS_ON]
    assert sorted(depends) == [("cuda_demoa", "cuda_demob")] * 2
    (licence,) = spdx.extracted_licensing_info   # one licence, defined once
    assert licence.license_name == "CUDA Toolkit" and len(licence.cross_references) == 2
    for package in spdx.packages:
        assert str(package.license_concluded) == licence.license_id
        assert package.supplier.name == "NVIDIA Corporation"
        assert package.download_location.startswith("https://")
        assert package.external_references[0].locator.startswith("pkg:generic/nvidia/")
        assert package.checksums[0].value == manifest[package.name][
            package.download_location.split("/")[-2]]["sha256"]


def test_the_same_bytes_every_time_also_across_processes(release: dict[str, Path],
                                                         tmp_path: Path) -> None:
    args = ["sbom", "--manifest", str(release["manifest"]), str(release["tarballs"]),
            "--platform", "linux-x86_64", "--platform", "linux-sbsa"]
    seen = set()
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.cdx.json"
        spdx = tmp_path / f"{seed}.spdx.json"
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed, **TOOL_ENV}
        subprocess.run([sys.executable, "-m", "cudasplit", *args, "-o", str(out),
                        "-o", str(spdx)], env=env, check=True, capture_output=True)
        seen.add((out.read_bytes(), spdx.read_bytes()))
    assert len(seen) == 1
    cdx, spdx_bytes = seen.pop()
    doc = json.loads(cdx)
    assert doc["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    assert "urn:uuid:" in doc["serialNumber"]
    refs = [c["bom-ref"] for c in doc["components"]]
    assert len(refs) == len(set(refs)) == 4
    assert b'"created": "2023-11-14T22:13:20Z"' in spdx_bytes


def test_one_package_for_two_platforms_from_tarballs(release: dict[str, Path],
                                                     tmp_path: Path) -> None:
    tarballs = sorted(release["tarballs"].glob("cuda_demob-*"))
    first, again = sbom(tarballs), sbom(list(reversed(tarballs)))
    assert first == again   # the order of the sources does not matter either
    _cdx_valid(first)
    doc = json.loads(first)
    assert sorted(_by_ref(doc)) == [f"cuda_demob@{VERSION}/linux-sbsa",
                                    f"cuda_demob@{VERSION}/linux-x86_64"]
    _spdx_valid(sbom(tarballs, fmt="spdx"), tmp_path)
    # Described twice is an error, not two components of one ref.
    with pytest.raises(SourceError, match="described twice"):
        sbom([tarballs[0], tarballs[0]])


@pytest.mark.parametrize("damage", ["bytes", "size"])
def test_a_tarball_the_manifest_does_not_vouch_for_is_refused(release: dict[str, Path],
                                                              tmp_path: Path,
                                                              damage: str) -> None:
    tarballs = tmp_path / "t"
    tarballs.mkdir()
    for path in release["tarballs"].iterdir():
        data = path.read_bytes()
        if path.name.startswith("cuda_demob-linux-x86_64"):
            data = data[:-1] + bytes([data[-1] ^ 1]) if damage == "bytes" else data + b"\0"
        (tarballs / path.name).write_bytes(data)
    with pytest.raises(SourceError, match=r"tarball-mismatch") as caught:
        sbom([tarballs], manifest=release["manifest"])
    assert "cuda_demob-linux-x86_64" in str(caught.value)
    assert ("sha256" if damage == "bytes" else "bytes, the manifest") in str(caught.value)
    out = tmp_path / "x.cdx.json"
    result = CliRunner().invoke(main, ["sbom", "--manifest", str(release["manifest"]),
                                       str(tarballs), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "[tarball-mismatch]" in result.output
    assert not out.exists() and not list(tmp_path.glob(".x.cdx.json*"))


def test_a_manifest_needs_only_the_tarballs_chosen(release: dict[str, Path],
                                                   tmp_path: Path) -> None:
    tarballs = tmp_path / "t"
    tarballs.mkdir()
    only = next(release["tarballs"].glob("cuda_demob-linux-x86_64*"))
    (tarballs / only.name).write_bytes(only.read_bytes())
    doc = json.loads(sbom([tarballs], manifest=release["manifest"], packages=["cuda_demob"]))
    assert list(_by_ref(doc)) == [f"cuda_demob@{VERSION}/linux-x86_64"]
    result = CliRunner().invoke(main, ["sbom", "--manifest", str(release["manifest"]),
                                       str(tarballs), "--package", "cuda_demob"])
    assert result.exit_code == 0, result.output
    # Without --package the others are left out, each with a warning.
    result = CliRunner().invoke(main, ["sbom", "--manifest", str(release["manifest"]),
                                       str(tarballs)])
    assert result.exit_code == 0
    assert "cuda_demoa/linux-x86_64: no tarball" in result.output
    assert "[tarball-missing]" in result.output
    # A package --package names must be there; an unknown one is an error too.
    with pytest.raises(SourceError, match="tarball-missing"):
        sbom([tarballs], manifest=release["manifest"], packages=["cuda_demoa"])
    with pytest.raises(ManifestError, match="package-not-in-manifest"):
        sbom([tarballs], manifest=release["manifest"], packages=["cuda_nope"])


@pytest.mark.parametrize("args", [
    ["--platform", "bogus"],
    ["--platform", "linux-x86_64"],               # without --manifest: nothing to choose
    ["--manifest", "{manifest}", "--platform", "bogus"],
    ["--format", "xml"],
])
def test_option_errors_exit_2(release: dict[str, Path], args: list[str]) -> None:
    argv = ["sbom", *[a.format(**{k: str(v) for k, v in release.items()}) for a in args],
            str(release["tarballs"] if "--manifest" in args
                else next(release["tarballs"].glob("cuda_demob-linux-x86_64*")))]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_an_output_inside_an_input_is_refused(release: dict[str, Path]) -> None:
    for out in (release["tarballs"] / "sbom.cdx.json", release["manifest"]):
        result = CliRunner().invoke(main, ["sbom", "--manifest", str(release["manifest"]),
                                           str(release["tarballs"]), "-o", str(out)])
        assert result.exit_code == 2 and "is or is inside the input" in result.output
    assert not (release["tarballs"] / "sbom.cdx.json").exists()
    assert json.loads(release["manifest"].read_text())["release_label"] == "13.0.2"


def test_api_misuse_raises_cudasplit_errors(release: dict[str, Path]) -> None:
    tarball = next(release["tarballs"].glob("cuda_demob-linux-x86_64*"))
    with pytest.raises(OptionsError, match="at least one"):
        sbom([])
    with pytest.raises(CudasplitError):
        sbom([tarball], fmt="xml")
    with pytest.raises(OptionsError, match="platform"):
        sbom([tarball], platform="linux-x86_64")
    with pytest.raises(OptionsError):
        sbom([tarball], base_url="not a url")
    with pytest.raises(OptionsError):
        sbom([tarball], packages=["cuda_demob"])
    with pytest.raises(OptionsError, match="SOURCE_DATE_EPOCH"):
        env = dict(os.environ)
        try:
            os.environ["SOURCE_DATE_EPOCH"] = "9" * 5000
            sbom([tarball])
        finally:
            os.environ.clear()
            os.environ.update(env)


def test_a_split_directory_is_known_by_what_the_split_wrote(release: dict[str, Path],
                                                            tmp_path: Path) -> None:
    tarball = next(release["tarballs"].glob("cuda_demoa-linux-x86_64*"))
    plain = tmp_path / "plain"
    split_to_dir(tarball, plain)
    # Nothing says which package it is: an error that names an option sbom has.
    result = CliRunner().invoke(main, ["sbom", str(plain)])
    assert result.exit_code == 2 and "--package <pname>-<platform>-<version>" in result.output
    named = CliRunner().invoke(main, ["sbom", str(plain), "--package",
                                      f"cuda_demoa-linux-x86_64-{VERSION}"])
    assert named.exit_code == 0, named.output
    assert _by_ref(json.loads(named.output)) .keys() == {f"cuda_demoa@{VERSION}/linux-x86_64"}
    # The split's report beside its outputs says it, with each file's archive path.
    reported = tmp_path / "reported"
    result = CliRunner().invoke(main, ["split", str(tarball), "-o", str(reported),
                                       "--report", str(reported / "report.json")])
    assert result.exit_code == 0, result.output
    doc = json.loads(sbom([reported]))
    (component,) = doc["components"]
    assert component["bom-ref"] == f"cuda_demoa@{VERSION}/linux-x86_64"
    assert component["purl"] == f"pkg:generic/nvidia/cuda_demoa@{VERSION}?platform=linux-x86_64"
    assert _props(component)["cudasplit:files"] == ["split"]
    lib = next(f for f in component["components"] if f["name"].endswith("libdemoa.so.1"))
    assert _props(lib)["cudasplit:member"] == ["lib/libdemoa.so.1"]
    assert lib["hashes"][0]["content"] == hashlib.sha256(
        (reported / "lib" / "lib" / "libdemoa.so.1").read_bytes()).hexdigest()
    _cdx_valid(json.dumps(doc))
    _spdx_valid(sbom([reported], fmt="spdx"), tmp_path)
    # nix-support/cuda-component names package and version, the ELF files the platform.
    nix = tmp_path / "nix"
    result = CliRunner().invoke(main, ["split", str(tarball), "-o", str(nix), "--nix-support"])
    assert result.exit_code == 0, result.output
    ident, _ = split_identity(nix, None)
    assert (ident.name, ident.platform, ident.version) == ("cuda_demoa", "linux-x86_64",
                                                           VERSION)
    # A batch's package directories are named <pname>-<platform>-<version>.
    batch = tmp_path / "batch"
    result = CliRunner().invoke(main, ["split", str(tarball), str(next(
        release["tarballs"].glob("cuda_demob-linux-x86_64*"))), "-o", str(batch)])
    assert result.exit_code == 0, result.output
    doc = json.loads(sbom([batch]))
    assert sorted(_by_ref(doc)) == [f"cuda_demo{x}@{VERSION}/linux-x86_64" for x in "ab"]
    edges = {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}
    assert edges[f"cuda_demoa@{VERSION}/linux-x86_64"] == [f"cuda_demob@{VERSION}/linux-x86_64"]


def test_a_renamed_tree_names_an_option_sbom_has(release: dict[str, Path],
                                                 tmp_path: Path) -> None:
    tarball = next(release["tarballs"].glob("cuda_demob-linux-x86_64*"))
    tree = tmp_path / "renamed"
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp_path)], check=True)
    (tmp_path / _top("cuda_demob")).rename(tree)
    result = CliRunner().invoke(main, ["sbom", str(tree)])
    assert result.exit_code == 2 and "--package" in result.output
    # --package with a pname alone: the version and platform are still unknown.
    result = CliRunner().invoke(main, ["sbom", str(tree), "--package", "cuda_demob"])
    assert result.exit_code == 2 and "--package <pname>-<platform>-<version>" in result.output
    result = CliRunner().invoke(main, ["sbom", str(tree), "--package",
                                       f"cuda_demob-linux-x86_64-{VERSION}"])
    assert result.exit_code == 0, result.output
    (component,) = json.loads(result.output)["components"]
    assert component["version"] == VERSION
    # Read as the tree it is (NVIDIA's bytes, placed by the split's rules), not as a split
    # whose bin/, include/ and lib/ would be outputs.
    assert _props(component)["cudasplit:files"] == ["archive"]
    lib = next(f for f in component["components"] if f["name"].endswith("libdemob.so.1"))
    assert _props(lib)["cudasplit:member"] == ["lib/libdemob.so.1"]


def test_identity_that_cannot_be_a_ref_is_refused(tmp_path: Path) -> None:
    # A version with spaces and '*' never reaches an SBOM: the source refuses the top directory
    # (the SBOM's own check, "not of the manifest's shape", stands behind it).
    archive = write_archive(tmp_path / "odd.tar.gz", [("file", "include/x.h", b"x")],
                            codec="gz", top="cuda_demo-linux-x86_64-13.0.96 *|<0-archive")
    with pytest.raises(SourceError, match=r"its version '13.0.96 \*\|<0' is not a version"):
        sbom([archive])


@settings(max_examples=60, deadline=None)
@given(name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,20}", fullmatch=True),
       version=st.from_regex(r"[0-9][0-9A-Za-z._+-]{0,12}", fullmatch=True),
       platform=st.sampled_from(["linux-x86_64", "linux-sbsa", "linux-aarch64", "source"]),
       variant=st.one_of(st.none(), st.sampled_from(["12", "13", "12.8"])))
def test_purls_are_what_packageurl_writes(name: str, version: str, platform: str,
                                          variant: str | None) -> None:
    from packageurl import PackageURL
    package = SbomPackage(name, version, platform, variant, "x")
    parsed = PackageURL.from_string(package.purl)
    assert parsed.to_string() == package.purl
    assert (parsed.type, parsed.namespace, parsed.name, parsed.version) == (
        "generic", "nvidia", name, version)
    assert parsed.qualifiers == {"platform": platform, **(
        {"cuda_variant": variant} if variant else {})}


HOSTILE = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda depth: b"[" * depth + b"]" * depth, st.integers(0, 100_000)),
    st.builds(lambda digits: b'{"schema": ' + b"9" * digits + b"}", st.integers(1, 6000)),
    st.builds(lambda name: json.dumps({"schema": 1, "outputs": {}, "package": {
        "name": name, "version": 7, "platform": None}}).encode(), st.text(max_size=50)),
    st.builds(lambda members: json.dumps({"schema": 1, "outputs": {}, "package": {
        "name": "cuda_x"}, "members": members}).encode(),
        st.lists(st.one_of(st.none(), st.integers(), st.dictionaries(
            st.sampled_from(["path", "output", "dest"]), st.one_of(st.text(), st.integers())))
            , max_size=20)),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=HOSTILE)
def test_fuzz_the_report_reader(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    """The split's report is read back from a directory anyone may have written: only a
    value or None comes out, quickly, whatever the bytes."""
    path = tmp_path_factory.mktemp("r") / "report.json"
    path.write_bytes(data)
    start = time.monotonic()
    found = read_report_identity(path)
    assert time.monotonic() - start < 5
    if found is not None:
        ident, members = found
        assert isinstance(ident.name, str)
        assert all(isinstance(k[0], str) and isinstance(v, str) for k, v in members.items())


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=st.one_of(st.binary(max_size=8192), st.builds(
    lambda fields: ("declare -A cudaComponentMetadata=(" + " ".join(
        f'[{k}]="{v}"' for k, v in fields) + " )\n").encode(),
    st.lists(st.tuples(st.sampled_from(["component", "cudaComponentVersion", "format",
                                        "cudaMajorMinorVersion"]), st.text(max_size=300)),
             max_size=8))))
def test_fuzz_the_cuda_component_reader(tmp_path_factory: pytest.TempPathFactory,
                                        data: bytes) -> None:
    """nix-support/cuda-component of hostile bytes: an identity that passes the manifest's
    patterns, or a one-line SourceError; never anything else."""
    root = tmp_path_factory.mktemp("c")
    (root / "lib" / "nix-support").mkdir(parents=True)
    (root / "lib" / "nix-support" / "cuda-component").write_bytes(data)
    start = time.monotonic()
    try:
        sbom([root])
    except SourceError as exc:
        assert "\n" not in str(exc)
    assert time.monotonic() - start < 10
