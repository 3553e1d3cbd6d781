"""``cudasplit sbom`` on real NVIDIA bytes: the CUDA 13.0 release built from NVIDIA's wheels
(manifest and tarballs), a split of its cudart, and cudart for two platforms. Each document
validated by its own library, reproducible, its archive hashes and URLs those of the
manifest and the bytes, its edges nixify's; a tampered tarball refused."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit import SourceError
from cudasplit.cli import main
from cudasplit.sbom import sbom, sbom_documents
from tests.support.releases import release
from tests.support.wheeltrees import WHEELS_13, redist_tarball

pytest.importorskip("cyclonedx")
pytest.importorskip("spdx_tools")

BASE = "https://developer.download.nvidia.com/compute/cuda/redist/"


def _cdx_valid(text: str) -> dict[str, Any]:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    result: dict[str, Any] = json.loads(text)
    return result


def _spdx_valid(text: str) -> Any:
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document
    document = JsonLikeDictParser().parse(json.loads(text))
    assert validate_full_spdx_document(document) == []
    return document


def _edges(doc: dict[str, Any]) -> dict[str, list[str]]:
    return {d["ref"].split("@")[0]: sorted(r.split("@")[0] for r in d.get("dependsOn", ()))
            for d in doc["dependencies"] if d["ref"] != "subject"}


def test_a_13_release_checked_valid_and_linked() -> None:
    rel = release("13.0.2")
    manifest = json.loads(rel.manifest.read_text())
    docs = sbom_documents([rel.tarballs], manifest=rel.manifest)
    assert docs == sbom_documents([rel.tarballs], manifest=rel.manifest)   # the same bytes
    spdx = _spdx_valid(docs["spdx"])
    doc = json.loads(docs["cyclonedx"])
    assert {c["name"] for c in doc["components"]} == set(rel.versions)
    for component in doc["components"]:
        pname = component["name"]
        entry = manifest[pname]["linux-x86_64"]
        data = rel.tarball(pname).read_bytes()
        assert component["hashes"][0]["content"] == entry["sha256"] \
            == hashlib.sha256(data).hexdigest()
        assert component["externalReferences"][0]["url"] == BASE + entry["relative_path"]
        props = {p["name"]: p["value"] for p in component["properties"]}
        assert props["cudasplit:archive:size"] == entry["size"] == str(len(data))
        assert component["purl"] == (f"pkg:generic/nvidia/{pname}@{rel.versions[pname]}"
                                     "?platform=linux-x86_64")
        assert component["supplier"]["name"] == "NVIDIA Corporation"
        assert component["licenses"][0]["license"]["name"] == "CUDA Toolkit"
    # A file's hash is of NVIDIA's bytes (the wheel's file, before any RUNPATH edit).
    cudart = next(c for c in doc["components"] if c["name"] == "cuda_cudart")
    lib = next(f for f in cudart["components"] if f["name"] == "lib/libcudart.so.13")
    wheel_lib = rel.roots["cuda_cudart"] / "lib" / "libcudart.so.13"
    assert lib["hashes"][0]["content"] == hashlib.sha256(wheel_lib.read_bytes()).hexdigest()
    assert "cudasplit:floor:GLIBC" in {p["name"] for p in lib["properties"]}
    # nixify's edges: nvcc compiles with cudart's, crt's and cccl's headers and copies libnvvm
    # in; cudart's .pc names crt's and cccl's headers.
    edges = _edges(doc)
    assert edges["cuda_nvcc"] == ["cuda_cccl", "cuda_crt", "cuda_cudart", "libnvvm"]
    assert edges["cuda_cudart"] == ["cuda_cccl", "cuda_crt"]
    assert len(spdx.packages) == len(rel.versions)
    assert sum(r.relationship_type.name == "DEPENDS_ON" for r in spdx.relationships) == 6
    # The CycloneDX schema's check is quadratic in a package's files: the packages without
    # cccl's 1,700 headers are validated here, the whole document's shape is the same.
    _cdx_valid(sbom([rel.tarballs], manifest=rel.manifest,
                    packages=["cuda_nvcc", "cuda_cudart", "cuda_crt", "libnvvm"]))


def test_a_tampered_tarball_is_refused(tmp_path: Path) -> None:
    rel = release("13.0.2")
    tarballs = tmp_path / "t"
    tarballs.mkdir()
    for path in rel.tarballs.iterdir():
        (tarballs / path.name).symlink_to(path)
    crt = rel.tarball("cuda_crt")
    (tarballs / crt.name).unlink()
    data = bytearray(crt.read_bytes())
    data[len(data) // 2] ^= 0x01
    (tarballs / crt.name).write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["sbom", "--manifest", str(rel.manifest), str(tarballs),
                                       "-o", str(tmp_path / "x.spdx.json")])
    assert result.exit_code == 2
    assert crt.name in result.output and "[tarball-mismatch]" in result.output
    assert not (tmp_path / "x.spdx.json").exists()
    # Only what --package chooses is read: the tampered one is not among them.
    text = sbom([tarballs], manifest=rel.manifest, packages=["cuda_cudart"])
    assert [c["name"] for c in json.loads(text)["components"]] == ["cuda_cudart"]


def test_a_split_of_real_cudart_and_cudart_for_two_platforms(tmp_path: Path) -> None:
    rel = release("13.0.2")
    split = tmp_path / "cudart"
    result = CliRunner().invoke(main, ["split", str(rel.tarball("cuda_cudart")), "-o",
                                       str(split), "--report", str(split / "report.json")])
    assert result.exit_code == 0, result.output
    doc = _cdx_valid(sbom([split]))
    (component,) = doc["components"]
    assert component["bom-ref"] == "cuda_cudart@13.0.96/linux-x86_64"
    lib = next(f for f in component["components"] if f["name"] == "lib/libcudart.so.13")
    output = next(p["value"] for p in lib["properties"] if p["name"] == "cudasplit:output")
    written = split / output / "lib" / "libcudart.so.13"
    assert lib["hashes"][0]["content"] == hashlib.sha256(written.read_bytes()).hexdigest()
    _spdx_valid(sbom([split], fmt="spdx"))
    # One package for two platforms: two refs, the same bytes whatever the order.
    wheel = WHEELS_13["cuda_cudart"]
    both = [tmp_path / "x86.tar.gz", tmp_path / "sbsa.tar.gz"]
    shutil.copy(redist_tarball("cuda_cudart", wheel), both[0])
    shutil.copy(redist_tarball("cuda_cudart", wheel, platform="linux-sbsa"), both[1])
    docs = sbom_documents(both)
    assert docs == sbom_documents(list(reversed(both)))
    doc = _cdx_valid(docs["cyclonedx"])
    assert [c["bom-ref"] for c in doc["components"]] == [
        "cuda_cudart@13.0.96/linux-sbsa", "cuda_cudart@13.0.96/linux-x86_64"]
    spdx = _spdx_valid(docs["spdx"])
    assert len({p.spdx_id for p in spdx.packages}) == 2
    with pytest.raises(SourceError, match="described twice"):
        sbom([both[0], both[0]])
