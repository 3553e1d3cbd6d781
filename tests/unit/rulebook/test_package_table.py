"""Every package of the table, split from its member list (tests/data/trees/packages/).

Each list is built into a tree (small gcc-built ELF files where the list says ELF) and split
for real into a directory with ``--nix-support``. The expected placement comes from an
independent model of Nixpkgs' buildRedist in this file -- outputs moved in the order doc,
samples, python, bin, dev, include, lib, static, stubs, the last move that matches a path and
whose output the package declares wins, then the documented differences (globs that
really recurse) -- not from cudasplit's rule engine. On top: links, ``.pc`` contents, the
RUNPATH written into every ELF file, nix-support files.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cudasplit import Report, SplitOptions, split_to_dir
from cudasplit.rules import load_ruleset
from tests.support.builders import dynamic_entries, have_compiler, tree_from_reference
from tests.support.paths import DATA, REPO

LISTS = sorted((DATA / "trees" / "packages").glob("*.txt"))
DRIVER = "/run/opengl-driver/lib"
NVRTC_ROOT = "/nix/store/00000000000000000000000000000000-cuda_nvrtc"
JITLINK_ROOT = "/nix/store/11111111111111111111111111111111-libnvjitlink"

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")


@dataclass(frozen=True)
class Expect:
    """What this file knows about a package, independently of rules/packages/*.toml."""

    outputs: tuple[str, ...]
    renames: tuple[tuple[str, str], ...] = ()     # path prefix renames before the moves
    drops: tuple[str, ...] = ()                   # fnmatch patterns of dropped members
    keep: dict[str, str] = field(default_factory=dict)  # fnmatch pattern -> output (first wins)
    propagated: tuple[str, ...] | None = None     # default: bin/include/lib present
    runpath_extra: tuple[str, ...] = ()           # appended package roots (dlopen)
    cuda: str = "12.9"


SIX = ("out", "dev", "include", "lib", "static", "stubs")
FIVE = ("out", "dev", "include", "lib", "static")
FOUR = ("out", "dev", "include", "lib")
OUT = ("out",)
NSIGHT_HOST = {"host-*/**": "bin", "target-*/**": "bin"}

EXPECT: dict[str, Expect] = {
    # Single output as Nixpkgs (cuda_cudart.nix); split outputs: tests/test_cudart_single.py.
    "cuda_cudart": Expect(OUT),
    "cuda_nvml_dev": Expect(("out", "dev", "include", "stubs"), propagated=("include", "stubs")),
    "cuda_cupti": Expect(("out", "dev", "include", "lib", "samples", "static"), cuda="12.8"),
    "cuda_nvrtc": Expect(SIX),
    "libcublas": Expect(SIX, runpath_extra=(NVRTC_ROOT + "/lib",)),
    "libcufft": Expect(SIX, runpath_extra=(NVRTC_ROOT + "/lib", JITLINK_ROOT + "/lib")),
    "libcurand": Expect(SIX), "libcusolver": Expect(SIX), "libcusparse": Expect(SIX),
    "libnvjitlink": Expect(SIX), "libnvjpeg": Expect(SIX),
    "libnpp": Expect(SIX, drops=("pkg-config/nppi-12.9.pc", "pkg-config/nppicom-12.9.pc")),
    "libcufile": Expect(FIVE), "libcuobjclient": Expect(FOUR), "cuda_opencl": Expect(FOUR),
    "cuda_nvtx": Expect(FOUR), "libcudla": Expect(("out", "dev", "include", "lib", "stubs")),
    "cuda_gdb": Expect(("out", "bin")),
    "cuda_nvprof": Expect(("out", "bin", "lib")),  # Nixpkgs cuda_nvprof.nix
    "cuda_profiler_api": Expect(("out", "dev", "include")),
    "fabricmanager": Expect(("out", "bin", "dev", "include", "lib")),
    "libnvidia_nscq": Expect(("out", "lib")),
    "cudnn": Expect(FIVE, runpath_extra=(NVRTC_ROOT + "/lib",)),
    "cudnn_jit": Expect(FIVE),
    # CUDA >= 13.3's name of cuda_cccl (Nixpkgs cccl.nix): include/cccl/*
    # un-nested, all in out (CMake files with the headers they name).
    # (the stale include/nv/ drop: tests/test_rules_coverage.py)
    "cccl": Expect(OUT, renames=(("include/cccl/", "include/"),), cuda="13.3"),
    "libcusparse_lt": Expect(FIVE, runpath_extra=(NVRTC_ROOT + "/lib",)),
    "libcutensor": Expect(FIVE, renames=(("lib/12/", "lib/"),), drops=("lib/11/*",)),
    "libcudss": Expect(FIVE), "cuquantum": Expect(FIVE), "nvcomp": Expect(FIVE),
    # Issue 28: no Nixpkgs buildRedist file; the package files' own placements.
    "libnvshmem": Expect(("out", "bin", "dev", "doc", "include", "lib", "static"),
                         keep={"lib/libnvshmem_device*.bc": "static", "share/skills/*": "doc"},
                         propagated=("bin", "include", "lib", "static")),
    "nvimgcodec": Expect(FOUR, keep={"extensions/*": "lib"}),
    "libnvjpeg_2k": Expect(FIVE), "libnvtiff": Expect(FIVE), "libnpp_plus": Expect(FIVE),
    "libcublasmp": Expect(FOUR), "libcusolvermp": Expect(FOUR), "libcal": Expect(FOUR),
    "cuda_nvcc": Expect(OUT, renames=(("nvvm/lib64/", "nvvm/lib/"),)),
    "libnvvm": Expect(OUT, renames=(("nvvm/", ""),), cuda="13.0"),
    "cuda_crt": Expect(OUT, cuda="13.0"),
    "cuda_culibos": Expect(OUT, cuda="13.0"),
    "libnvptxcompiler": Expect(OUT, cuda="13.0"),
    # Nixpkgs nsight_compute.nix: ncu, ncu-ui, host/, target/ moved into bin/.
    "nsight_compute": Expect(
        ("out", "doc"), renames=((r"re:^nsight-compute/[^/]+/(host|target)/", r"bin/\1/"),
                                 (r"re:^nsight-compute/[^/]+/(ncu|ncu-ui)$", r"bin/\1"),
                                 ("nsight-compute/2025.2.1/", "")),
        drops=("bin/host/*/Mesa/*", "bin/target/*qnx*/*"), keep={"docs/*": "doc"}),
    "nsight_systems": Expect(OUT, drops=(
        "*/libssl.so*", "*/libcrypto.so*", "*/libssh.so*", "*/libboost_*", "*/libstdc++.so*",
        "*/libarrow*", "*/libjpeg*", "host-*/Mesa/*", "host-*/python/bin/python*",
        "host-*/libexec/*", "nsight-systems/*/host-*/Mesa/*",
        "nsight-systems/*/host-*/python/bin/python*", "nsight-systems/*/host-*/libexec/*",
        "bin/nsys", "bin/nsys-ui", "bin/nsight-exporter", "bin/nsight-sys"),
        renames=((r"re:^nsight-systems/[^/]+/", ""),)),
    "tensorrt": Expect(
        ("out", "bin", "dev", "include", "lib", "samples", "static"),
        renames=(("targets/x86_64-linux-gnu/lib/", "lib/"), ("targets/x86_64-linux-gnu/bin/", "bin/")),
        drops=("lib", "bin", "python/*.whl", "targets/x86_64-linux-gnu/lib/stubs/*",
               "targets/x86_64-linux-gnu/lib/*_win*"),
        keep={"python/*": "include", "data/*": "samples"}),
    "mft": Expect(OUT, renames=(("usr/", ""),)),
    "mft_oem": Expect(OUT, renames=(("usr/", ""),)),
    "nvlsm": Expect(OUT, renames=(("usr/", ""),)),
    "collectx_bringup": Expect(OUT, renames=(("opt/mellanox/collectx/", ""),)),
}
SINGLE_OUT = ("cuda_cccl", "cuda_cuobjdump", "cuda_nvdisasm", "cuda_cuxxfilt", "cuda_nvprune",
              "cuda_sanitizer_api", "cuda_documentation", "cuda_demo_suite", "cuda_nsight",
              "cuda_nvvp", "cuda_sandbox_dev", "cuda_ctadvisor", "cuda_tileiras", "tileiras",
              "libnvfatbin", "imex", "libnvsdm",
              "nvidia_fs", "mft_autocomplete", "cuda_compat", "cuda_compat_orin",
              "nvidia_driver", "nsight_vse", "visual_studio_integration")
EXPECT.update({p: Expect(OUT) for p in SINGLE_OUT})
EXPECT.update({p: Expect(FOUR) for p in (f"nvpl_{n}" for n in (
    "blas", "common", "fft", "lapack", "rand", "scalapack", "sparse", "tensor"))})

# Nixpkgs' moves in its order; the last matching move into a declared output wins.
MOVES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("samples", ("samples/*",)),
    ("python", ("*.whl",)),
    ("bin", ("bin/*",)),
    ("dev", ("*.pc", "*.cmake", "share/pkgconfig/*", "lib/cmake/*")),
    ("include", ("include/*",)),
    ("lib", ("lib/*", "lib64/*")),
    ("static", ("*.a",)),
    ("stubs", ("lib/stubs/*", "stubs/*")),
)


def nixpkgs_output(path: str, expect: Expect) -> str:
    """The output buildRedist (with real ``**``) gives ``path`` (already renamed)."""
    for pattern, output in expect.keep.items():
        if fnmatch.fnmatch(path, pattern):
            return output
    if fnmatch.fnmatch(path, "host*/*") or fnmatch.fnmatch(path, "target*/*"):
        return "bin" if "bin" in expect.outputs else "out"   # profiler trees stay whole
    where = "out"
    for output, patterns in MOVES:
        target = output if output in expect.outputs else None
        if output == "include" and target is None and "dev" in expect.outputs:
            target = "dev"  # outputInclude falls back to dev
        if target is None or where == "samples":
            continue  # a missing output moves nothing; samples keep their files
        if any(fnmatch.fnmatch(path, p) for p in patterns):
            where = target
    if fnmatch.fnmatch(path, "lib/stubs/*") and "stubs" not in expect.outputs:
        where = "out"  # deliberately not lib: a stub must not shadow the driver (#293320)
    # multiple-outputs' fixup (_multioutDevs) then moves lib/cmake, pkgconfig dirs to dev.
    if where != "samples" and "dev" in expect.outputs and any(
            fnmatch.fnmatch(path, p) for p in ("lib/cmake/*", "*/pkgconfig/*", "share/aclocal/*")):
        where = "dev"
    return where


def renamed(path: str, expect: Expect) -> str:
    if path.startswith("pkg-config/"):
        path = "share/pkgconfig/" + path[len("pkg-config/"):]
    for old, new in expect.renames:
        if old.startswith("re:"):
            path = re.sub(old[3:], new, path, count=1)
        elif path.startswith(old):
            return new + path[len(old):]
    return path


@dataclass(frozen=True)
class Split:
    pname: str
    expect: Expect
    report: Report
    root: Path

    def out(self, name: str) -> Path:
        return self.root / name


def _split(list_file: Path, tmp_path: Path) -> Split:
    pname = list_file.stem
    expect = EXPECT[pname]
    top = tree_from_reference(list_file, tmp_path / "tree")
    options = SplitOptions(
        nix_markers=True, cuda_version=expect.cuda, jobs=1,
        package_roots=(("cuda_nvrtc", NVRTC_ROOT), ("libnvjitlink", JITLINK_ROOT)))
    report = split_to_dir(top, tmp_path / "split", options)
    return Split(pname, expect, report, tmp_path / "split")


def test_packages_page_table_is_generated_from_the_rules() -> None:
    """docs/reference/packages.md holds the table scripts/package_table.py renders."""
    script = REPO / "scripts" / "package_table.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    table = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           check=True).stdout
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) - 1 == len(LISTS)  # one row per package, plus the header
    assert any(r.startswith("| libcublas |") and "cuda_nvrtc" in r and "12.8" in r for r in rows)


def test_every_package_has_a_list_and_an_expectation() -> None:
    rules = {p.stem for p in (REPO / "rules" / "packages").glob("*.toml")}
    assert {p.stem for p in LISTS} == rules == set(EXPECT)
    assert len(LISTS) >= 50


@pytest.mark.parametrize("list_file", LISTS, ids=lambda p: p.stem)
def test_package(list_file: Path, tmp_path: Path) -> None:
    s = _split(list_file, tmp_path)
    declared = load_ruleset(s.pname).package.outputs
    assert declared == s.expect.outputs, "package table outputs differ from Nixpkgs'"
    _check_placements(s)
    _check_outputs_non_empty(s)
    _check_links(s)
    _check_pkgconfig(s)
    _check_runpaths(s)
    _check_nix_support(s)
    SPECIFIC.get(s.pname, lambda s: None)(s)


def _check_tensorrt(s: Split) -> None:
    """Nixpkgs' postInstall/postFixup: include/onnx links, trtexec NEEDs the plugin library."""
    onnx = s.out("include") / "include/onnx"
    assert {p.name: os.readlink(p) for p in onnx.iterdir()} == {
        "NvOnnxParser.h": "../NvOnnxParser.h", "NvOnnxConfig.h": "../NvOnnxConfig.h"}
    assert all((onnx / name).resolve().is_file() for name in ("NvOnnxParser.h",))
    needed = dynamic_entries(s.out("bin") / "bin/trtexec")["NEEDED"]
    assert "libnvinfer_plugin.so.10" in needed


def _check_cuda_gdb(s: Split) -> None:
    """No build Python given: every TUI wrapper stays, and the report says why."""
    tuis = sorted(p.name for p in (s.out("bin") / "bin").glob("cuda-gdb-python*-tui"))
    assert len(tuis) == 3
    assert [w.code for w in s.report.warnings if w.code == "python-version-unknown"] == [
        "python-version-unknown"]


def _check_libcudss(s: Split) -> None:
    """The list's cudss-config.cmake is a placeholder without the lines Nixpkgs rewrites: like
    --replace-fail, each edit that finds nothing is a problem
    (tests/unit/split/test_package_quirks_on_real_bytes.py rewrites a config that has them and
    finds the outputs with CMake)."""
    assert [(p.code, p.path) for p in s.report.problems] == [
        ("text-edit-unmatched", "lib/cmake/cudss/cudss-config.cmake")] * 2


SPECIFIC = {"tensorrt": _check_tensorrt, "cuda_gdb": _check_cuda_gdb,
            "libcudss": _check_libcudss}


def _check_placements(s: Split) -> None:
    for m in s.report.members:
        if m.kind in ("dir",):
            continue
        new = renamed(m.path, s.expect)
        if any(fnmatch.fnmatch(m.path, d) or fnmatch.fnmatch(new, d) for d in s.expect.drops):
            assert m.output is None and m.dest is None, f"{m.path} should be dropped ({m.rule})"
            continue
        if m.kind == "symlink":
            continue  # links follow their targets: _check_links
        want = nixpkgs_output(renamed(m.path, s.expect), s.expect)
        assert m.output == want, f"{m.path}: {m.output} ({m.rule}), Nixpkgs: {want}"
        assert m.dest is not None and (s.out(m.output) / m.dest).exists(), m.path


def _check_outputs_non_empty(s: Split) -> None:
    """checkCudaNonEmptyOutputs: every declared output but out/dev holds something."""
    for name in s.expect.outputs:
        if name in ("out", "dev"):
            continue
        content = [p for p in s.out(name).iterdir() if p.name != "nix-support"]
        assert content, f"declared output {name} is empty"
    assert not [p for p in s.report.problems if p.code == "empty-output"]


def _check_links(s: Split) -> None:
    for m in s.report.members:
        if m.kind != "symlink" or m.output is None or m.dest is None:
            continue
        link = s.out(m.output) / m.dest
        assert link.is_symlink(), m.path
        assert link.resolve().exists(), f"{m.path}: dangling in {m.output}"
        assert str(link.resolve()).startswith(str(s.out(m.output).resolve())), m.path


def _pc_files(s: Split) -> dict[str, str]:
    found = {}
    for output in s.expect.outputs:
        pcdir = s.out(output) / "share/pkgconfig"
        if pcdir.is_dir():
            found.update({p.name: p.read_text() for p in pcdir.iterdir() if not p.is_symlink()})
    return found


def _check_pkgconfig(s: Split) -> None:
    pcs = _pc_files(s)
    listed = {m.path.rsplit("/", 1)[1] for m in s.report.members
              if m.path.startswith("pkg-config/") and m.output is not None}
    assert set(pcs) == listed
    lib_root = s.out("lib" if "lib" in s.expect.outputs else "out")
    for name, text in pcs.items():
        libdir = re.search(r"^libdir=(.*)$", text, re.M)
        if libdir is None:
            continue
        if s.pname == "cuda_nvml_dev":
            # libdir is the stubs output's lib (the module appends /stubs); driver rpath.
            assert libdir[1] == f"{s.out('stubs')}/lib", text
            assert f"-lnvidia-ml -Wl,-rpath,{DRIVER}" in text, text
            assert (Path(libdir[1]) / "stubs/libnvidia-ml.so").exists()
        elif s.pname == "cuda_cudart" and name.startswith("cuda-"):
            stubs = "stubs" if "stubs" in s.expect.outputs else "out"
            assert libdir[1] == f"{s.out(stubs)}/lib/stubs", text
        else:
            assert libdir[1] == f"{lib_root}/lib", text
        if s.pname == "cuda_cudart":
            assert "cudaroot" not in text and f"-Wl,-rpath,{DRIVER}" in text, text
        if s.pname in ("libcublas", "libcufft", "libcurand", "libnvjpeg", "libnpp"):
            assert "Requires: cudart-12.9" in text, text
        if s.pname == "libcutensor":  # Nixpkgs adds none (it propagates cuda_cudart)
            assert "Requires: cudart" not in text, text
        if s.pname == "libcuobjclient":
            assert "Requires: cufile-" in text, text
        if s.pname == "cuda_opencl":
            assert "-lOpenCL" in text and "-lopencl" not in text, text
    # Unversioned aliases: cuda.pc -> cuda-12.9.pc (none for dropped modules).
    for name in pcs:
        alias = re.sub(r"-\d+\.\d+\.pc$", ".pc", name)
        if alias != name:
            dev = s.out("dev" if "dev" in s.expect.outputs else "out")
            assert os.readlink(dev / "share/pkgconfig" / alias) == name


def _check_runpaths(s: Split) -> None:
    for m in s.report.members:
        if not m.kind.startswith("elf-") or m.output is None or m.dest is None:
            continue
        path = s.out(m.output) / m.dest
        entries = dynamic_entries(path)
        runpath = (entries.get("RUNPATH") or entries.get("RPATH") or [""])[0].split(":")
        if "/stubs/" in f"/{m.dest}":
            assert "RUNPATH" not in entries, f"{m.path}: a stub must never be patched"
            continue
        if s.pname in ("cuda_compat", "cuda_compat_orin"):
            assert runpath[0] == DRIVER, (m.path, runpath)
            continue
        assert runpath[0] == DRIVER, (m.path, runpath)
        assert "$ORIGIN" in runpath, (m.path, runpath)
        assert not any("stubs" in e for e in runpath), (m.path, runpath)
        for extra in s.expect.runpath_extra:
            assert extra in runpath, (m.path, runpath)
        if not s.expect.runpath_extra:
            assert not any(e.startswith("/nix/store/") for e in runpath), (m.path, runpath)


def test_cuda_cccl_13_unnests_and_keeps_the_old_spelling(tmp_path: Path) -> None:
    """CUDA 13's include/cccl/* -> include/*, the stale include/nv/ gone first (its
    replacement comes from include/cccl/nv/), and include/cccl -> . for old spellings."""
    lines = ["text cuda_cccl-linux-x86_64-13.0.85-archive/LICENSE",
             "header cuda_cccl-linux-x86_64-13.0.85-archive/include/nv/target",
             "header cuda_cccl-linux-x86_64-13.0.85-archive/include/cccl/nv/target",
             "header cuda_cccl-linux-x86_64-13.0.85-archive/include/cccl/thrust/version.h"]
    listing = tmp_path / "cuda_cccl.txt"
    listing.write_text("\n".join(lines) + "\n")
    top = tree_from_reference(listing, tmp_path / "tree")
    (top / "include/nv/target").write_text("// stale\n")
    report = split_to_dir(top, tmp_path / "split", SplitOptions())
    out = tmp_path / "split/out"
    assert (out / "include/thrust/version.h").is_file()
    assert "stale" not in (out / "include/nv/target").read_text()
    assert report.member("include/nv/target").note.startswith("dropped by the package table")
    assert os.readlink(out / "include/cccl") == "."
    assert (out / "include/cccl/thrust/version.h").is_file()


def _check_nix_support(s: Split) -> None:
    outputs = s.expect.outputs
    default = tuple(o for o in ("bin", "include", "lib") if o in outputs)
    propagated = s.expect.propagated or default
    text = (s.out("out") / "nix-support/propagated-build-inputs").read_text().split()
    if "dev" in outputs:
        # out: bin/include/lib only (deliberately stricter); dev: the package's extras too.
        assert sorted(text) == sorted(str(s.out(o)) for o in propagated
                                      if o in ("bin", "include", "lib"))
        dev = (s.out("dev") / "nix-support/propagated-build-inputs").read_text().split()
        assert sorted(dev) == sorted(str(s.out(o)) for o in propagated)
    else:
        assert sorted(text) == sorted(str(s.out(o)) for o in propagated)
    for heavy in ("static", "stubs", "samples", "doc"):
        if heavy not in (s.expect.propagated or ()) or "dev" in outputs:
            assert str(s.out(heavy)) not in text  # no GBs of .a in every closure
    for output in outputs:
        component = (s.out(output) / "nix-support/cuda-component").read_text()
        assert f'[component]="{s.pname}"' in component and f'[output]="{output}"' in component
        hook = s.out(output) / "nix-support/setup-hook"
        has_stubs = (s.out(output) / "lib/stubs").is_dir() or (s.out(output) / "stubs").is_dir()
        assert hook.exists() == has_stubs, output
        if has_stubs:
            assert "*/lib/stubs" in hook.read_text() and DRIVER in hook.read_text()
