"""Feature manifests computed by streaming tarballs: flags, extended form, JSON bytes, CLI."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import struct
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit._release.features import (
    Features,
    FeatureStatus,
    dump_feature_json,
    features_for_manifest,
    features_of,
)
from cudasplit.cli import main
from cudasplit.releases import load_manifest
from tests.support.builders import compile_executable, compile_shared, write_tarball

REFERENCE = Path("/work/shared/reference/manifests")
ELF_EXE = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00" + bytes(46)  # ET_EXEC header only
# ET_DYN whose one program header lies past the end of the file.
ELF_BROKEN = (b"\x7fELF\x02\x01\x01" + bytes(9)
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0x1000, 0, 0, 64, 56, 1, 64, 0, 0))

# (kind, path, payload, mode): file payload is bytes; symlink/hardlink payload is the target.
Entry = tuple[str, str, Any, int]


def file(path: str, data: bytes = b"x", mode: int = 0o644) -> Entry:
    return ("file", path, data, mode)


def link(path: str, target: str) -> Entry:
    return ("symlink", path, target, 0o777)


def write_tar(dest_dir: Path, top: str, entries: list[Entry]) -> Path:
    """An NVIDIA-style .tar.xz with exact modes (tests/tarutil.py fixes modes by content)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        top_info = tarfile.TarInfo(top)
        top_info.type, top_info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(top_info)
        for kind, path, payload, mode in entries:
            info = tarfile.TarInfo(f"{top}/{path}")
            info.mode = mode
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.type, info.linkname = tarfile.SYMTYPE, payload
                tar.addfile(info)
    path = dest_dir / f"{top}.tar.xz"
    path.write_bytes(lzma.compress(buf.getvalue()))
    return path


# Hand-checked: each package's members and the flags a reader of the reference's rules
# (with the bin fix) writes down for them.
PACKAGES: dict[str, tuple[list[Entry], dict[str, bool]]] = {
    # nvcc: executables, headers, a static lib; nvvm/lib64 is not lib/, nvcc.profile not exec.
    "cuda_nvcc": ([
        file("bin/nvcc", ELF_EXE, 0o755), file("bin/nvcc.profile"),
        file("include/crt/host_config.h"), file("lib/libnvptxcompiler_static.a", b"!<arch>\n"),
        file("nvvm/lib64/libnvvm.so.4.0.0"), link("nvvm/lib64/libnvvm.so", "libnvvm.so.4.0.0"),
        file("LICENSE"),
    ], dict(bin=True, dev=True, doc=False, lib=False, sample=False, static=True)),
    # cupti: symlink chain counts as lib, samples present; its top-level doc/ is not a doc
    # output for NVIDIA (feature_12.2.2.json: doc false; only share/{doc,info,man,...} count).
    "cuda_cupti": ([
        file("include/cupti.h"), file("lib/libcupti.so.12.2.142"),
        link("lib/libcupti.so.12", "libcupti.so.12.2.142"),
        link("lib/libcupti.so", "libcupti.so.12"),
        file("lib/libcupti_static.a"), file("samples/callback_event/Makefile"),
        file("doc/Cupti/index.html"),
    ], dict(bin=False, dev=True, doc=False, lib=True, sample=True, static=True)),
    # nvml_dev: only a stub library, which the original rules count as lib.
    "cuda_nvml_dev": ([
        file("include/nvml.h"), file("lib/stubs/libnvidia-ml.so"),
        file("pkg-config/nvidia-ml-12.2.pc"), file("nvml/example/example.c"),
    ], dict(bin=False, dev=True, doc=False, lib=True, sample=False, static=False)),
    # The original tool's bug: bin/ holding only a config file is not a bin output; an
    # include/ with only empty directories is not dev; share/man counts as doc.
    "cuda_config_only": ([
        file("bin/tool.profile"), ("dir", "include/empty", b"", 0o755),
        file("share/man/man1/tool.1"), file("lib64/libold.so.1"), file("lib/x64/libdeep.a"),
    ], dict(bin=False, dev=False, doc=True, lib=True, sample=False, static=True)),
    # bin/ with a symlink to an executable elsewhere in the tree (nsight style) and a script.
    "nsight_systems": ([
        link("bin/nsys", "../target-linux-x64/nsys"), file("target-linux-x64/nsys", ELF_EXE, 0o755),
        file("host-linux-x64/libQt6Core.so.6"), file("host-linux-x64/python/lib/x.whl"),
    ], dict(bin=True, dev=False, doc=False, lib=False, sample=False, static=False)),
    "cuda_script_bin": ([
        file("bin/run.sh", b"#!/bin/sh\n", 0o755), file("share/pkgconfig/x.pc"),
    ], dict(bin=True, dev=True, doc=False, lib=False, sample=False, static=False)),
    # cuda_compat: payload in compat/ only -> no output flags at all (as in feature_12.2.2.json).
    "cuda_compat": ([
        file("compat/libcuda.so.535.104.05"), link("compat/libcuda.so.1", "libcuda.so.535.104.05"),
    ], dict(bin=False, dev=False, doc=False, lib=False, sample=False, static=False)),
}


def top(pname: str, platform: str = "linux-x86_64", version: str = "12.2.140",
        suffix: str = "") -> str:
    return f"{pname}-{platform}-{version}{suffix}-archive"


@pytest.mark.parametrize("pname", sorted(PACKAGES))
def test_flags_match_hand_checked_expectation(tmp_path: Path, pname: str) -> None:
    entries, expected = PACKAGES[pname]
    tarball = write_tar(tmp_path, top(pname), entries)
    assert features_of(tarball).outputs() == expected


def test_extended_flags_without_elf(tmp_path: Path) -> None:
    entries, _ = PACKAGES["cuda_nvml_dev"]
    got = features_of(write_tar(tmp_path, top("cuda_nvml_dev"), entries), extended=True)
    assert (got.include, got.stubs, got.python) == (True, True, False)
    got = features_of(write_tar(tmp_path, top("nsight_systems"), PACKAGES["nsight_systems"][0]))
    assert got.python and not got.stubs and not got.include


def test_extended_reads_sonames_and_needed_from_real_elf(tmp_path: Path) -> None:
    """Real gcc output: SONAME and NEEDED come from the dynamic section of streamed members."""
    tree = tmp_path / top("libdemo")
    lib = compile_shared(tree / "lib", "libdemo.so.1.2", "int demo(void) { return 1; }\n",
                         soname="libdemo.so.1", needed_libs=["libhelper.so.7"])
    (tree / "lib/libdemo.so.1").symlink_to("libdemo.so.1.2")
    compile_executable(tree / "bin", "demo", "int demo(void);\nint main(void) { return demo(); }\n",
                       needed_libs=[lib])
    (tree / "include").mkdir()
    (tree / "include/demo.h").write_text("int demo(void);\n")
    tarball = write_tarball(tree, tmp_path, "xz")

    got = features_of(tarball, extended=True)
    assert got.outputs(extended=True) == dict(bin=True, dev=True, doc=False, lib=True,
                                              sample=False, static=False, include=True,
                                              python=False, stubs=False)
    assert got.sonames == ("libdemo.so.1",)
    assert {"libdemo.so.1", "libhelper.so.7", "libc.so.6"} <= set(got.needed)
    assert got.problems == ()
    assert features_of(tarball).sonames == ()  # the basic scan never parses ELF


def test_damaged_elf_member_is_a_problem_not_a_failure(tmp_path: Path) -> None:
    tarball = write_tar(tmp_path, top("cuda_bad"), [
        file("lib/libbad.so.1", ELF_BROKEN), file("include/a.h")])
    got = features_of(tarball, extended=True)
    assert got.lib and got.dev
    assert len(got.problems) == 1 and "lib/libbad.so.1" in got.problems[0]


def test_default_demo_tarball(redist_tree: Path, tmp_path: Path) -> None:
    """The builders' full demo package has every output; its host tree vendors Qt."""
    got = features_of(write_tarball(redist_tree, tmp_path, "xz"), extended=True)
    assert all(got.outputs(extended=True).values())
    assert {"libdemo.so.12", "libQt6Core.so.6", "libtarget.so"} <= set(got.sonames)
    assert "libdemo.so.12" in got.needed


def test_windows_zip(tmp_path: Path) -> None:
    name = top("cuda_cudart", "windows-x86_64")
    path = tmp_path / f"{name}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/bin/cudart64_12.dll", b"MZ\x90\x00")
        archive.writestr(f"{name}/include/cuda_runtime.h", b"#pragma once\n")
        archive.writestr(f"{name}/lib/x64/cudart.lib", b"!<arch>\n")
    # Same flags as NVIDIA's feature_12.2.2.json for cuda_cudart/windows-x86_64.
    assert features_of(path).outputs() == dict(bin=True, dev=True, doc=False, lib=False,
                                               sample=False, static=False)


# -- whole manifests --------------------------------------------------------------------------


@pytest.fixture
def release(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """Test tarballs for three packages (cuDNN with cuda variants), a manifest with their real
    sha256/size naming one more that is absent, and the expected feature manifest."""
    tarballs = tmp_path / "tarballs"
    tarballs.mkdir()
    manifest: dict[str, Any] = {"release_date": "2023-08-29", "release_label": "12.2.2",
                                "release_product": "cuda"}
    expected: dict[str, Any] = {}
    for pname in ("cuda_nvcc", "cuda_cupti"):
        entries, flags = PACKAGES[pname]
        path = write_tar(tarballs, top(pname), entries)
        manifest[pname] = {"name": pname, "version": "12.2.140",
                           "linux-x86_64": _entry(f"{pname}/linux-x86_64/{path.name}", path)}
        expected[pname] = {"linux-x86_64": {"outputs": flags}}
    manifest["cuda_nvcc"]["linux-sbsa"] = {  # absent from the directory
        "relative_path": "cuda_nvcc/linux-sbsa/" + top("cuda_nvcc", "linux-sbsa") + ".tar.xz",
        "sha256": "0" * 64, "size": "10"}
    cudnn = write_tar(tarballs, top("cudnn", version="9.8.0.87", suffix="_cuda12"), [
        file("include/cudnn.h"), file("lib/libcudnn.so.9"), file("lib/libcudnn_static.a")])
    manifest["cudnn"] = {"name": "cuDNN", "version": "9.8.0.87", "cuda_variant": ["11", "12"],
                         "linux-x86_64": {
                             "cuda11": {"relative_path": "cudnn/x/cudnn-cuda11.tar.xz",
                                        "sha256": "1" * 64, "size": "1"},
                             "cuda12": _entry(f"cudnn/linux-x86_64/{cudnn.name}", cudnn)}}
    expected["cudnn"] = {"linux-x86_64": {"cuda12": {"outputs": dict(
        bin=False, dev=True, doc=False, lib=True, sample=False, static=True)}}}
    manifest_path = tmp_path / "redistrib_12.2.2.json"
    manifest_path.write_text(json.dumps(manifest, indent=4))
    return manifest_path, tarballs, expected


def _entry(rel: str, path: Path) -> dict[str, str]:
    data = path.read_bytes()
    return {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}


@pytest.mark.parametrize("executor", ["thread", "process", "auto"])
def test_manifest_features_and_missing(release: tuple[Path, Path, dict[str, Any]],
                                       executor: str) -> None:
    manifest_path, tarballs, expected = release
    report = features_for_manifest(load_manifest(manifest_path), tarballs, jobs=2,
                                   executor=executor)
    assert report.feature_manifest() == expected
    missing = sorted(r.artifact.label for r in report.with_status(FeatureStatus.MISSING))
    assert missing == ["cuda_nvcc/linux-sbsa", "cudnn/linux-x86_64/cuda11"]
    assert not report.complete


def test_manifest_features_selection(release: tuple[Path, Path, dict[str, Any]]) -> None:
    manifest_path, tarballs, _ = release
    report = features_for_manifest(load_manifest(manifest_path), tarballs,
                                   platforms=["linux-x86_64"], cuda_variants=["12"])
    assert report.complete and len(report.results) == 3


def test_corrupt_tarball_is_an_error_result(release: tuple[Path, Path, dict[str, Any]]) -> None:
    manifest_path, tarballs, _ = release
    victim = next(tarballs.glob("cuda_cupti-*"))
    victim.write_bytes(victim.read_bytes()[:-40])
    report = features_for_manifest(load_manifest(manifest_path), tarballs,
                                   platforms=["linux-x86_64"], cuda_variants=["12"])
    (error,) = report.with_status(FeatureStatus.ERROR)
    assert error.artifact.package == "cuda_cupti" and victim.name in (error.detail or "")
    assert "cuda_cupti" not in report.feature_manifest()


def test_json_bytes_match_nvidia_feature_manifest_format() -> None:
    reference = (REFERENCE / "feature_12.2.2.json").read_text()
    assert dump_feature_json(json.loads(reference)) == reference


def test_extended_entry_shape() -> None:
    entry = Features(lib=True, include=True, sonames=("libx.so.1",),
                     needed=("libc.so.6",)).entry(extended=True)
    assert list(entry) == ["outputs", "sonames", "needed"]
    assert sorted(entry["outputs"]) == ["bin", "dev", "doc", "include", "lib", "python",
                                        "sample", "static", "stubs"]
    assert Features().entry() == {"outputs": dict.fromkeys(
        ["bin", "dev", "doc", "lib", "sample", "static"], False)}


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_features_writes_file_and_reports_missing(
        release: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    manifest_path, tarballs, expected = release
    out = tmp_path / "feature_12.2.2.json"
    code, stdout, stderr = invoke("features", str(manifest_path), "--tarballs", str(tarballs),
                                  "-o", str(out), "-j", "2")
    assert code == 1 and stdout == ""
    assert out.read_text() == dump_feature_json(expected)
    assert ("cudasplit: problem: cuda_nvcc/linux-sbsa: no tarball "
            "cuda_nvcc-linux-sbsa-12.2.140-archive.tar.xz [tarball-missing]") in stderr
    code, stdout, stderr = invoke("features", str(manifest_path), "--tarballs", str(tarballs),
                                  "--platform", "linux-x86_64", "--cuda-variant", "cuda12",
                                  "--extended")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["cudnn"]["linux-x86_64"]["cuda12"]["outputs"]["include"] is True
    assert data["cuda_nvcc"]["linux-x86_64"]["sonames"] == []
