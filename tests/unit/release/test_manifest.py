"""redistrib_*.json parsing, platform/cuda_variant selection and tarball verification."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit._release.manifest import (
    VerifyStatus,
    find_tarball,
    load_manifest,
    parse_manifest,
    resolve_platforms,
    select_artifacts,
    verify,
)
from cudasplit.cli import main
from cudasplit.errors import ManifestError

REFERENCE = Path("/work/shared/reference/manifests")


def artifact_entry(rel: str, data: bytes) -> dict[str, str]:
    return {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}


def write_manifest(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data, indent=4))
    return path


@pytest.fixture
def downloads(tmp_path: Path) -> tuple[Path, Path]:
    """A manifest (plain and cuda_variant packages) and a flat download dir with every file."""
    files = {
        "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-12.2.140-archive.tar.xz": b"a" * 3000,
        "cuda_cudart/linux-sbsa/cuda_cudart-linux-sbsa-12.2.140-archive.tar.xz": b"b" * 2000,
        "cudnn/linux-x86_64/cudnn-linux-x86_64-9.8.0.87_cuda11-archive.tar.xz": b"c" * 1000,
        "cudnn/linux-x86_64/cudnn-linux-x86_64-9.8.0.87_cuda12-archive.tar.xz": b"d" * (3 << 20),
    }
    rels = list(files)
    manifest = {
        "release_date": "2023-08-29", "release_label": "12.2.2", "release_product": "cuda",
        "cuda_cudart": {
            "name": "CUDA Runtime", "license": "CUDA Toolkit", "version": "12.2.140",
            "linux-x86_64": artifact_entry(rels[0], files[rels[0]]),
            "linux-sbsa": artifact_entry(rels[1], files[rels[1]]),
        },
        "cudnn": {
            "name": "cuDNN", "license": "cudnn", "version": "9.8.0.87",
            "linux-x86_64": {"cuda11": artifact_entry(rels[2], files[rels[2]]),
                             "cuda12": artifact_entry(rels[3], files[rels[3]])},
            "cuda_variant": ["11", "12"],
        },
    }
    tarballs = tmp_path / "tarballs"
    tarballs.mkdir()
    for rel, data in files.items():
        (tarballs / Path(rel).name).write_bytes(data)
    return write_manifest(tmp_path / "redistrib_test.json", manifest), tarballs


# -- parsing ---------------------------------------------------------------------------------


def test_reference_redistrib_manifest_parses() -> None:
    manifest = load_manifest(REFERENCE / "redistrib_12.2.2.json")
    assert (manifest.release_date, manifest.release_label, manifest.release_product) == (
        "2023-08-29", "12.2.2", "cuda")
    cudart = manifest.package("cuda_cudart")
    assert cudart.version == "12.2.140"
    x86 = next(a for a in cudart.artifacts if a.platform == "linux-x86_64")
    assert x86.filename == "cuda_cudart-linux-x86_64-12.2.140-archive.tar.xz"
    assert x86.cuda_variant is None and x86.size > 0 and len(x86.sha256) == 64
    assert len(manifest.artifacts) == 152


def test_reference_cudnn_manifest_nests_cuda_variants() -> None:
    manifest = load_manifest(REFERENCE / "cudnn_redistrib_9.8.0.json")
    cudnn = manifest.package("cudnn")
    assert cudnn.cuda_variants == ("11", "12")
    labels = {a.label for a in cudnn.artifacts}
    assert {"cudnn/linux-x86_64/cuda11", "cudnn/linux-x86_64/cuda12",
            "cudnn/linux-aarch64/cuda12"} <= labels
    assert all(a.filename.endswith(f"_cuda{a.cuda_variant}-archive.tar.xz")
               or a.filename.endswith(f"_cuda{a.cuda_variant}-archive.zip")
               for a in cudnn.artifacts)


@pytest.mark.parametrize(("data", "words"), [
    ([], "top level"),
    ({"p": {"linux-x86_64": {}}}, "'version'"),
    ({"p": {"version": "1", "linux-x86_64": {"relative_path": "/abs", "sha256": "0" * 64,
                                              "size": "1"}}}, "relative_path"),
    ({"p": {"version": "1", "linux-x86_64": {"relative_path": "x", "sha256": "zz",
                                              "size": "1"}}}, "sha256"),
    ({"p": {"version": "1", "linux-x86_64": {"relative_path": "x", "sha256": "0" * 64,
                                              "size": "big"}}}, "size"),
    ({"p": {"version": "1", "linux-x86_64": {"cudaX": {}}}}, "cudaNN"),
])
def test_bad_manifests_name_file_and_key(data: Any, words: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, source="m.json")
    message = str(info.value)
    assert message.startswith("m.json") and words in message and "\n" not in message


def test_unreadable_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_manifest(tmp_path / "bad.json")


# -- selection -------------------------------------------------------------------------------


def test_platform_words() -> None:
    manifest = load_manifest(REFERENCE / "redistrib_12.2.2.json")
    assert resolve_platforms([]) is None and resolve_platforms(["all", "linux-sbsa"]) is None
    linux = resolve_platforms(["linux"], manifest)
    assert linux is not None and "windows-x86_64" not in linux and "linux-all" in linux
    # linux-all is NVIDIA's arch-independent platform, never "every Linux platform".
    assert resolve_platforms(["linux-all"]) == frozenset({"linux-all"})
    assert resolve_platforms(["source", "linux-aarch64"]) == {"source", "linux-aarch64"}
    with pytest.raises(ManifestError, match="unknown platform 'linux-arm'"):
        resolve_platforms(["linux-arm"])


def test_select_artifacts_by_platform_variant_and_package(downloads: tuple[Path, Path]) -> None:
    manifest = load_manifest(downloads[0])
    labels = [a.label for a in select_artifacts(manifest, platforms=["linux-x86_64"])]
    assert labels == ["cuda_cudart/linux-x86_64", "cudnn/linux-x86_64/cuda11",
                      "cudnn/linux-x86_64/cuda12"]
    # A variant filter keeps plain packages and drops the other variants.
    labels = [a.label for a in select_artifacts(manifest, cuda_variants=["cuda12"])]
    assert labels == ["cuda_cudart/linux-x86_64", "cuda_cudart/linux-sbsa",
                      "cudnn/linux-x86_64/cuda12"]
    assert [a.label for a in select_artifacts(manifest, packages=["cudnn"],
                                              cuda_variants=["11"])] == [
        "cudnn/linux-x86_64/cuda11"]
    with pytest.raises(ManifestError, match="bad CUDA variant"):
        select_artifacts(manifest, cuda_variants=["twelve"])


def test_find_tarball_flat_or_mirrored(tmp_path: Path, downloads: tuple[Path, Path]) -> None:
    artifact = load_manifest(downloads[0]).artifacts[0]
    assert find_tarball(artifact, tmp_path) is None
    mirrored = tmp_path / artifact.relative_path
    mirrored.parent.mkdir(parents=True)
    mirrored.write_bytes(b"x")
    assert find_tarball(artifact, tmp_path) == mirrored


# -- verification ----------------------------------------------------------------------------


def test_verify_all_ok(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    report = verify(load_manifest(manifest_path), tarballs, jobs=4)
    assert report.ok and report.counts()["ok"] == 4
    assert report.results[0].artifact.label == "cuda_cudart/linux-x86_64"


def test_verify_detects_flipped_byte_truncation_and_missing(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    manifest = load_manifest(manifest_path)
    by_label = {a.label: a for a in manifest.artifacts}
    flipped = tarballs / by_label["cudnn/linux-x86_64/cuda12"].filename
    data = bytearray(flipped.read_bytes())
    data[2 << 20] ^= 0x01  # one bit, in the third 1 MiB chunk
    flipped.write_bytes(bytes(data))
    truncated = tarballs / by_label["cuda_cudart/linux-x86_64"].filename
    truncated.write_bytes(truncated.read_bytes()[:-1])
    (tarballs / by_label["cuda_cudart/linux-sbsa"].filename).unlink()

    report = verify(manifest, tarballs)
    status = {r.artifact.label: r.status for r in report.results}
    assert status == {
        "cuda_cudart/linux-x86_64": VerifyStatus.SIZE_MISMATCH,
        "cuda_cudart/linux-sbsa": VerifyStatus.MISSING,
        "cudnn/linux-x86_64/cuda11": VerifyStatus.OK,
        "cudnn/linux-x86_64/cuda12": VerifyStatus.HASH_MISMATCH,
    }
    assert not report.ok
    mismatch = report.with_status(VerifyStatus.HASH_MISMATCH)[0]
    assert mismatch.actual_sha256 == hashlib.sha256(data).hexdigest()
    assert report.with_status(VerifyStatus.SIZE_MISMATCH)[0].actual_size == 2999


def test_verify_only_selected_platforms(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    (tarballs / "cuda_cudart-linux-x86_64-12.2.140-archive.tar.xz").unlink()
    report = verify(load_manifest(manifest_path), tarballs, platforms=["linux-sbsa"])
    assert report.ok and [r.artifact.label for r in report.results] == ["cuda_cudart/linux-sbsa"]


def test_verify_directory_in_place_of_tarball_is_missing(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    victim = tarballs / "cudnn-linux-x86_64-9.8.0.87_cuda11-archive.tar.xz"
    victim.unlink()
    victim.mkdir()  # a directory is not a file: reported missing, never an exception
    report = verify(load_manifest(manifest_path), tarballs)
    assert report.with_status(VerifyStatus.MISSING)[0].artifact.cuda_variant == "11"


# -- CLI -------------------------------------------------------------------------------------


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_verify_exit_codes_and_json(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    code, out, err = invoke("verify", str(manifest_path), "--tarballs", str(tarballs))
    assert code == 0, err
    assert out.count("ok ") == 4 and "4 tarballs: 4 ok" in err

    (tarballs / "cuda_cudart-linux-sbsa-12.2.140-archive.tar.xz").write_bytes(b"short")
    code, out, _ = invoke("verify", str(manifest_path), "--tarballs", str(tarballs), "--json",
                          "--platform", "linux-sbsa", "--platform", "linux-x86_64",
                          "--cuda-variant", "12", "-j", "2")
    assert code == 1
    report = json.loads(out)
    assert report["counts"] == {"ok": 2, "missing": 0, "size-mismatch": 1, "hash-mismatch": 0,
                                "unreadable": 0}
    bad = next(r for r in report["results"] if r["status"] != "ok")
    assert (bad["package"], bad["platform"], bad["actual_size"]) == ("cuda_cudart", "linux-sbsa",
                                                                     5)


def test_cli_verify_quiet_lists_only_problems(downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    (tarballs / "cuda_cudart-linux-sbsa-12.2.140-archive.tar.xz").unlink()
    code, out, _ = invoke("verify", str(manifest_path), "--tarballs", str(tarballs), "-q")
    assert code == 1
    assert out.splitlines() == [
        "MISSING   cuda_cudart/linux-sbsa  cuda_cudart-linux-sbsa-12.2.140-archive.tar.xz"]


def test_cli_verify_bad_input_exits_2(tmp_path: Path, downloads: tuple[Path, Path]) -> None:
    manifest_path, tarballs = downloads
    code, _, err = invoke("verify", str(REFERENCE / "feature_12.2.2.json"), "--tarballs",
                          str(tarballs))
    assert code == 2 and err.startswith("cudasplit: error: ") and err.count("\n") == 1
    code, _, err = invoke("verify", str(manifest_path), "--tarballs", str(tarballs),
                          "--platform", "amiga")
    assert code == 2 and "unknown platform 'amiga'" in err
