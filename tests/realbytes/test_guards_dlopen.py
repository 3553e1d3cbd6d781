"""dlopen audit of consumers (issue 28): which CUDA libraries a consumer's files open by name,
which would load nothing, and what the consumer-guards hook appends to their RUNPATH.

Fixtures first (a gcc-built library naming ``libnvrtc.so.%s``), then a real consumer: the
``cupy-cuda12x`` 13.6.0 wheel's extension modules (they NEED cuBLAS, cuRAND, cuSPARSE,
cuSOLVER, cuFFT, NCCL, cuTENSOR, cuDNN and ``dlopen`` NVRTC, the runtime and the driver) beside
NVRTC and the CUDA runtime from NVIDIA's wheels, split by cudasplit. (CuPy 14 finds NVRTC
through the Python package cuda.pathfinder instead: no name in its ELF files, nothing for an
ELF audit to see; 13.6.0 is the last line whose modules carry the names.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import SplitOptions, split_to_dir
from cudasplit._release.dlopenaudit import CUDA_LIBRARY_PATTERN, is_cuda_library
from cudasplit._release.ldd import LddOptions, view
from cudasplit.cli import main
from cudasplit.guards import consumer_guards_hook, dlopen_audit
from cudasplit.outputs import ldd
from tests.support.builders import compile_shared, have_compiler
from tests.support.tarutil import write_archive

needs_gcc = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")

OPENER = ('static const char *const a = "libnvrtc.so.%s";\n'
          'static const char *const b = "libcudnn_ops.so.9";\n'
          'static const char *const c = "libz.so.1";\n'
          'const char *name(int i) { return i ? (i > 1 ? c : b) : a; }\n')


def test_pattern_is_the_hooks() -> None:
    hook = Path(consumer_guards_hook()).read_text()
    assert f"_cudasplitCudaLibraryPattern='{CUDA_LIBRARY_PATTERN}'" in hook
    from cudasplit import OUTPUT_NAMES
    assert f'_cudasplitOutputNames="{" ".join(OUTPUT_NAMES)}"' in hook


@pytest.mark.parametrize(("name", "cuda"), [
    ("libnvrtc.so.12", True), ("libnvrtc.so.%s", True), ("libcublasLt.so.12", True),
    ("libcudnn_ops.so.9", True), ("libnvJitLink.so.13", True), ("libnvrtc-builtins.so.12.9", True),
    ("libcuda.so.1", False), ("libz.so.1", False), ("libnvrtcx.so.1", False)])
def test_cuda_library_names(name: str, cuda: bool) -> None:
    assert is_cuda_library(name) is cuda


@pytest.fixture
def opener(tmp_path: Path) -> Path:
    out = tmp_path / "out" / "lib"
    out.mkdir(parents=True)
    return compile_shared(out, "libopener.so", OPENER, soname="libopener.so")


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    nvrtc, cudnn = tmp_path / "nvrtc" / "lib", tmp_path / "cudnn" / "lib"
    compile_shared(nvrtc, "libnvrtc.so.12", "int nvrtcVersion(int*a,int*b){return 0;}",
                   soname="libnvrtc.so.12")
    compile_shared(cudnn, "libcudnn_ops.so.9", "int f(void){return 0;}",
                   soname="libcudnn_ops.so.9")
    return nvrtc, cudnn


@needs_gcc
def test_audit_names_what_would_load_nothing_and_the_input_holding_it(
        opener: Path, inputs: tuple[Path, Path]) -> None:
    nvrtc, cudnn = inputs
    found = dlopen_audit(opener, inputs=[str(cudnn), str(nvrtc)], system=False)
    assert [(a.name, a.loads, a.append) for a in found] == [
        ("libcudnn_ops.so.9", None, str(cudnn)), ("libnvrtc.so.%s", None, str(nvrtc))]
    assert "the hook appends" in str(found[0])
    bare = dlopen_audit(opener, system=False)
    assert [a.append for a in bare] == [None, None]
    assert "no input holds it" in str(bare[0])


def _hook(out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = (f"set -euo pipefail\npostFixupHooks=()\nsource {consumer_guards_hook()}\n"
              'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "out": str(out), "outputs": "out",
                               "cudasplitForbiddenOutputs": "", **env})


@needs_gcc
def test_hook_appends_the_input_dirs_then_the_names_load(opener: Path,
                                                         inputs: tuple[Path, Path]) -> None:
    nvrtc, cudnn = inputs
    off = _hook(opener.parent.parent, {"cudasplitDlopenLibraryPath": f"{nvrtc}:{cudnn}"})
    assert off.returncode == 0 and "appending" not in off.stderr  # opt-in
    done = _hook(opener.parent.parent, {"cudasplitDlopenRunpaths": "1",
                                        "cudasplitDlopenLibraryPath": f"{nvrtc}:{cudnn}",
                                        "NIX_LDFLAGS": "-L/nonexistent -lfoo"})
    assert done.returncode == 0, done.stderr
    assert f"dlopens libnvrtc.so.%s: appending {nvrtc} to its RUNPATH" in done.stderr
    one = view(opener, LddOptions(system=False))
    assert one is not None
    assert {r.name: r.path for r in one.dlopen} == {
        "libcudnn_ops.so.9": str(cudnn / "libcudnn_ops.so.9"),
        "libnvrtc.so.12": str(nvrtc / "libnvrtc.so.12"), "libz.so.1": None}
    assert dlopen_audit(opener, inputs=[str(nvrtc)], system=False)[0].append is None
    again = _hook(opener.parent.parent, {"cudasplitDlopenRunpaths": "1",
                                         "cudasplitDlopenLibraryPath": f"{nvrtc}:{cudnn}"})
    assert "appending" not in again.stderr  # idempotent


# -- a real consumer: CuPy 13.6.0 beside split NVRTC and CUDA runtime --------------------------

CUPY = ("cupy-cuda12x", "13.6.0")
CUPY_MODULES = ("cupy_backends/cuda/libs", "cupy_backends/cuda/api", "cupy/cuda")
# What the modules load (DT_NEEDED) or open by name (dlopen), read from the wheel's files.
CUPY_NEEDED = {"libcublas.so.12", "libcurand.so.10", "libcusparse.so.12", "libcusolver.so.11",
               "libcufft.so.11", "libnccl.so.2", "libcutensor.so.2", "libcudnn.so.8"}
CUPY_DLOPEN = {"libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.13", "libcudart.so.12",
               "libcuda.so.1"}


@pytest.fixture(scope="module")
def cupy_and_split(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    from tests.support.realwheels import cu12, wheel_root

    root = wheel_root(*CUPY)
    tmp = tmp_path_factory.mktemp("cupy")
    consumer = tmp / "consumer"
    for sub in CUPY_MODULES:
        for module in sorted((root / sub).glob("*.so")):
            dest = consumer / sub / module.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(module, dest)
    nvrtc = cu12("nvidia-cuda-nvrtc-cu12") / "nvidia" / "cuda_nvrtc" / "lib"
    cudart = cu12("nvidia-cuda-runtime-cu12") / "nvidia" / "cuda_runtime" / "lib"
    dirs = []
    for name, files in (("nvrtc", [nvrtc / "libnvrtc.so.12", nvrtc / "libnvrtc-builtins.so.12.9"]),
                        ("cudart", [cudart / "libcudart.so.12"])):
        archive = write_archive(tmp / f"{name}.tar", [
            ("file", f"lib/{f.name}", f.read_bytes()) for f in files], codec="none")
        split_to_dir(archive, tmp / name, SplitOptions())
        dirs.append(tmp / name / "lib" / "lib")
    return consumer, dirs[0], dirs[1]


def test_cupy_every_cuda_library_listed(cupy_and_split: tuple[Path, Path, Path]) -> None:
    consumer, _nvrtc, _cudart = cupy_and_split
    views = ldd(consumer, system=False)
    needed = {r.name for v in views for r in v.needed}
    opened = {r.name for v in views for r in v.dlopen}
    assert needed >= CUPY_NEEDED, CUPY_NEEDED - needed
    assert opened >= CUPY_DLOPEN, CUPY_DLOPEN - opened
    # Nothing CUDA loads without a RUNPATH (the wheel relies on Python preloading them).
    assert all(r.path is None for v in views for r in (*v.needed, *v.dlopen)
               if is_cuda_library(r.name))


def test_cupy_audit_and_what_the_hook_would_add(cupy_and_split: tuple[Path, Path, Path]
                                                ) -> None:
    consumer, nvrtc, cudart = cupy_and_split
    audit = dlopen_audit(consumer, inputs=[str(nvrtc), str(cudart)], system=False)
    got = {(os.path.relpath(a.file, consumer).split(".")[0], a.kind, a.name, a.append)
           for a in audit}
    # Every module's CUDA names: the dlopen ones, and the DT_NEEDED ones (none loads here).
    dlopen = {g for g in got if g[1] == "dlopen"}
    assert dlopen == {
        ("cupy_backends/cuda/libs/nvrtc", "dlopen", "libnvrtc.so.12", str(nvrtc)),
        ("cupy_backends/cuda/libs/nvrtc", "dlopen", "libnvrtc.so.11.2", None),
        ("cupy_backends/cuda/libs/nvrtc", "dlopen", "libnvrtc.so.13", None),
        ("cupy_backends/cuda/api/runtime", "dlopen", "libcudart.so.12", str(cudart))}
    needed = {(g[0], g[2], g[3]) for g in got if g[1] == "needed"}
    assert ("cupy/cuda/jitify", "libnvrtc.so.12", str(nvrtc)) in needed
    assert ("cupy_backends/cuda/libs/cublas", "libcublas.so.12", None) in needed
    assert {g[1] for g in needed} >= CUPY_NEEDED
    result = CliRunner().invoke(main, ["ldd", str(consumer), "--no-system",
                                       "--inputs", f"{nvrtc}:{cudart}"])
    assert f"dlopen libnvrtc.so.12 would load nothing; the hook appends {nvrtc}" in result.output
    assert f"needed libnvrtc.so.12 would load nothing; the hook appends {nvrtc}" in result.output


def test_cupy_hook_appends_and_nvrtc_then_loads(cupy_and_split: tuple[Path, Path, Path],
                                                tmp_path: Path) -> None:
    consumer, nvrtc, cudart = cupy_and_split
    copy = tmp_path / "consumer"
    shutil.copytree(consumer, copy, symlinks=True)
    done = _hook(copy, {"cudasplitDlopenRunpaths": "1",
                        "cudasplitDlopenLibraryPath": f"{nvrtc}:{cudart}"})
    assert done.returncode == 0, done.stderr
    appended = set(re.findall(r"dlopens (\S+): appending (\S+) to", done.stderr))
    assert appended == {("libnvrtc.so.12", str(nvrtc)), ("libcudart.so.12", str(cudart))}
    module = next((copy / "cupy_backends/cuda/libs").glob("nvrtc.*.so"))
    one = view(module, LddOptions(system=False))
    assert one is not None
    loads = {r.name: r.path for r in one.dlopen}
    assert loads["libnvrtc.so.12"] == str(nvrtc / "libnvrtc.so.12")
    assert loads["libnvrtc.so.13"] is None


@needs_gcc
@pytest.mark.parametrize("how", ["addEnvHooks", "NIX_LDFLAGS"])
def test_hook_finds_inputs_the_way_stdenv_hands_them(opener: Path, inputs: tuple[Path, Path],
                                                      how: str) -> None:
    """Without cudasplitDlopenLibraryPath: the lib/ of every host input (stdenv calls the env
    hook the setup hook registers once per dependency) and NIX_LDFLAGS' -L directories."""
    nvrtc, cudnn = inputs
    if how == "addEnvHooks":
        body = ("envHooks=()\naddEnvHooks() { envHooks+=(\"$2\"); }\n"
                f"source {consumer_guards_hook()}\n"
                f'for dep in {nvrtc.parent} {cudnn.parent}; do "${{envHooks[0]}}" "$dep"; done\n')
        env: dict[str, str] = {}
    else:
        body = f"source {consumer_guards_hook()}\n"
        env = {"NIX_LDFLAGS": f"-rpath /x -L{nvrtc} -L{cudnn} -lfoo"}
    script = (f"set -euo pipefail\npostFixupHooks=()\n{body}"
              'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "out": str(opener.parent.parent), "outputs": "out",
                               "cudasplitForbiddenOutputs": "", "cudasplitDlopenRunpaths": "1",
                               **env})
    assert done.returncode == 0, done.stderr
    assert f"appending {nvrtc} to its RUNPATH" in done.stderr
    assert f"appending {cudnn} to its RUNPATH" in done.stderr


def test_cli_prints_the_hook_path() -> None:
    result = CliRunner().invoke(main, ["nix", "consumer-hook"])
    assert result.exit_code == 0 and Path(result.output.strip()).samefile(consumer_guards_hook())
