"""``cudasplit ldd``: the loader's view of split output, checked against the real loader."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, split_to_dir
from cudasplit._release.ldd import LddOptions, view, view_tree
from cudasplit.cli import main
from tests.support.builders import compile_executable, compile_shared
from tests.support.tarutil import write_archive

OPENER = r"""
#include <dlfcn.h>
int main(void) { return dlopen("libcuda.so.1", RTLD_NOW) == 0; }
"""


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ldd")
    dep = compile_shared(root, "libdep.so.1", "int dep(void){return 0;}", soname="libdep.so.1")
    tool = compile_executable(root, "tool", "int dep(void);\nint main(void){return dep();}",
                              needed_libs=[dep])
    cuda = compile_executable(root, "usecuda", OPENER, needed_libs=["libcuda.so.1"])
    stub = compile_shared(root, "libcuda.so.1", "int cuInit(int f){return f;}",
                          soname="libcuda.so.1")
    archive = write_archive(root / "a.tar.xz", [
        ("file", "bin/tool", tool.read_bytes()), ("file", "bin/usecuda", cuda.read_bytes()),
        ("file", "lib/libdep.so.1", dep.read_bytes()),
        ("file", "lib/stubs/libcuda.so.1", stub.read_bytes())])
    out = root / "out"
    split_to_dir(archive, out, SplitOptions())
    driver = root / "driver" / "lib"
    driver.mkdir(parents=True)
    (driver / "libcuda.so.1").write_bytes(stub.read_bytes())
    return out


def test_needed_resolved_like_the_real_loader(split_dir: Path) -> None:
    tool = split_dir / "bin" / "bin" / "tool"
    one = view(tool)
    assert one is not None
    dep = next(r for r in one.needed if r.name == "libdep.so.1")
    assert dep.path == str(split_dir.resolve() / "lib" / "lib" / "libdep.so.1") \
        or Path(dep.path or "").resolve() == (split_dir / "lib/lib/libdep.so.1").resolve()
    assert dep.via == "RUNPATH" and dep.flag is None
    # The real loader agrees (and the program runs).
    trace = subprocess.run([tool], env={**os.environ, "LD_TRACE_LOADED_OBJECTS": "1"},
                           capture_output=True, text=True).stdout
    assert f"libdep.so.1 => {dep.path}" in trace or "libdep.so.1 => " + str(
        Path(dep.path or "").resolve()) in trace
    assert not one.flags


def test_driver_link_maps_and_missing_driver_is_not_an_error(split_dir: Path) -> None:
    cuda = split_dir / "bin" / "bin" / "usecuda"
    bare = view(cuda, LddOptions(system=False))
    assert bare is not None and bare.flags == ("driver-not-found",)
    driver = split_dir.parent / "driver"
    mapped = view(cuda, LddOptions(maps=(("/run/opengl-driver", str(driver)),), system=False))
    assert mapped is not None and not mapped.flags
    assert [r.path for r in mapped.needed if r.name == "libcuda.so.1"] == [
        str(driver / "lib" / "libcuda.so.1")]
    assert [r.name for r in mapped.dlopen] == []  # libcuda.so.1 is already a DT_NEEDED


def test_stub_that_would_shadow_the_driver_is_flagged(split_dir: Path) -> None:
    cuda = split_dir / "bin" / "bin" / "usecuda"
    stubs = split_dir / "stubs" / "lib" / "stubs"
    shadowed = view(cuda, LddOptions(ld_library_path=(str(stubs),), system=False))
    assert shadowed is not None and "stub-shadows-driver" in shadowed.flags


def test_cli_json_and_exit_codes(split_dir: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["ldd", str(split_dir), "--json", "--no-system",
                              "--driver-link", str(split_dir.parent / "driver")])
    assert ok.exit_code == 0, ok.output
    views = json.loads(ok.stdout)["files"]
    assert {Path(v["path"]).name for v in views} >= {"tool", "usecuda", "libdep.so.1"}
    stubs = split_dir / "stubs" / "lib" / "stubs"
    bad = runner.invoke(main, ["ldd", str(split_dir / "bin"), "--ld-library-path", str(stubs)])
    assert bad.exit_code == 1
    assert "!stub-shadows-driver" in bad.stdout


def test_not_found_is_flagged(tmp_path: Path) -> None:
    lonely = compile_executable(tmp_path, "lonely", "int main(void){return 0;}",
                                needed_libs=["libnowhere.so.7"])
    views = view_tree(lonely)
    assert [r.flag for r in views[0].needed if r.name == "libnowhere.so.7"] == ["not-found"]


def test_dlopen_pattern_resolves_to_a_fitting_file(tmp_path: Path) -> None:
    source = ('static const char *const n = "libnvrtc.so.%s";\n'
              'const char *name(void) { return n; }\n')
    lib = compile_shared(tmp_path, "libopener.so.1", source, soname="libopener.so.1",
                         runpath="$ORIGIN")
    compile_shared(tmp_path, "libnvrtc.so.12", "int f(void){return 0;}", soname="libnvrtc.so.12")
    one = view(lib, LddOptions(system=False))
    assert one is not None
    assert [(r.name, r.path) for r in one.dlopen] == [
        ("libnvrtc.so.12", str(tmp_path / "libnvrtc.so.12"))]


def test_agrees_with_the_real_loader_on_split_nvidia_files(tmp_path: Path) -> None:
    """Real bytes: nvrtc (libraries) and ptxas (executable) from the wheels, split, then each
    DT_NEEDED's file from ``ldd`` equals what glibc's loader really maps (paths compared after
    resolving symlinks: the simulation reads no ld.so.cache)."""
    from tests.support.realwheels import cu12

    nvcc = cu12("nvidia-cuda-nvcc-cu12") / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
    nvrtc = cu12("nvidia-cuda-nvrtc-cu12") / "nvidia" / "cuda_nvrtc" / "lib"
    archive = write_archive(tmp_path / "a.tar", [
        ("file", "bin/ptxas", nvcc.read_bytes()),
        ("file", "lib/libnvrtc.so.12", (nvrtc / "libnvrtc.so.12").read_bytes()),
        ("file", "lib/libnvrtc-builtins.so.12.9",
         (nvrtc / "libnvrtc-builtins.so.12.9").read_bytes())], codec="none")
    split_to_dir(archive, tmp_path / "o", SplitOptions(runpath=_host_libs()))
    checked = 0
    system = "/lib64/ld-linux-x86-64.so.2"
    for one in view_tree(tmp_path / "o", LddOptions(interpreter=system)):
        env = {**os.environ, "LD_TRACE_LOADED_OBJECTS": "1", "LD_LIBRARY_PATH": ""}
        loader = one.interpreter or system
        trace = subprocess.run([loader, "--list", one.path], env=env, capture_output=True,
                               text=True).stdout
        real = {line.split(" => ")[0].strip(): line.split(" => ")[1].split(" (")[0]
                for line in trace.splitlines() if " => " in line}
        for r in one.needed:
            if r.path is not None and r.name in real:
                assert os.path.realpath(real[r.name]) == os.path.realpath(r.path), (one.path, r)
                checked += 1
    assert checked >= 8


def _host_libs():  # type: ignore[no-untyped-def]
    from cudasplit import RunpathPolicy

    found = subprocess.run(["gcc", "-print-file-name=libstdc++.so.6"], capture_output=True,
                           text=True).stdout.strip()
    return RunpathPolicy(library_paths=(os.path.dirname(os.path.realpath(found)),))


def test_only_what_stops_a_file_loading_fails(tmp_path: Path) -> None:
    """A healthy CUPTI split passes: the driver's own libraries (libEGL_nvidia, libGLX_nvidia,
    libnvoptix, libnvidia-*) are driver-provided and the ICD loaders it dlopens (libOpenCL)
    optional. An unresolved DT_NEEDED name fails, with --needed-only or without."""
    names = ("libEGL_nvidia.so.0", "libGLX_nvidia.so.0", "libnvoptix.so.1",
             "libnvidia-opencl.so.1", "libOpenCL.so.1", "libcudart.so.13")
    table = ", ".join(f'"{n}"' for n in names)
    opener = compile_shared(tmp_path / "a", "libopener.so.1",
                            f"const char *names[] = {{{table}}};\n"
                            "const char *name(int i) { return names[i]; }\n",
                            soname="libopener.so.1")
    lonely = compile_shared(tmp_path / "b", "liblonely.so.1", "int f(void){return 0;}",
                            soname="liblonely.so.1", needed_libs=["libnowhere.so.7"])
    [seen] = view_tree(opener, LddOptions(system=False))
    assert {r.name: r.flag for r in seen.dlopen} == {
        "libEGL_nvidia.so.0": "driver-not-found", "libGLX_nvidia.so.0": "driver-not-found",
        "libnvoptix.so.1": "driver-not-found", "libnvidia-opencl.so.1": "driver-not-found",
        "libOpenCL.so.1": "optional", "libcudart.so.13": "optional"}
    for path, status in ((opener, 0), (lonely, 1)):
        codes = [CliRunner().invoke(main, ["ldd", "--no-system", *flag, str(path)]).exit_code
                 for flag in ([], ["--needed-only"])]
        assert codes == [status, status], path
    printed = CliRunner().invoke(main, ["ldd", "--no-system", str(opener)]).output
    assert "dlopen libOpenCL.so.1 => not found (-)  !optional" in printed
    assert "dlopen libnvoptix.so.1 => not found (-)  !driver-not-found" in printed
