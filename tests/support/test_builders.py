"""The builders produce what they claim: real ELF files, resolvable link chains, real ar
archives, tarballs of every compression in NVIDIA's member order, and the expected-output
table matching the tree."""

from __future__ import annotations

import os
import platform
import stat
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.builders import (
    COMPRESSIONS,
    EXPECTED_DEFAULT,
    FIXED_MTIME,
    Compression,
    build_large_tarball,
    build_redist_tree,
    classify_default,
    compile_shared,
    dynamic_entries,
    expected_outputs,
    have_compiler,
    is_elf,
    parse_reference_list,
    tar_members,
    write_tarball,
    xz_block_count,
)
from tests.support.paths import REPO

NATIVE_X86 = platform.machine() == "x86_64"

# --------------------------------------------------------------------------------------------
# The expected-output table
# --------------------------------------------------------------------------------------------


def test_expected_outputs_of_default_tree_match_the_hand_written_table(redist_tree: Path) -> None:
    assert expected_outputs(redist_tree) == dict(EXPECTED_DEFAULT)


@pytest.mark.parametrize(
    ("path", "output"),
    [
        ("host-linux-x64/libfoo.a", "bin"),  # host tree beats *.a
        ("target-linux-sbsa-armv8/doc/x.txt", "bin"),
        ("host/linux-desktop-glibc_2_11_3-x64/lib/libx.so", "bin"),  # nsight_compute layout
        ("target/linux-desktop-t210-a64/libx.a", "bin"),
        ("hostile/readme", "out"),  # "host/**" is a whole component
        ("lib/stubs/libcuda_stub_extra.a", "stubs"),  # whole stubs dir
        ("lib/x64/deeper/libnested.a", "static"),
        ("libtop.a", "static"),
        ("lib/stubs/libcuda.so", "stubs"),
        ("stubs/libnvidia-ml.so", "stubs"),
        ("lib/stubs/cuda.pc", "stubs"),  # stubs come before *.pc
        ("pkg-config/cuda-12.9.pc", "dev"),
        ("pkgconfig/nvjpeg.pc", "dev"),
        ("share/pkgconfig/x.pc", "dev"),
        ("lib/pkgconfig/x.pc", "dev"),
        ("extras/CUPTI/x.cmake", "dev"),
        ("lib/cmake/demo/demo-targets.txt", "dev"),
        ("include/crt/host_defines.h", "include"),
        ("lib/libcudart.so.12.9.79", "lib"),
        ("lib/12/libcutensor.so.2", "lib"),
        ("lib64/libextra.so", "lib"),
        ("nvvm/lib64/libnvvm.so", "out"),
        ("bin/nvcc.profile", "bin"),
        ("samples/x/sample.whl", "samples"),  # samples before *.whl
        ("python/demo-12.9-py3-none-any.whl", "python"),
        ("doc/html/index.html", "doc"),
        ("share/doc/x/README", "doc"),
        ("share/man/man1/nvcc.1", "doc"),
        ("share/info/x.info", "doc"),
        ("LICENSE", "out"),
        ("src/fortran.c", "out"),
        ("compat/libcuda.so.1", "out"),
    ],
)
def test_classify_default(path: str, output: str) -> None:
    assert classify_default(path) == output


def test_symlinks_take_their_final_targets_output(tmp_path: Path) -> None:
    top = build_redist_tree(tmp_path, with_cross_symlinks=True)
    expected = expected_outputs(top)
    assert expected["bin/demo-lib"] == "lib"  # -> ../lib/libdemo.so.12.9.79
    assert expected["lib/libcuda.so"] == "stubs"  # -> stubs/libcuda.so
    assert expected["include/crt_compat"] == "include"  # directory symlink


# --------------------------------------------------------------------------------------------
# The tree: real ELF files and archives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "entries"),
    [
        ("lib/libdemo.so.12.9.79", {"SONAME": ["libdemo.so.12"]}),
        (
            "lib/libdemoBlas.so.12.9.79",
            {"SONAME": ["libdemoBlas.so.12"], "RPATH": ["$ORIGIN"]},
        ),
        ("lib/libdemoRtc.so.12.9.79", {"SONAME": ["libdemoRtc.so.12"], "RUNPATH": ["$ORIGIN:"]}),
        ("lib/stubs/libcuda.so", {"SONAME": ["libcuda.so.1"]}),
        ("lib64/libextra.so", {"SONAME": ["libextra.so"]}),
        ("nvvm/lib64/libnvvm.so.4.0.0", {"SONAME": ["libnvvm.so.4"]}),
        ("host-linux-x64/demo-ui.bin", {"RUNPATH": ["$ORIGIN"]}),
        ("target-linux-x64/demo-cli", {"RUNPATH": ["$ORIGIN"]}),
    ],
)
def test_elf_dynamic_sections(redist_tree: Path, path: str, entries: dict[str, list[str]]) -> None:
    actual = dynamic_entries(redist_tree / path)
    for tag, values in entries.items():
        assert actual.get(tag) == values, (path, actual)
    for tag in {"RPATH", "RUNPATH"} - set(entries):
        assert tag not in actual, (path, actual)


def test_needed_entries_point_at_the_packages_own_libraries(redist_tree: Path) -> None:
    assert "libdemo.so.12" in dynamic_entries(redist_tree / "bin/demo")["NEEDED"]
    assert "libdemo.so.12" in dynamic_entries(redist_tree / "lib/libdemoBlas.so.12.9.79")["NEEDED"]
    assert (
        "libQt6Core.so.6" in dynamic_entries(redist_tree / "host-linux-x64/demo-ui.bin")["NEEDED"]
    )


def test_symlink_chains_resolve_to_the_soname_file(redist_tree: Path) -> None:
    lib = redist_tree / "lib"
    for base in ("libdemo", "libdemoBlas", "libdemoRtc"):
        assert os.readlink(lib / f"{base}.so") == f"{base}.so.12"
        assert os.readlink(lib / f"{base}.so.12") == f"{base}.so.12.9.79"
        real = (lib / f"{base}.so").resolve()
        assert real == lib / f"{base}.so.12.9.79" and is_elf(real)
        assert dynamic_entries(real)["SONAME"] == [f"{base}.so.12"]
    host_link = redist_tree / "host-linux-x64/libtarget.so"
    assert os.readlink(host_link) == "../target-linux-x64/libtarget.so"
    assert host_link.resolve() == redist_tree / "target-linux-x64/libtarget.so"


@pytest.mark.skipif(not NATIVE_X86, reason="runs x86_64 binaries")
def test_binaries_run_against_their_own_libraries(redist_tree: Path) -> None:
    demo = subprocess.run(
        [redist_tree / "bin/demo"],
        env={"LD_LIBRARY_PATH": str(redist_tree / "lib")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert demo.stdout == "demo 1\n"
    # RUNPATH=$ORIGIN finds the vendored library without any environment.
    ui = subprocess.run([redist_tree / "host-linux-x64/demo-ui.bin"], env={}, check=False)
    assert ui.returncode == 0


@pytest.mark.parametrize(
    "path",
    [
        "lib/libdemo_static.a",
        "lib/stubs/libcuda_stub_extra.a",
        "lib/x64/libnested.a",
        "host-linux-x64/libhost_helpers.a",
        "target-linux-x64/libtarget_static.a",
    ],
)
def test_static_archives_are_real_ar_archives(redist_tree: Path, path: str) -> None:
    archive = redist_tree / path
    assert archive.read_bytes().startswith(b"!<arch>\n")
    members = subprocess.run(["ar", "t", archive], capture_output=True, text=True, check=True)
    names = members.stdout.split()
    assert names and all(name.endswith(".o") for name in names)


def test_text_members(redist_tree: Path) -> None:
    pc = (redist_tree / "pkg-config/cudart-12.9.pc").read_text()
    assert pc.startswith("cudaroot=/usr/local/cuda-12.9\n")
    assert "libdir=${cudaroot}/targets/x86_64-linux/lib\n" in pc
    assert "includedir=${cudaroot}/targets/x86_64-linux/include\n" in pc
    for field in ("Name: cudart", "Description: ", "Version: 12.9", "Libs: ", "Cflags: "):
        assert field in pc
    wheel = redist_tree / "python/demo-12.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        assert "demo-12.9.dist-info/WHEEL" in zf.namelist()
    assert (redist_tree / "bin/demo-run").stat().st_mode & stat.S_IXUSR
    assert (redist_tree / "LICENSE").is_file()


def test_hardlink_pair_shares_an_inode(redist_tree: Path) -> None:
    first = (redist_tree / "bin/demo-query").stat()
    second = (redist_tree / "bin/demo-query-12.9").stat()
    assert (first.st_ino, first.st_nlink) == (second.st_ino, 2)


def test_variants_drop_and_add_parts(tmp_path: Path) -> None:
    top = build_redist_tree(
        tmp_path,
        pname="cudnn",
        version="9.8.0.87",
        cuda_suffix="_cuda12",
        with_lib64=False,
        with_host_target=False,
        with_stubs=False,
        with_nsight_compute=True,
        strip=True,
    )
    assert top.name == "cudnn-linux-x86_64-9.8.0.87_cuda12-archive"
    names = set(expected_outputs(top))
    assert not any(n.startswith(("lib64/", "host-", "target-", "lib/stubs/")) for n in names)
    assert "lib/libdemo.so.9.8.0.87" in names
    assert {
        "host/linux-desktop-glibc_2_11_3-x64/ncu-ui.bin",
        "target/linux-desktop-glibc_2_11_3-x64/libTargetStatic.a",
    } <= names
    symbols = subprocess.run(
        ["readelf", "-sW", top / "lib/libdemo.so.9.8.0.87"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ".symtab" not in symbols.stdout  # stripped


@pytest.mark.skipif(not have_compiler("aarch64"), reason="no aarch64 cross compiler")
def test_aarch64_variant(tmp_path: Path) -> None:
    top = build_redist_tree(tmp_path, arch="aarch64")
    assert top.name == "cuda_demo-linux-sbsa-12.9.79-archive"
    assert (top / "host-linux-armv8").is_dir() and (top / "target-linux-sbsa-armv8").is_dir()
    header = subprocess.run(
        ["readelf", "-h", top / "lib/libdemo.so.12.9.79"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "AArch64" in header.stdout
    assert "sbsa-linux" in (top / "pkg-config/demo-12.9.pc").read_text()


def test_compile_helpers_reject_rpath_and_runpath_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        compile_shared(tmp_path, "libx.so", "int x;\n", rpath="$ORIGIN", runpath="$ORIGIN")


def test_missing_needed_library_becomes_a_stand_in(tmp_path: Path) -> None:
    lib = compile_shared(tmp_path, "libqtiff.so", "int q;\n", needed_libs=["libtiff.so.5"])
    assert dynamic_entries(lib)["NEEDED"][0] == "libtiff.so.5"


# --------------------------------------------------------------------------------------------
# Tarballs
# --------------------------------------------------------------------------------------------


def _tree_types(top: Path) -> dict[str, str]:
    """Archive name -> expected tar type for every path below top (and top itself)."""
    types = {top.name: "dir"}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            arc = path.relative_to(top.parent).as_posix()
            types[arc] = "sym" if path.is_symlink() else "dir" if path.is_dir() else "reg"
    types[f"{top.name}/bin/demo-query-12.9"] = "lnk"
    return types


def _tar_type(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "sym"
    if member.islnk():
        return "lnk"
    return "dir" if member.isdir() else "reg"


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_is_readable_with_the_same_members(
    redist_tree: Path, redist_tarballs: dict[Compression, Path], compression: Compression
) -> None:
    members = tar_members(redist_tarballs[compression])
    assert {m.name: _tar_type(m) for m in members} == _tree_types(redist_tree)
    assert members[0].name == redist_tree.name and members[0].isdir()
    assert all(m.uid == 0 and m.gid == 0 and m.mtime == FIXED_MTIME for m in members)


def test_member_order_is_nvidia_path_order(redist_tarballs: dict[Compression, Path]) -> None:
    members = tar_members(redist_tarballs["none"])
    keys = [m.name + "/" if m.isdir() else m.name for m in members]
    assert keys == sorted(keys)


def test_links_are_kept(redist_tree: Path, redist_tarballs: dict[Compression, Path]) -> None:
    members = {m.name: m for m in tar_members(redist_tarballs["xz"])}
    top = redist_tree.name
    assert members[f"{top}/lib/libdemo.so"].linkname == "libdemo.so.12"
    assert members[f"{top}/include/crt_compat"].linkname == "crt"
    hard = members[f"{top}/bin/demo-query-12.9"]
    assert hard.islnk() and hard.linkname == f"{top}/bin/demo-query"


def test_xz_block_counts(redist_tarballs: dict[Compression, Path]) -> None:
    assert xz_block_count(redist_tarballs["xz"]) == 1
    assert xz_block_count(redist_tarballs["xz-multiblock"]) > 1


@pytest.mark.parametrize("compression", ["xz", "gz", "zst"])
def test_tarballs_are_reproducible(
    redist_tree: Path, tmp_path: Path, compression: Compression
) -> None:
    first = write_tarball(redist_tree, tmp_path / "a", compression)
    second = write_tarball(redist_tree, tmp_path / "b", compression)
    assert first.read_bytes() == second.read_bytes()


def test_shuffled_order_keeps_members_and_top_first(redist_tree: Path, tmp_path: Path) -> None:
    plain = tar_members(write_tarball(redist_tree, tmp_path / "a.tar", "none"))
    shuffled = tar_members(write_tarball(redist_tree, tmp_path / "b.tar", "none", order="shuffled"))
    assert shuffled[0].name == redist_tree.name
    assert sorted(m.name for m in shuffled) == sorted(m.name for m in plain)
    assert [m.name for m in shuffled] != [m.name for m in plain]
    # Whichever name of the hardlink pair comes first carries the content.
    pair = [m for m in shuffled if m.name.endswith(("bin/demo-query", "bin/demo-query-12.9"))]
    assert pair[0].isreg() and pair[1].islnk()


def test_large_tarball_streams_real_ar_members(tmp_path: Path) -> None:
    tarball = build_large_tarball(tmp_path, size_mb=6, compression="zst", members=2)
    assert tarball.name == "libdemo_large-linux-x86_64-12.9.1.4-archive.tar.zst"
    members = tar_members(tarball)
    big = [m for m in members if m.name.endswith("_static.a")]
    assert len(big) == 2
    assert sum(m.size for m in big) == pytest.approx(6 * 1024 * 1024, rel=0.01)
    assert any(m.name.endswith("libdemo_large.so.12.9.1.4") for m in members)
    # Nearly incompressible by default: the pool is larger than zstd's window.
    assert tarball.stat().st_size > 0.9 * 6 * 1024 * 1024


# --------------------------------------------------------------------------------------------
# Reference trees
# --------------------------------------------------------------------------------------------


def test_reference_trees_have_every_listed_member(
    reference_tree_lists: dict[str, Path], reference_trees: dict[str, Path]
) -> None:
    assert set(reference_trees) == {"cuda_cudart", "libcublas", "nsight_systems"}
    for name, list_file in reference_tree_lists.items():
        root = reference_trees[name].parent
        for entry in parse_reference_list(list_file):
            path = root / entry.path
            assert "<" not in entry.path, entry
            if entry.type == "symlink":
                assert os.readlink(path) == entry.target
            elif entry.type == "dir":
                assert path.is_dir() and not path.is_symlink()
            elif entry.type in ("elf-so", "elf-exe"):
                assert is_elf(path), entry
            elif entry.type == "static":
                assert path.read_bytes().startswith(b"!<arch>\n")
            else:
                assert path.is_file() and path.stat().st_size > 0, entry


def test_reference_elf_facts(reference_trees: dict[str, Path]) -> None:
    cudart = reference_trees["cuda_cudart"] / "lib"
    assert dynamic_entries(cudart / "libcudart.so.12.9.79")["SONAME"] == ["libcudart.so.12"]
    assert dynamic_entries(cudart / "stubs/libcuda.so")["SONAME"] == ["libcuda.so.1"]
    cublas = dynamic_entries(reference_trees["libcublas"] / "lib/libcublas.so.12.9.1.4")
    assert cublas["SONAME"] == ["libcublas.so.12"]
    assert cublas["RPATH"] == ["$ORIGIN"]
    assert "libcublasLt.so.12" in cublas["NEEDED"]
    qtiff = reference_trees["nsight_systems"] / "host-linux-x64/Plugins/imageformats/libqtiff.so"
    assert "libtiff.so.5" in dynamic_entries(qtiff)["NEEDED"]


def test_bundled_sample_has_the_documented_layout() -> None:
    sample = (
        REPO / "fixtures/cuda_sample-linux-x86_64-12.9.79-archive.tar.xz"
    )
    members = {m.name.split("/", 1)[-1]: m for m in tar_members(sample)[1:]}
    assert sample.stat().st_size < 100 * 1024
    # Same paths below the top directory as the demo tree the expected table describes.
    files = {name for name, m in members.items() if not m.isdir()}
    assert files == set(EXPECTED_DEFAULT)
    assert members["lib/libdemo.so.12"].linkname == "libdemo.so.12.9.79"
    assert members["bin/demo-query-12.9"].islnk()
