"""Issue 12's last gaps, each on real bytes: DT_NEEDED additions (tensorrt's trtexec, cuDNN 8),
``lib/<cudaMajor>/`` replacing ``lib/``, tensorrt's ``include/onnx`` links, cuda_gdb's
Python TUI wrappers, libcudss's CMake paths and the cuda-component setup hook's collector."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudasplit import RunpathPolicy, SplitOptions, split_to_dir
from cudasplit._rulebook import build_ruleset
from cudasplit.errors import OptionsError, ProblemsFound, RulesError
from tests.support.builders import (
    compile_executable,
    compile_shared,
    dynamic_entries,
    have_compiler,
)
from tests.support.tarutil import Entry, tar_bytes

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")


def _lib(directory: Path, real: str, soname: str, links: tuple[str, ...] = (),
         needed: tuple[str, ...] = ()) -> Path:
    """``directory/real`` with SONAME ``soname`` and the given links to it."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = soname.split(".so")[0].replace("-", "_")
    path = compile_shared(directory, real, f"int {stem}_fn(void) {{ return 7; }}",
                          soname=soname, needed_libs=(*needed, "libc.so.6"))
    for link in links:
        (directory / link).symlink_to(real)
    return path


# -- DT_NEEDED additions ------------------------------------------------------------------------


def _tensorrt(tmp_path: Path, version: str = "10.9.0.34") -> Path:
    top = tmp_path / f"TensorRT-{version}"
    major = version.split(".")[0]
    _lib(top / "lib", f"libnvinfer_plugin.so.{version[:len(version) - 3]}",
         f"libnvinfer_plugin.so.{major}", (f"libnvinfer_plugin.so.{major}",))
    (top / "bin").mkdir(parents=True)
    compile_executable(top / "bin", "trtexec",
                       'int puts(const char *); int main(void) { puts("trtexec ok"); return 0; }')
    include = top / "include"
    include.mkdir()
    for header in ("NvInfer.h", "NvOnnxParser.h", "NvOnnxConfig.h"):
        (include / header).write_text(f"/* {header} */\n")
    return top


def test_trtexec_gets_the_plugin_library_as_needed_and_runs(tmp_path: Path) -> None:
    top = _tensorrt(tmp_path)
    report = split_to_dir(top, tmp_path / "o", SplitOptions())
    trtexec = tmp_path / "o/bin/bin/trtexec"
    entries = dynamic_entries(trtexec)
    assert "libnvinfer_plugin.so.10" in entries["NEEDED"]
    assert str(tmp_path / "o/lib/lib") in entries["RUNPATH"][0].split(":")
    assert report.member("bin/trtexec").note == "DT_NEEDED added: libnvinfer_plugin.so.10"
    # The loader really finds the added library through the planned RUNPATH.
    run = subprocess.run([str(trtexec)], capture_output=True, text=True, check=False,
                         env={"PATH": "/usr/bin:/bin"})
    assert (run.returncode, run.stdout.strip()) == (0, "trtexec ok"), run.stderr
    listed = subprocess.run(["ldd", str(trtexec)], capture_output=True, text=True, check=True)
    assert f"libnvinfer_plugin.so.10 => {tmp_path}/o/lib/lib/" in listed.stdout
    # Only trtexec: the library itself gets nothing added.
    plugin = tmp_path / "o/lib/lib/libnvinfer_plugin.so.10.9.0"
    assert "libnvinfer_plugin.so.10" not in dynamic_entries(plugin)["NEEDED"]


def test_dry_run_shows_the_addition_and_writes_nothing(tmp_path: Path) -> None:
    top = _tensorrt(tmp_path, "8.6.1.6")
    before = (top / "bin/trtexec").read_bytes()
    report = split_to_dir(top, tmp_path / "dry", SplitOptions(dry_run=True))
    record = report.member("bin/trtexec")
    assert record.note == "DT_NEEDED would be added: libnvinfer_plugin.so.8"
    assert record.patch == "planned"
    assert (top / "bin/trtexec").read_bytes() == before
    assert not (tmp_path / "dry").exists()


def _cudnn(tmp_path: Path, version: str) -> Path:
    top = tmp_path / f"cudnn-linux-x86_64-{version}_cuda12-archive"
    major = version.split(".")[0]
    real = ".".join(version.split(".")[:3])
    for name in ("libcudnn", "libcudnn_cnn_infer", "libcudnn_ops_infer"):
        _lib(top / "lib", f"{name}.so.{real}", f"{name}.so.{major}",
             (f"{name}.so.{major}", f"{name}.so"))
    return top


def _cublas_dir(tmp_path: Path) -> Path:
    where = tmp_path / "cublas/lib"
    _lib(where, "libcublas.so.12.9.1.4", "libcublas.so.12", ("libcublas.so",))
    _lib(where, "libcublasLt.so.12.9.1.4", "libcublasLt.so.12", ("libcublasLt.so",))
    return where


def test_cudnn_8_gets_its_sub_libraries_and_cublas_as_needed(tmp_path: Path) -> None:
    cublas = _cublas_dir(tmp_path)
    top = _cudnn(tmp_path, "8.9.7.29")
    options = SplitOptions(runpath=RunpathPolicy(library_paths=(str(cublas),)))
    split_to_dir(top, tmp_path / "o", options)
    lib = tmp_path / "o/lib/lib"
    cudnn = dynamic_entries(lib / "libcudnn.so.8.9.7")
    assert "libcudnn_cnn_infer.so" in cudnn["NEEDED"]
    ops = dynamic_entries(lib / "libcudnn_ops_infer.so.8.9.7")
    assert {"libcublas.so", "libcublasLt.so"} <= set(ops["NEEDED"])
    # The added names resolve: cuBLAS's dir (from --library-path) is on the RUNPATH.
    assert str(cublas) in ops["RUNPATH"][0].split(":")
    assert "libcublas.so" not in dynamic_entries(lib / "libcudnn_cnn_infer.so.8.9.7")["NEEDED"]
    code = f"import ctypes; ctypes.CDLL({str(lib / 'libcudnn_ops_infer.so.8.9.7')!r}); print('ok')"
    run = subprocess.run(["python3", "-c", code], capture_output=True, text=True, check=False,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert run.stdout.strip() == "ok", run.stderr


def test_cudnn_9_gets_nothing_added(tmp_path: Path) -> None:
    top = _cudnn(tmp_path, "9.10.2.21")
    report = split_to_dir(top, tmp_path / "o", SplitOptions())
    cudnn = dynamic_entries(tmp_path / "o/lib/lib/libcudnn.so.9.10.2")
    assert "libcudnn_cnn_infer.so" not in cudnn["NEEDED"]
    assert not any("DT_NEEDED" in (r.note or "") for r in report.members)


@pytest.mark.parametrize(("table", "message"), [
    ({"files": ["bin/x"], "names": ["a/b.so"]}, "library names"),
    ({"files": ["bin/x"]}, "library names"),
    ({"names": ["libx.so"]}, "needs at least one glob"),
    ({"files": ["bin/x"], "names": ["libx.so"], "platforms": ["linux-sbsa"]}, "since"),
    ({"files": ["bin/x"], "names": ["libx.so"], "what": 1}, "unknown key"),
])
def test_bad_add_needed_entries_are_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(RulesError, match=message):
        build_ruleset([("t.toml", {"package": {"add_needed": [table]}})])


# -- lib/<cudaMajor>/ replaces lib/ ------------------------------------------------------


def _tarball(tmp_path: Path, top: str, entries: list[Entry]) -> Path:
    path = tmp_path / f"{top}.tar"
    path.write_bytes(tar_bytes(entries, top=top))
    return path


def _elf(tmp_path: Path, real: str, soname: str) -> bytes:
    return _lib(tmp_path / "elf", real, soname).read_bytes()


CUTENSOR = "libcutensor-linux-x86_64-2.2.0.0-archive"


def _outputs(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if (p.is_file() or p.is_symlink()) and "nix-support" not in p.parts}


def test_lib_major_replaces_lib_whatever_the_order(tmp_path: Path) -> None:
    """Files directly in lib/ before and after lib/12/ are gone, lib/11/ too (Nixpkgs)."""
    tarball = _tarball(tmp_path, CUTENSOR, [
        ("file", "include/cutensor.h", b"/* h */\n"),
        ("file", "lib/libcutensor_early.so.1", _elf(tmp_path, "libcutensor_early.so.1",
                                                     "libcutensor_early.so.1")),
        ("symlink", "lib/libcutensor_early.so", "libcutensor_early.so.1"),
        ("file", "lib/11/libcutensor.so.2.2.0", b"\x7fELF eleven"),
        ("dir", "lib/12"),
        ("file", "lib/12/libcutensor.so.2.2.0", _elf(tmp_path, "libcutensor.so.2.2.0",
                                                      "libcutensor.so.2")),
        ("symlink", "lib/12/libcutensor.so.2", "libcutensor.so.2.2.0"),
        ("file", "lib/12/libcutensor_static.a", b"!<arch>\n"),
        ("file", "lib/late.txt", b"late\n"),
    ])
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions(cuda_version="12.9"))
    assert _outputs(tmp_path / "o/lib") == {"lib/libcutensor.so.2.2.0", "lib/libcutensor.so.2"}
    assert _outputs(tmp_path / "o/static") == {"lib/libcutensor_static.a"}
    dropped = {m.path: m.note for m in report.members if m.output is None and m.kind != "dir"}
    replaced = "lib/12/ replaces lib/ (as Nixpkgs)"
    assert dropped == {"lib/libcutensor_early.so.1": replaced, "lib/libcutensor_early.so": replaced,
                       "lib/late.txt": replaced,
                       "lib/11/libcutensor.so.2.2.0": "built for CUDA 11, not 12"}
    assert not report.problems


def test_held_lib_members_are_placed_and_patched_without_lib_major(tmp_path: Path) -> None:
    """No lib/12/: what was held goes where it always went, ELF files patched."""
    tarball = _tarball(tmp_path, CUTENSOR, [
        ("file", "lib/libcutensor.so.2.2.0", _elf(tmp_path, "libcutensor.so.2.2.0",
                                                   "libcutensor.so.2")),
        ("symlink", "lib/libcutensor.so.2", "libcutensor.so.2.2.0"),
        ("file", "lib/11/libcutensor.so.2.2.0", b"\x7fELF eleven"),
        ("file", "include/cutensor.h", b"/* h */\n"),
    ])
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions(cuda_version="12.9"))
    assert _outputs(tmp_path / "o/lib") == {"lib/libcutensor.so.2.2.0", "lib/libcutensor.so.2"}
    runpath = dynamic_entries(tmp_path / "o/lib/lib/libcutensor.so.2.2.0")["RUNPATH"][0]
    assert runpath.split(":")[0] == "/run/opengl-driver/lib"
    assert report.member("lib/libcutensor.so.2.2.0").output == "lib"
    assert report.member("lib/11/libcutensor.so.2.2.0").output is None


def test_cuda_release_component_reports_what_it_cannot_take_back(tmp_path: Path) -> None:
    """A CUDA release component is never held (one layout per archive); a lib/12/ after lib/
    files is reported, never silently different from Nixpkgs."""
    top = "cuda_demo-linux-x86_64-12.9.79-archive"
    tarball = _tarball(tmp_path, top, [
        ("file", "lib/early.txt", b"early\n"),
        ("file", "lib/12/libdemo.txt", b"demo\n"),
        ("file", "lib/after.txt", b"after\n"),
    ])
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions(cuda_version="12.9"))
    assert [(p.code, p.path) for p in report.problems] == [("cuda-major-late", "lib/early.txt")]
    assert report.member("lib/after.txt").output is None
    assert report.member("lib/12/libdemo.txt").dest == "lib/libdemo.txt"


def test_unknown_cuda_major_lifts_nothing(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path, CUTENSOR, [
        ("file", "lib/12/a.txt", b"a\n"), ("file", "lib/b.txt", b"b\n")])
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions())
    assert {m.path: m.dest for m in report.members if m.kind != "dir"} == {
        "lib/12/a.txt": "lib/12/a.txt", "lib/b.txt": "lib/b.txt"}


# -- tensorrt's include/onnx, cuda_gdb's TUI wrappers ----------------------------------------


def test_onnx_headers_are_linked_into_include_onnx(tmp_path: Path) -> None:
    top = _tensorrt(tmp_path)
    split_to_dir(top, tmp_path / "o", SplitOptions())
    onnx = tmp_path / "o/include/include/onnx"
    assert sorted(os.listdir(onnx)) == ["NvOnnxConfig.h", "NvOnnxParser.h"]
    assert os.readlink(onnx / "NvOnnxParser.h") == "../NvOnnxParser.h"
    assert (onnx / "NvOnnxParser.h").read_text() == "/* NvOnnxParser.h */\n"
    # A C compiler finds it the way ONNX consumers include it.
    source = tmp_path / "use.c"
    source.write_text('#include <onnx/NvOnnxParser.h>\nint main(void) { return 0; }\n')
    subprocess.run(["gcc", "-fsyntax-only", f"-I{tmp_path}/o/include/include", str(source)],
                   check=True)


def _gdb(tmp_path: Path, version: str = "12.9.79") -> Path:
    top = tmp_path / f"cuda_gdb-linux-x86_64-{version}-archive"
    (top / "bin").mkdir(parents=True)
    for name in ("cuda-gdb", "cuda-gdb-python3.10-tui", "cuda-gdb-python3.12-tui",
                 "cuda-gdb-python3.13-tui"):
        compile_executable(top / "bin", name, "int main(void) { return 0; }")
    return top


def test_cuda_gdb_keeps_only_the_build_pythons_tui(tmp_path: Path) -> None:
    report = split_to_dir(_gdb(tmp_path), tmp_path / "o", SplitOptions(python_version="3.12"))
    assert sorted(os.listdir(tmp_path / "o/bin/bin")) == ["cuda-gdb", "cuda-gdb-python3.12-tui"]
    dropped = sorted(m.path for m in report.members if m.output is None and m.kind != "dir")
    assert dropped == ["bin/cuda-gdb-python3.10-tui", "bin/cuda-gdb-python3.13-tui"]
    assert not report.warnings


def test_cuda_gdb_without_a_python_version_keeps_all_and_warns(tmp_path: Path) -> None:
    report = split_to_dir(_gdb(tmp_path), tmp_path / "o", SplitOptions())
    assert len(os.listdir(tmp_path / "o/bin/bin")) == 4
    assert [w.code for w in report.warnings] == ["python-version-unknown"]


def test_cuda_gdb_before_12_5_has_no_tui_fixup(tmp_path: Path) -> None:
    split_to_dir(_gdb(tmp_path, "12.4.127"), tmp_path / "o", SplitOptions(python_version="3.12"))
    assert len(os.listdir(tmp_path / "o/bin/bin")) == 4


def test_python_version_must_be_major_minor() -> None:
    with pytest.raises(OptionsError, match="python_version"):
        SplitOptions(python_version="3.12/../x")


# -- libcudss's CMake configs --------------------------------------------------------------------

# The lines Nixpkgs' libcudss.nix rewrites, in a config written for this test that finds the
# package the way cuDSS's does (relative to itself).
CUDSS_CONFIG = """\
get_filename_component(PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../../" ABSOLUTE)
file(REAL_PATH "${CMAKE_CURRENT_LIST_DIR}" _cudss_cmake_config_realpath)
file(REAL_PATH "../../" _cudss_search_prefix BASE_DIRECTORY "${_cudss_cmake_config_realpath}")
find_path(cudss_INCLUDE_DIR NAMES cudss.h PATHS ${_cudss_search_prefix}
          PATH_SUFFIXES ../include ../../include NO_DEFAULT_PATH NO_CACHE)
find_path(cudss_LIBRARY_DIR NAMES libcudss.so PATHS ${_cudss_search_prefix}
          PATH_SUFFIXES ./ ../lib NO_DEFAULT_PATH)
include("${CMAKE_CURRENT_LIST_DIR}/cudss-static-targets.cmake")
"""
CUDSS_STATIC_TARGETS = """\
add_library(cudss_static STATIC IMPORTED)
set_target_properties(cudss_static PROPERTIES
  INTERFACE_LINK_DIRECTORIES "/usr/local/cuda-12.9/lib64")
include("${CMAKE_CURRENT_LIST_DIR}/cudss-static-targets-release.cmake")
"""
CUDSS_STATIC_RELEASE = """\
set_target_properties(cudss_static PROPERTIES
  IMPORTED_LOCATION_RELEASE "${cudss_LIBRARY_DIR}/libcudss_static.a")
"""
CUDSS_TOP = "libcudss-linux-x86_64-0.6.0.5_cuda12-archive"


def _cudss(tmp_path: Path, config: str = CUDSS_CONFIG) -> Path:
    cmake = "lib/cmake/cudss/"
    return _tarball(tmp_path, CUDSS_TOP, [
        ("file", "include/cudss.h", b"/* cudss.h */\n"),
        ("file", "lib/libcudss.so.0.6.0", _elf(tmp_path, "libcudss.so.0.6.0", "libcudss.so.0")),
        ("symlink", "lib/libcudss.so.0", "libcudss.so.0.6.0"),
        ("symlink", "lib/libcudss.so", "libcudss.so.0"),
        ("file", "lib/libcudss_static.a", b"!<arch>\n"),
        ("file", cmake + "cudss-config.cmake", config.encode()),
        ("file", cmake + "cudss-static-targets.cmake", CUDSS_STATIC_TARGETS.encode()),
        ("file", cmake + "cudss-static-targets-release.cmake", CUDSS_STATIC_RELEASE.encode()),
    ])


def _cmake_find_cudss(tmp_path: Path, config_dir: Path) -> dict[str, str]:
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("""\
cmake_minimum_required(VERSION 3.20)
project(consumer NONE)
find_package(cudss REQUIRED CONFIG)
get_target_property(location cudss_static IMPORTED_LOCATION_RELEASE)
get_target_property(linkdirs cudss_static INTERFACE_LINK_DIRECTORIES)
message(STATUS "include=${cudss_INCLUDE_DIR}")
message(STATUS "libdir=${cudss_LIBRARY_DIR}")
message(STATUS "static=${location}")
message(STATUS "linkdirs=${linkdirs}")
""")
    run = subprocess.run(["cmake", "-S", str(project), "-B", str(tmp_path / "build"),
                          f"-Dcudss_DIR={config_dir}"], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return dict(line.removeprefix("-- ").split("=", 1) for line in run.stdout.splitlines()
                if line.startswith("-- ") and "=" in line)


@pytest.mark.skipif(not shutil.which("cmake"), reason="needs cmake")
def test_cudss_cmake_config_finds_the_split_outputs(tmp_path: Path) -> None:
    cublas = "/nix/store/22222222222222222222222222222222-libcublas-lib"
    report = split_to_dir(_cudss(tmp_path), tmp_path / "o", SplitOptions(
        package_roots=(("libcublas.lib", cublas),), check_fhs_refs=True))
    assert not report.problems
    o = tmp_path / "o"
    found = _cmake_find_cudss(tmp_path, o / "dev/lib/cmake/cudss")
    found = {k: os.path.normpath(v) for k, v in found.items()}
    assert found == {"include": f"{o}/include/include", "libdir": f"{o}/lib/lib",
                     "static": f"{o}/static/lib/libcudss_static.a",
                     "linkdirs": f"{cublas}/lib"}
    assert Path(found["static"]).is_file()
    config = (o / "dev/lib/cmake/cudss/cudss-config.cmake").read_text()
    assert "PACKAGE_PREFIX_DIR" not in config


def test_cudss_without_cublas_root_says_so_and_keeps_the_line(tmp_path: Path) -> None:
    report = split_to_dir(_cudss(tmp_path), tmp_path / "o", SplitOptions())
    assert [(p.code, p.path) for p in report.problems] == [
        ("package-root-missing", "lib/cmake/cudss/cudss-static-targets.cmake")]
    targets = (tmp_path / "o/dev/lib/cmake/cudss/cudss-static-targets.cmake").read_text()
    assert '"/usr/local/cuda-12.9/lib64"' in targets


def test_cudss_config_without_the_expected_text_is_a_problem(tmp_path: Path) -> None:
    """--replace-fail: an edit that finds nothing is never silent (a new cuDSS layout)."""
    tarball = _cudss(tmp_path, config="# a config of another shape\n")
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions(
        package_roots=(("libcublas", "/nix/store/x-libcublas"),)))
    assert sorted(p.code for p in report.problems) == ["text-edit-unmatched"] * 2
    with pytest.raises(ProblemsFound):
        split_to_dir(tarball, tmp_path / "strict", SplitOptions(
            strict=True, package_roots=(("libcublas", "/nix/store/x-libcublas"),)))


@pytest.mark.parametrize(("table", "message"), [
    ({"files": ["a.cmake"]}, "needs 'replace' or 'regex'"),
    ({"files": ["a.cmake"], "replace": [["x"]]}, "pairs"),
    ({"files": ["a.cmake"], "replace": [["", "y"]]}, "pairs"),
    ({"files": ["a.cmake"], "regex": [["(", "y"]]}, "bad regex"),
])
def test_bad_text_edits_are_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(RulesError, match=message):
        build_ruleset([("t.toml", {"package": {"text_edits": [table]}})])


# -- the cuda-component setup hook's collector -------------------------------------------------

HOOK_ROOT = "/nix/store/33333333333333333333333333333333-cuda-component-hook"
# cuda_cudart split the way Nixpkgs' redist-outputs.nix overrides it (its default is out only).
SIX = ("out", "dev", "include", "lib", "static", "stubs")


def _cudart_tree(tmp_path: Path) -> Path:
    top = tmp_path / "cuda_cudart-linux-x86_64-12.9.79-archive"
    (top / "include").mkdir(parents=True)
    (top / "include/cuda_runtime.h").write_text("/* h */\n")
    _lib(top / "lib", "libcudart.so.12.9.79", "libcudart.so.12", ("libcudart.so.12",))
    _lib(top / "lib/stubs", "libcuda.so", "libcuda.so")
    return top


def test_component_outputs_source_the_collector_first(tmp_path: Path) -> None:
    """What cudaComponentHook's _cudaPublishComponents writes: ``source <collector>`` then the
    output's own hook (the stubs output keeps its consumer hook after the line)."""
    split_to_dir(_cudart_tree(tmp_path), tmp_path / "o", SplitOptions(
        nix_markers=True, cuda_component_hook=HOOK_ROOT, outputs=SIX))
    collector = f"source {HOOK_ROOT}/nix-support/setup-hook\n"
    for output in ("out", "dev", "include", "lib", "static"):
        assert (tmp_path / "o" / output / "nix-support/setup-hook").read_text() == collector + "\n"
    stubs = (tmp_path / "o/stubs/nix-support/setup-hook").read_text()
    assert stubs.startswith(collector + "# shellcheck shell=bash\n")
    assert "cudasplitRemoveStubsFromRunpathAll" in stubs


def test_sourcing_an_output_hook_runs_the_collector_and_the_stubs_hook(tmp_path: Path) -> None:
    hook_root = tmp_path / "cuda component hook"  # a space: %q quoting must hold
    (hook_root / "nix-support").mkdir(parents=True)
    (hook_root / "nix-support/setup-hook").write_text("collected+=(yes)\n")
    split_to_dir(_cudart_tree(tmp_path), tmp_path / "o", SplitOptions(
        nix_markers=True, cuda_component_hook=str(hook_root), outputs=SIX))
    script = (f"set -eu; postFixupHooks=(); collected=()\n"
              f"source {tmp_path}/o/stubs/nix-support/setup-hook\n"
              f"source {tmp_path}/o/lib/nix-support/setup-hook\n"
              'echo "${#collected[@]} ${postFixupHooks[*]}"\n')
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout.strip()) == (0, "2 cudasplitRemoveStubsFromRunpathAll"), \
        run.stderr


def test_without_the_hook_no_collector_line(tmp_path: Path) -> None:
    split_to_dir(_cudart_tree(tmp_path), tmp_path / "o", SplitOptions(nix_markers=True,
                                                                      outputs=SIX))
    assert not (tmp_path / "o/lib/nix-support/setup-hook").exists()
    assert "source " not in (tmp_path / "o/stubs/nix-support/setup-hook").read_text()


def test_component_hook_must_be_absolute() -> None:
    with pytest.raises(OptionsError, match="cuda_component_hook"):
        SplitOptions(cuda_component_hook="relative/hook")


@pytest.mark.parametrize(("env", "expected"), [
    ("cudasplitCudaComponentHook=/nix/store/h-hook\ncudasplitPythonVersion=3.12",
     ["--cuda-component-hook /nix/store/h-hook", "--python-version 3.12"]),
    ("cudasplitGlibcVersion=2.42", ["--glibc-version 2.42"]),
    ("_cudaComponentHookPath=/nix/store/g-hook", ["--cuda-component-hook /nix/store/g-hook"]),
    # cudaComponentHook publishes itself: no second source line from cudasplit.
    ("_cudaComponentHookPath=/nix/store/g-hook\ncudaPublishComponent=1", []),
    ("cudasplitCudaComponentHook=/nix/store/h-hook\ncudasplitNoNixSupport=1", []),
])
def test_setup_hook_passes_the_new_variables(env: str, expected: list[str]) -> None:
    from tests.unit.rulebook.test_package_rules import _run_hook

    args, _settings = _run_hook(env)
    joined = " ".join(args)
    for flag in expected:
        assert flag in joined, joined
    if not expected:
        assert "--cuda-component-hook" not in joined


def test_hard_link_to_a_held_member_waits_with_it(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path, CUTENSOR, [
        ("file", "lib/data.bin", b"payload\n"),
        ("hardlink", "share/data.bin", "lib/data.bin"),
    ])
    report = split_to_dir(tarball, tmp_path / "o", SplitOptions(cuda_version="12.9"))
    assert not report.warnings
    assert (tmp_path / "o/out/share/data.bin").read_bytes() == b"payload\n"


def test_cli_wires_python_version_and_component_hook(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cudasplit.cli import main

    result = CliRunner().invoke(main, [
        "split", str(_gdb(tmp_path)), "-o", str(tmp_path / "o"), "--python-version", "3.13",
        "--nix-support", "--cuda-component-hook", HOOK_ROOT])
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(tmp_path / "o/bin/bin")) == ["cuda-gdb", "cuda-gdb-python3.13-tui"]
    hook = (tmp_path / "o/bin/nix-support/setup-hook").read_text()
    assert hook == f"source {HOOK_ROOT}/nix-support/setup-hook\n\n"
