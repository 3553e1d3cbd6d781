"""The split loop with the memory sink (fast, no gcc) and the directory sink."""

from pathlib import Path

import pytest

from cudasplit import MemorySink, ProblemsFound, SplitOptions, split, split_to_dir
from cudasplit._split.pipeline import fallback_output
from cudasplit.errors import OutputError
from tests.support.tarutil import write_archive

ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00" + b"\0" * 200  # ET_DYN header start
PC = b"""cudaroot=/usr/local/cuda-12.9
libdir=${cudaroot}/targets/x86_64-linux/lib
includedir=${cudaroot}/targets/x86_64-linux/include

Name: cudart
Version: 12.9
Libs: -L${libdir} -lcudart
Cflags: -I${includedir}
"""

ENTRIES = [
    ("dir", "lib"),
    ("symlink", "lib/libdemo.so", "libdemo.so.12"),  # link before its target, like real tarballs
    ("symlink", "lib/libdemo.so.12", "libdemo.so.12.9.79"),
    ("file", "lib/libdemo.so.12.9.79", ELF),
    ("file", "lib/libdemo_static.a", b"!<arch>\n" + b"x" * 10),
    ("file", "lib/stubs/libcuda.so", ELF),
    ("symlink", "lib/stubs/libcuda.so.1", "libcuda.so"),
    ("file", "lib/stubs/libextra.a", b"!<arch>\n"),
    ("file", "lib/x64/libnested.a", b"!<arch>\n"),
    ("symlink", "lib/libcuda.so", "stubs/libcuda.so"),  # a lib/ link into stubs
    ("file", "include/crt/host_defines.h", b"#pragma once\n"),
    ("symlink", "include/target", "../lib"),  # a dir symlink whose target spans outputs
    ("file", "pkg-config/cudart-12.9.pc", PC),
    ("file", "bin/tool", b"#!/bin/sh\n"),
    ("hardlink", "bin/tool-again", "bin/tool"),
    ("file", "LICENSE", b"license"),
    ("symlink", "dangling", "does/not/exist"),
]


def run(tmp_path: Path, options: SplitOptions | None = None, entries=ENTRIES):  # type: ignore[no-untyped-def]
    archive = write_archive(tmp_path / "a.tar.xz", entries)
    sink = MemorySink()
    report = split(archive, sink, options or SplitOptions(patch=False))
    return sink, report


def test_members_land_in_their_outputs(tmp_path: Path) -> None:
    _sink, report = run(tmp_path)
    placed = {(m.path, m.output) for m in report.members}
    assert ("lib/libdemo.so.12.9.79", "lib") in placed
    assert ("lib/libdemo_static.a", "static") in placed
    assert ("lib/stubs/libcuda.so", "stubs") in placed
    assert ("lib/stubs/libextra.a", "stubs") in placed  # the whole stubs dir, as Nixpkgs
    assert ("lib/x64/libnested.a", "static") in placed
    assert ("include/crt/host_defines.h", "include") in placed
    assert ("pkg-config/cudart-12.9.pc", "dev") in placed
    assert ("LICENSE", "out") in placed
    assert report.member("pkg-config/cudart-12.9.pc").dest == "share/pkgconfig/cudart-12.9.pc"
    assert report.member("lib/libdemo.so.12.9.79").kind == "elf-shared"
    assert report.member("lib/libdemo_static.a").kind == "static"


def test_symlinks_follow_their_targets(tmp_path: Path) -> None:
    sink, report = run(tmp_path)
    assert sink.symlinks[("lib", "lib/libdemo.so")] == "libdemo.so.12"
    assert sink.symlinks[("lib", "lib/libdemo.so.12")] == "libdemo.so.12.9.79"
    # lib/libcuda.so points into stubs: it goes with the stub, so the lib output never
    # exposes a stub libcuda (nixpkgs#293320) and nothing dangles (nixpkgs#370750).
    assert ("lib", "lib/libcuda.so") not in sink.symlinks
    assert sink.symlinks[("stubs", "lib/libcuda.so")] == "stubs/libcuda.so"
    assert report.member("lib/libcuda.so").output == "stubs"
    assert report.member("lib/libcuda.so").rule == "<builtin>:follow-target"


def test_directory_symlink_is_repeated_in_every_output_holding_its_target(tmp_path: Path) -> None:
    sink, _ = run(tmp_path)
    holders = {out for (out, dest) in sink.symlinks if dest == "include/target"}
    assert holders == {"lib", "static", "stubs"}


def test_dangling_symlink_is_a_problem_and_skipped(tmp_path: Path) -> None:
    sink, report = run(tmp_path)
    assert not any(dest == "dangling" for (_o, dest) in sink.symlinks)
    assert [p.code for p in report.problems] == ["dangling-symlink"]
    with pytest.raises(ProblemsFound):
        run(tmp_path, SplitOptions(patch=False, strict=True))


def test_hardlink_in_same_output(tmp_path: Path) -> None:
    sink, report = run(tmp_path)
    assert sink.hardlinks[("bin", "bin/tool-again")] == ("bin", "bin/tool")
    assert report.member("bin/tool-again").kind == "hardlink"


def test_pkgconfig_rewrite_and_alias(tmp_path: Path) -> None:
    sink, _ = run(tmp_path)
    text = sink.files[("dev", "share/pkgconfig/cudart-12.9.pc")].decode()
    assert "cudaroot=/cudasplit-memory/dev" in text
    assert "libdir=/cudasplit-memory/lib/lib" in text
    assert "includedir=/cudasplit-memory/include/include" in text
    assert "Libs: -L${libdir} -lcudart" in text
    assert sink.symlinks[("dev", "share/pkgconfig/cudart.pc")] == "cudart-12.9.pc"


def test_limited_outputs_fall_back_like_nixpkgs(tmp_path: Path) -> None:
    sink, report = run(tmp_path, SplitOptions(patch=False, outputs=("lib", "dev")))
    assert report.member("include/crt/host_defines.h").output == "dev"
    assert report.member("lib/libdemo_static.a").output == "lib"  # positional
    assert report.member("bin/tool").output == "out"
    assert set(sink.outputs()) == {"out", "lib", "dev"}
    text = sink.files[("dev", "share/pkgconfig/cudart-12.9.pc")].decode()
    assert "includedir=/cudasplit-memory/dev/include" in text


@pytest.mark.parametrize(
    ("output", "allowed", "expected"),
    [("include", {"dev"}, "dev"), ("include", {"lib"}, "out"), ("static", {"lib"}, "out"),
     ("lib", None, "lib"), ("stubs", {"stubs"}, "stubs")],
)
def test_fallback_output(output: str, allowed: set[str] | None, expected: str) -> None:
    assert fallback_output(output, None if allowed is None else frozenset(allowed)) == expected


def test_strict_fails_on_empty_requested_output(tmp_path: Path) -> None:
    entries = [e for e in ENTRIES if e[1] != "dangling"]
    with pytest.raises(ProblemsFound, match="output 'samples' received no files"):
        run(tmp_path, SplitOptions(patch=False, strict=True, outputs=("lib", "samples"),
                                   default_rules=True), entries)
    _, report = run(tmp_path, SplitOptions(patch=False, strict=True, default_rules=True), entries)
    assert report.problems == []


def test_lib64_is_merged_with_a_link_back(tmp_path: Path) -> None:
    entries = [("file", "lib64/libx.so.1", ELF), ("file", "lib/liby.so.1", ELF),
               ("symlink", "lib64/libx.so", "libx.so.1")]
    sink, report = run(tmp_path, entries=entries)
    assert ("lib", "lib/libx.so.1") in sink.files
    assert sink.symlinks[("lib", "lib/libx.so")] == "libx.so.1"
    assert sink.symlinks[("lib", "lib64")] == "lib"
    assert report.member("lib64/libx.so.1").dest == "lib/libx.so.1"


def test_directory_sink_stages_then_moves(tmp_path: Path) -> None:
    entries = [e for e in ENTRIES if e[1] != "dangling"]
    archive = write_archive(tmp_path / "a.tar.zst", entries, "zst")
    out = tmp_path / "out"
    report = split_to_dir(archive, out, SplitOptions(patch=False))
    assert sorted(p.name for p in out.iterdir()) == sorted(report.outputs)
    assert (out / "lib/lib/libdemo.so").resolve() == (out / "lib/lib/libdemo.so.12.9.79")
    assert (out / "stubs/lib/libcuda.so").resolve() == (out / "stubs/lib/stubs/libcuda.so")
    assert (out / "bin/bin/tool-again").stat().st_ino == (out / "bin/bin/tool").stat().st_ino
    for link in out.rglob("*"):
        if link.is_symlink():
            assert link.exists(), f"dangling {link}"
    assert report.outputs["lib"].directory == str(out / "lib")
    with pytest.raises(OutputError, match="already exists"):
        split_to_dir(archive, out, SplitOptions(patch=False))
    split_to_dir(archive, out, SplitOptions(patch=False, overwrite=True))
    assert not list(out.glob(".cudasplit-staging-*"))


def test_failed_split_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "bad.tar.xz"
    good = write_archive(tmp_path / "g.tar", ENTRIES, "none").read_bytes()
    import lzma
    archive.write_bytes(lzma.compress(good)[:-200])
    out = tmp_path / "out"
    with pytest.raises(Exception):  # noqa: B017 - the exact error is tested in test_sources
        split_to_dir(archive, out, SplitOptions(patch=False))
    assert not out.exists()  # created by the run, removed again since it stayed empty
    out.mkdir()
    (out / "mine").write_text("kept")
    with pytest.raises(Exception):  # noqa: B017
        split_to_dir(archive, out, SplitOptions(patch=False))
    assert [p.name for p in out.iterdir()] == ["mine"]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", ENTRIES)
    out = tmp_path / "out"
    report = split_to_dir(archive, out, SplitOptions(patch=False, dry_run=True))
    assert not out.exists()
    assert report.dry_run
    assert report.member("lib/libdemo.so.12.9.79").output == "lib"


def test_cuda_major_dirs_are_lifted_and_others_dropped(tmp_path: Path) -> None:
    entries = [("file", "lib/12/libcutensor.so.2", ELF), ("file", "lib/11/libcutensor.so.2", ELF),
               ("symlink", "lib/12/libcutensor.so", "libcutensor.so.2"),
               ("file", "include/cutensor.h", b"")]
    archive = write_archive(tmp_path / "a.tar.xz", entries,
                            top="libcutensor-linux-x86_64-2.2.0.0_cuda12-archive")
    sink = MemorySink()
    report = split(archive, sink, SplitOptions(patch=False))
    assert report.package["cuda_variant"] == "12"
    assert ("lib", "lib/libcutensor.so.2") in sink.files
    assert sink.symlinks[("lib", "lib/libcutensor.so")] == "libcutensor.so.2"
    dropped = report.member("lib/11/libcutensor.so.2")
    assert dropped.output is None and "CUDA 11" in (dropped.note or "")
    sink = MemorySink()
    split(archive, sink, SplitOptions(patch=False, cuda_major="11"))
    assert ("lib", "lib/libcutensor.so.2") in sink.files
    assert not any(dest.startswith("lib/12") for (_o, dest) in sink.files)


def test_package_lift_stub_links_and_pc_extras(tmp_path: Path) -> None:
    rules = tmp_path / "pkg.toml"
    rules.write_text("""
[package]
lift = ["nsight-systems/*/"]
stub_links = { "lib/stubs/libcuda.so.1" = "libcuda.so" }
pkgconfig_driver_rpath = true
pkgconfig_stubs_libdir = ["cuda-*.pc"]
""")
    entries = [("dir", "nsight-systems"), ("dir", "nsight-systems/2025.1"),
               ("file", "nsight-systems/2025.1/host-linux-x64/nsys-ui", b"x"),
               ("file", "lib/stubs/libcuda.so", ELF),
               ("file", "pkg-config/cuda-12.9.pc", PC), ("file", "pkg-config/cudart-12.9.pc", PC)]
    sink = MemorySink()
    report = split(write_archive(tmp_path / "a.tar", entries, "none"), sink,
                   SplitOptions(patch=False, rules_files=(str(rules),)))
    assert report.member("nsight-systems/2025.1/host-linux-x64/nsys-ui").dest == "host-linux-x64/nsys-ui"
    assert sink.symlinks[("stubs", "lib/stubs/libcuda.so.1")] == "libcuda.so"
    cuda_pc = sink.files[("dev", "share/pkgconfig/cuda-12.9.pc")].decode()
    cudart_pc = sink.files[("dev", "share/pkgconfig/cudart-12.9.pc")].decode()
    assert "libdir=/cudasplit-memory/stubs/lib/stubs" in cuda_pc
    assert "libdir=/cudasplit-memory/lib/lib" in cudart_pc
    assert "Libs: -L${libdir} -lcudart -Wl,-rpath,/run/opengl-driver/lib" in cudart_pc
