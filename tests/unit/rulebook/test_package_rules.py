"""The shipped rules/packages/*.toml: each loads, and places what redist-and-nix.md §4 says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudasplit import Kind, inspect
from cudasplit._rulebook import RuleSet, default_rules_dir, load_ruleset
from cudasplit._split.pipeline import SplitOptions, fallback_output
from tests.support.paths import REPO
from tests.support.tarutil import write_archive

PACKAGE_FILES = sorted((default_rules_dir() / "packages").glob("*.toml"))
ELF = b"\x7fELF\x02\x01\x01" + bytes(57)


def where(ruleset: RuleSet, path: str, kind: Kind = Kind.FILE) -> str | None:
    """Final output of ``path`` (archive path, top dir stripped); None when dropped."""
    lifted = ruleset.package.lift_path(path)
    assert lifted is not None
    dest, _ = ruleset.normalise(lifted)
    decision = ruleset.classify(dest, kind)
    if decision.output is None:
        return None
    declared = ruleset.package.outputs
    allowed = None if declared is None else frozenset(declared) | {"out"}
    return fallback_output(ruleset.classify(dest, kind, allowed).output or "out", allowed)


def test_every_listed_package_has_a_file() -> None:
    names = {p.stem for p in PACKAGE_FILES}
    assert {"cuda_cudart", "cuda_nvcc", "cuda_compat", "libcublas", "cudnn", "nsight_systems",
            "nsight_compute", "tensorrt", "cuda_cupti", "cuda_nvml_dev"} <= names


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=lambda p: p.stem)
def test_package_file_loads_on_top_of_the_default(path: Path) -> None:
    ruleset = load_ruleset(path.stem)
    assert ruleset.files[0] == str(path)
    assert all(rule.ref.file in (path.name, "default.toml") for rule in ruleset.rules)


def test_cuda_cudart() -> None:
    rs = load_ruleset("cuda_cudart")
    assert rs.package.outputs == ("out",)  # Nixpkgs: single output (cuda_cudart.nix)
    # Only the SONAME link, inside lib/stubs (Nixpkgs' postInstall; #293320).
    assert dict(rs.package.stub_links) == {"lib/stubs/libcuda.so.1": "libcuda.so"}
    assert any(e.driver_rpath and e.drop_cudaroot for e in rs.package.pkgconfig_edits)
    assert [g.pattern for g in rs.package.pkgconfig_stubs_libdir] == ["cuda-*.pc"]
    for path, kind in [("lib/libcudart.so.12.9.79", Kind.ELF_SHARED),
                       ("lib/libcudart_static.a", Kind.STATIC),
                       ("lib/stubs/libcuda.so", Kind.ELF_SHARED),
                       ("include/cuda_runtime.h", Kind.FILE),
                       ("pkg-config/cudart-12.9.pc", Kind.FILE)]:
        assert where(rs, path, kind) == "out", path


def test_cuda_nvcc_is_one_output() -> None:
    rs = load_ruleset("cuda_nvcc")
    assert rs.package.outputs == ("out",)
    for path, kind in [("bin/nvcc", Kind.ELF_EXEC), ("bin/nvcc.profile", Kind.FILE),
                       ("nvvm/bin/cicc", Kind.ELF_EXEC), ("include/crt/host_config.h", Kind.FILE),
                       ("lib/libnvptxcompiler_static.a", Kind.STATIC),
                       ("nvvm/lib64/libnvvm.so.4.0.0", Kind.ELF_SHARED), ("LICENSE", Kind.FILE)]:
        assert where(rs, path, kind) == "out", path
    assert rs.normalise("nvvm/lib64/libnvvm.so")[0] == "nvvm/lib/libnvvm.so"
    assert rs.classify("bin/nvcc.profile", Kind.FILE).rule_obj.transform == "nvcc-profile"


def test_cuda_compat() -> None:
    rs = load_ruleset("cuda_compat")
    assert rs.package.cuda_compat and rs.package.outputs == ("out",)
    assert where(rs, "compat/libcuda.so.535.104.05", Kind.ELF_SHARED) == "out"


def test_libraries_with_fixed_outputs() -> None:
    cublas, cudnn = load_ruleset("libcublas"), load_ruleset("cudnn")
    assert where(cublas, "lib/stubs/libcublas.so", Kind.ELF_SHARED) == "stubs"
    assert where(cublas, "src/fortran.c") == "out"
    assert "stubs" not in (cudnn.package.outputs or ())
    assert where(cudnn, "lib/libcudnn.so.9", Kind.ELF_SHARED) == "lib"
    assert where(cudnn, "include/cudnn.h") == "include"
    cupti = load_ruleset("cuda_cupti")
    assert where(cupti, "samples/callback_event/Makefile") == "samples"
    assert where(cupti, "lib/libcupti_static.a", Kind.STATIC) == "static"


def test_cuda_nvml_dev() -> None:
    rs = load_ruleset("cuda_nvml_dev")
    assert dict(rs.package.stub_links) == {"lib/stubs/libnvidia-ml.so.1": "libnvidia-ml.so",
                                           "lib/stubs/libnvidia-ml.a.1": "libnvidia-ml.a"}
    assert where(rs, "lib/stubs/libnvidia-ml.so", Kind.ELF_SHARED) == "stubs"
    assert where(rs, "include/nvml.h") == "include"
    assert where(rs, "pkg-config/nvidia-ml-12.2.pc") == "dev"


@pytest.mark.parametrize("path", [
    "host-linux-x64/libssl.so.3", "host-linux-x64/libcrypto.so.3", "host-linux-x64/libssh.so.4",
    "host-linux-x64/libboost_filesystem.so.1.78.0", "host-linux-x64/libstdc++.so.6",
    "host-linux-x64/libarrow.so.1500", "host-linux-x64/libjpeg.so.8",
    "host-linux-x64/Mesa/libGL.so.1", "host-linux-x64/python/bin/python",
    "host-linux-x64/libexec/QtWebEngineProcess", "host-linux-armv8/libssl.so.3",
    "nsight-systems/2024.5.1/host-linux-x64/libssl.so.3",
])
def test_nsight_systems_drops_vendored(path: str) -> None:
    assert where(load_ruleset("nsight_systems"), path, Kind.ELF_SHARED) is None


def test_nsight_systems_keeps_host_and_target_whole() -> None:
    rs = load_ruleset("nsight_systems")
    for path in ["host-linux-x64/libQt6Core.so.6", "host-linux-x64/nsys-ui.bin",
                 "host-linux-x64/python/lib/python3.10/os.py", "host-linux-x64/include/x.h",
                 "target-linux-x64/nsys", "target-linux-x64/libcupti.so.2025.1",
                 "target-linux-x64/libtarget_static.a", "bin/nsys", "LICENSE"]:
        assert where(rs, path, Kind.ELF_SHARED if ".so" in path else Kind.FILE) == "out", path


def test_nsight_systems_end_to_end(tmp_path: Path) -> None:
    """Nested release layout: lifted, vendored OpenSSL gone, everything else in out."""
    top = "nsight_systems-linux-x86_64-2024.5.1.113-archive"
    entries = [("dir", "nsight-systems"), ("dir", "nsight-systems/2024.5.1"),
               ("file", "nsight-systems/2024.5.1/host-linux-x64/libssl.so.3", ELF),
               ("file", "nsight-systems/2024.5.1/host-linux-x64/libQt6Core.so.6", ELF),
               ("file", "nsight-systems/2024.5.1/target-linux-x64/nsys", ELF),
               ("file", "nsight-systems/2024.5.1/bin/nsys", b"#!/bin/sh\n")]
    archive = write_archive(tmp_path / f"{top}.tar", entries, "none", top=top)
    report = inspect(archive, SplitOptions())
    placed = {m.path: (m.output, m.dest) for m in report.members if m.kind != "dir"}
    base = "nsight-systems/2024.5.1/"
    assert placed[base + "host-linux-x64/libssl.so.3"][0] is None
    assert placed[base + "host-linux-x64/libQt6Core.so.6"] == ("out",
                                                               "host-linux-x64/libQt6Core.so.6")
    assert placed[base + "target-linux-x64/nsys"] == ("out", "target-linux-x64/nsys")
    assert placed[base + "bin/nsys"] == ("out", "bin/nsys")


def test_nsight_compute() -> None:
    rs = load_ruleset("nsight_compute")
    assert rs.package.outputs == ("out", "doc")
    assert where(rs, "nsight-compute/2024.3.0/docs/index.html") == "doc"
    assert where(rs, "host/linux-desktop-glibc_2_11_3-x64/Mesa/libGL.so.1") is None
    assert where(rs, "target/qnx-t194-a64/libTarget.so", Kind.ELF_SHARED) is None
    assert where(rs, "host/linux-desktop-glibc_2_11_3-x64/ncu-ui.bin", Kind.ELF_EXEC) == "out"
    assert where(rs, "target/linux-desktop-glibc_2_11_3-x64/libTarget.a", Kind.STATIC) == "out"


def test_tensorrt() -> None:
    rs = load_ruleset("tensorrt")
    assert where(rs, "bin", Kind.SYMLINK) is None and where(rs, "lib", Kind.SYMLINK) is None
    assert rs.normalise("targets/x86_64-linux-gnu/lib/libnvinfer.so.10")[0] == \
        "lib/libnvinfer.so.10"
    assert where(rs, "targets/x86_64-linux-gnu/lib/libnvinfer.so.10", Kind.ELF_SHARED) == "lib"
    assert where(rs, "targets/aarch64-linux-gnu/bin/trtexec", Kind.ELF_EXEC) == "bin"
    assert where(rs, "targets/x86_64-linux-gnu/lib/stubs/libnvinfer.so", Kind.ELF_SHARED) is None
    assert where(rs, "python/tensorrt-10.3.0-cp311-none-linux_x86_64.whl") is None
    assert where(rs, "include/NvInfer.h") == "include"


HOOK = REPO / "cudasplit" / "nix" / "setup-hook.sh"


def _run_hook(env_lines: str) -> tuple[list[str], dict[str, str]]:
    """Source the setup hook with a fake cudasplit that prints its arguments, one per line."""
    script = (f"set -euo pipefail\nrunHook() {{ :; }}\n{env_lines}\n"
              f"cudasplitCommand='printf %s\\n'\nsource {HOOK}\n"
              "for v in dontUnpack dontPatchELF dontStrip; do echo \"@$v=${!v-unset}\"; done\n"
              "cudasplitInstallPhase\n")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "src": "/src.tar.xz"})
    lines = done.stdout.splitlines()
    settings = dict(line[1:].split("=", 1) for line in lines if line.startswith("@"))
    return [line for line in lines if not line.startswith("@")], settings


def test_setup_hook_variables_become_flags() -> None:
    args, settings = _run_hook(
        "NIX_BUILD_CORES=3\ncudaMajorMinorVersion=12.9\n"
        "cudasplitPackageRoots='cuda_nvrtc=/nix/store/a-nvrtc cuda_cccl=/nix/store/b-cccl'\n"
        "cudasplitIgnoreMissing='libcuda.so.1 libnvidia-ml.so.1'\n"
        "cudasplitInterpreter=/nix/store/c-glibc/lib/ld-linux-x86-64.so.2\n"
        "cudasplitLibraryPath=/nix/store/d-gcc/lib\ncudasplitCheckFhsRefs=1")
    joined = " ".join(args)
    assert args[:2] == ["split", "/src.tar.xz"]
    for expected in ("--jobs 3", "--cuda-version 12.9", "--check-fhs-refs",
                     "--package-root cuda_nvrtc=/nix/store/a-nvrtc",
                     "--package-root cuda_cccl=/nix/store/b-cccl",
                     "--ignore-missing libcuda.so.1", "--ignore-missing libnvidia-ml.so.1",
                     "--interpreter /nix/store/c-glibc/lib/ld-linux-x86-64.so.2",
                     "--library-path /nix/store/d-gcc/lib"):
        assert expected in joined, joined
    assert settings == {"dontUnpack": "1", "dontPatchELF": "1", "dontStrip": "1"}


def test_setup_hook_sets_phases_only_where_needed() -> None:
    args, settings = _run_hook("NIX_BUILD_CORES=0\ncudasplitNoPatch=1\ncudasplitSource=$PWD")
    assert "--jobs" not in args and "--no-patch" in args
    assert settings == {"dontUnpack": "unset", "dontPatchELF": "unset", "dontStrip": "unset"}
    _args, settings = _run_hook("installPhase=myInstall")
    assert settings == {"dontUnpack": "unset", "dontPatchELF": "unset", "dontStrip": "unset"}


@pytest.mark.parametrize(("pname", "allowed"), [("cuda_cudart", False), ("cuda_nvcc", True)])
def test_check_fhs_refs_fails_unless_the_package_allows_it(tmp_path: Path, pname: str,
                                                           allowed: bool) -> None:
    from cudasplit import SplitOptions, split_to_dir
    from cudasplit.errors import ProblemsFound

    top = tmp_path / f"{pname}-linux-x86_64-12.9.79-archive"
    (top / "include").mkdir(parents=True)
    (top / "include/a.h").write_text("/* see /usr/include/stdio.h */\n")
    (top / "LICENSE").write_text("mentions /usr/share/doc, which is fine in a LICENSE\n")
    options = SplitOptions(check_fhs_refs=True, patch=False)
    if allowed:
        split_to_dir(top, tmp_path / "out", options)
        return
    with pytest.raises(ProblemsFound, match="/usr/"):
        split_to_dir(top, tmp_path / "out", options)
    (top / "include/a.h").write_text("/* nothing */\n")
    split_to_dir(top, tmp_path / "out2", options)  # only LICENSE mentions /usr/: fine


def test_platform_option_decides_gated_outputs(tmp_path: Path) -> None:
    """cuda_cupti has static archives on linux-x86_64 only (and sbsa >= 12.6): with
    --platform aarch64-linux:8.7 on CUDA 12.9 (a Jetson: linux-aarch64) static is not declared,
    so its .a files stay in lib (positional fallback) and no empty static output is made."""
    from click.testing import CliRunner

    from cudasplit.cli import main

    top = tmp_path / "cuda_cupti-linux-x86_64-12.9.79-archive"
    (top / "lib").mkdir(parents=True)
    (top / "lib/libcupti_static.a").write_bytes(b"!<arch>\n")
    (top / "LICENSE").write_text("x\n")
    for platform, static_in in (("x86_64-linux", "static"), ("aarch64-linux:8.7", "lib"),
                                ("aarch64-linux:9.0", "static")):  # sbsa >= 12.6
        out = tmp_path / platform.replace(":", "_")
        done = CliRunner().invoke(main, ["split", str(top), "-o", str(out), "--no-patch", "-q",
                                         "--cuda-version", "12.9", "--platform", platform])
        assert done.exit_code == 0, done.output
        assert (out / static_in / "lib/libcupti_static.a").is_file(), platform
        assert (out / "static").exists() == (static_in == "static")


def test_manifest_platform_words_resolve_jetson_builds() -> None:
    from cudasplit._release.manifest import parse_manifest, resolve_platforms

    manifest = parse_manifest({"release_label": "12.9.1"})
    assert resolve_platforms(["aarch64-linux:8.7"], manifest) == {"linux-aarch64"}
    assert resolve_platforms(["aarch64-linux:9.0"], manifest) == {"linux-sbsa"}
    manifest13 = parse_manifest({"release_label": "13.2.2"})
    assert resolve_platforms(["aarch64-linux:8.7"], manifest13) == {"linux-sbsa"}


def test_cudart_13_pc_names_crt_and_cccl(tmp_path: Path) -> None:
    """CUDA 13 moved crt/ and CCCL out of the runtime's reach: cudart-13.0.pc's Cflags gain
    their include dirs (from --package-root); on 12.9 nothing is added."""
    from cudasplit import SplitOptions, split_to_dir
    from tests.support.builders import pkgconfig_text

    roots = (("cuda_crt", "/nix/store/c-crt"), ("cuda_cccl", "/nix/store/d-cccl"))
    for version, mm in (("13.0.96", "13.0"), ("12.9.79", "12.9")):
        top = tmp_path / f"cuda_cudart-linux-x86_64-{version}-archive"
        (top / "pkg-config").mkdir(parents=True)
        (top / f"pkg-config/cudart-{mm}.pc").write_text(
            pkgconfig_text("cudart", "CUDA Runtime", mm, "x86_64-linux", "-lcudart"))
        split_to_dir(top, tmp_path / mm, SplitOptions(package_roots=roots, patch=False))
        text = (tmp_path / mm / f"out/share/pkgconfig/cudart-{mm}.pc").read_text()
        cflags = next(line for line in text.splitlines() if line.startswith("Cflags:"))
        added = "-I/nix/store/c-crt/include -I/nix/store/d-cccl/include"
        assert (added in cflags) == (mm == "13.0"), cflags
        assert "cudaroot" not in text and "-Wl,-rpath,/run/opengl-driver/lib" in text
