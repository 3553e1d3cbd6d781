"""End-to-end splits of realistic tarballs (real gcc-built ELF files, ar archives, link chains)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudasplit import Report, SplitOptions, split_to_dir
from cudasplit.rules import load_ruleset
from tests.support.builders import (
    EXPECTED_DEFAULT,
    build_large_tarball,
    expected_outputs,
)

DRIVER = "/run/opengl-driver"
COMPAT = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.9/compat"


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root``: file hash + mode, or link text."""
    result: dict[str, tuple[str, str]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            result[rel] = ("link", os.readlink(path))
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            result[rel] = ("file", f"{digest}:{oct(path.stat().st_mode & 0o777)}")
        else:
            result[rel] = ("dir", "")
    return result


def placed(report: Report) -> dict[str, str]:
    return {m.path: m.output for m in report.members if m.kind != "dir" and m.output}


@pytest.fixture(scope="module")
def split_outputs(redist_tarballs: dict[str, Path], redist_tree: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Report, dict]]:
    """Each compression (and the unpacked tree) split into the SAME directory in turn."""
    out = tmp_path_factory.mktemp("split") / "out"
    results = {}
    sources = {**redist_tarballs, "directory": redist_tree}
    for name, source in sources.items():
        options = SplitOptions(runpath=_policy(), jobs=2)
        report = split_to_dir(source, out, options)
        results[name] = (report, snapshot(out))
        shutil.rmtree(out)
    return results


def _policy():  # type: ignore[no-untyped-def]
    from cudasplit import RunpathPolicy
    return RunpathPolicy(driver_link=DRIVER, cuda_compat=COMPAT)


def test_every_member_lands_where_the_profile_says(split_outputs, redist_tree: Path) -> None:  # type: ignore[no-untyped-def]
    report, _ = split_outputs["xz"]
    assert placed(report) == dict(EXPECTED_DEFAULT)
    assert placed(report) == expected_outputs(redist_tree)
    assert report.problems == []


def test_same_tree_from_every_codec_and_the_directory(split_outputs) -> None:  # type: ignore[no-untyped-def]
    reference = split_outputs["xz"][1]
    assert len(reference) > 50
    for name, (_report, tree) in split_outputs.items():
        assert tree == reference, name


def test_no_dangling_symlinks_and_no_stub_in_lib(split_outputs, tmp_path: Path,
                                                 redist_tarballs) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o"
    split_to_dir(redist_tarballs["zst"], out, SplitOptions(runpath=_policy()))
    for path in out.rglob("*"):
        if path.is_symlink():
            assert path.exists(), f"dangling: {path} -> {os.readlink(path)}"
    assert not list((out / "lib").rglob("libcuda.so*"))


def test_runpaths_in_the_report(split_outputs) -> None:  # type: ignore[no-untyped-def]
    report, _ = split_outputs["zst"]
    rtc = report.member("lib/libdemoRtc.so.12.9.79")
    assert rtc.runpath_before == "$ORIGIN:"
    assert rtc.runpath_after == f"{COMPAT}:{DRIVER}/lib:$ORIGIN"
    assert rtc.runpath_tag == "RUNPATH" and rtc.patch in ("in-place", "append", "lief")
    blas = report.member("lib/libdemoBlas.so.12.9.79")
    assert blas.runpath_before == "$ORIGIN"
    assert blas.runpath_after == f"{COMPAT}:{DRIVER}/lib:$ORIGIN"
    assert blas.runpath_tag == "RUNPATH"  # DT_RPATH converted
    stub = report.member("lib/stubs/libcuda.so")
    assert stub.patch == "skipped"  # stubs are link-time only
    assert report.member("lib/libdemo_static.a").kind == "static"


def test_split_executable_runs_and_searches_the_planned_path(tmp_path: Path,
                                                             redist_tarballs) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o"
    report = split_to_dir(redist_tarballs["xz"], out, SplitOptions(runpath=_policy()))
    demo = report.member("bin/demo")
    lib_dir = f"{out}/lib/lib"
    assert demo.runpath_after == f"{COMPAT}:{DRIVER}/lib:{lib_dir}:$ORIGIN"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["LD_DEBUG"] = "libs"
    run = subprocess.run([str(out / "bin/bin/demo")], env=env, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr
    search = next(line for line in run.stderr.splitlines() if "search path=" in line)
    dirs = search.split("search path=", 1)[1].split("\t")[0].split(":")
    # The loader expands each entry into hwcaps subdirectories; keep the order of first sight.
    order = []
    for entry in dirs:
        for base in (COMPAT, f"{DRIVER}/lib", lib_dir, f"{out}/bin/bin"):
            if entry.startswith(base) and base not in order:
                order.append(base)
    assert order == [COMPAT, f"{DRIVER}/lib", lib_dir, f"{out}/bin/bin"]
    assert f"trying file={lib_dir}/libdemo.so.12" in run.stderr


def test_reference_member_lists_split_as_the_profile_says(reference_trees: dict[str, Path],
                                                          tmp_path: Path) -> None:
    # The default profile alone (package rules, e.g. nsight_systems' single output, are
    # tested in test_package_rules.py).
    default_only = tmp_path / "rules"
    default_only.mkdir()
    shutil.copy(Path(load_ruleset("x").files[-1]), default_only / "default.toml")
    for name, top in reference_trees.items():
        out = tmp_path / name
        report = split_to_dir(top, out, SplitOptions(patch=False, rules_dir=default_only))
        assert report.package["name"] == name
        expected = expected_outputs(top)
        assert placed(report) == expected, name
        for path in out.rglob("*"):
            if path.is_symlink():
                assert path.exists(), path


def test_host_target_trees_stay_whole(split_outputs) -> None:  # type: ignore[no-untyped-def]
    report, _ = split_outputs["zst"]
    trees = {m.output for m in report.members
             if m.path.startswith(("host-", "target-")) and m.output}
    assert trees == {"bin"}


@pytest.mark.slow
def test_memory_stays_bounded_on_a_300_mb_tarball(tmp_path: Path) -> None:
    tarball = build_large_tarball(tmp_path, size_mb=300, compression="zst")
    out = tmp_path / "out"
    # VmHWM belongs to the process's own address space, so unlike ru_maxrss it does not
    # inherit the (large) pytest parent's high-water mark across fork + exec.
    code = ("import re; from cudasplit import split_to_dir, SplitOptions;"
            f"split_to_dir({str(tarball)!r}, {str(out)!r}, SplitOptions());"
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak_kib = int(run.stdout.strip())
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total > 300 * 1024 * 1024 * 0.9
    # Members are ~100 MB each: buffering even one would show. Python + deps are ~60 MB.
    assert peak_kib < 150 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_files_needing_only_their_neighbours_are_patched_while_streaming(
        tmp_path: Path, redist_tarballs) -> None:  # type: ignore[no-untyped-def]
    from cudasplit import OUTPUT_NAMES, DirectorySink, open_source
    from cudasplit._split.pipeline import SplitRun

    sink = DirectorySink.for_output_dir(tmp_path / "o", list(OUTPUT_NAMES))
    run = SplitRun(open_source(redist_tarballs["xz"]), sink, SplitOptions(runpath=_policy()))
    report = run.run()
    assert run.patches is not None
    early = {job.path for job in run.patches.jobs if run.patches.patched_early(job)}
    late = {job.path for job in run.patches.jobs if not run.patches.patched_early(job)}
    # libdemo needs only glibc: patched as soon as it was written. bin/demo needs
    # libdemo.so.12 from another output (and a symlink): planned once the stream ended.
    assert "lib/libdemo.so.12.9.79" in early
    assert "bin/demo" in late
    # Either way the result is the same plan.
    for path in early | late:
        record = report.member(path)
        assert record.patch in ("in-place", "append", "lief", "unchanged", "skipped"), path
    assert report.member("lib/libdemo.so.12.9.79").runpath_after == f"{COMPAT}:{DRIVER}/lib:$ORIGIN"


def test_package_root_fills_nvrtc_entry_for_libcublas(tmp_path: Path) -> None:
    from tests.support.builders import build_redist_tree
    top = build_redist_tree(tmp_path / "src", pname="libcublas", version="12.9.1.4",
                            with_host_target=False, with_nvvm=False)
    nvrtc = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_nvrtc-12.9.86-lib"
    report = split_to_dir(top, tmp_path / "o", SplitOptions(
        runpath=_policy(), package_roots=(("cuda_nvrtc", nvrtc),)))
    after = report.member("lib/libdemo.so.12.9.1.4").runpath_after or ""
    assert after.endswith(f":$ORIGIN:{nvrtc}/lib")
    report = split_to_dir(top, tmp_path / "o2", SplitOptions(runpath=_policy()))
    assert "@" not in (report.member("lib/libdemo.so.12.9.1.4").runpath_after or "")
    assert [w.code for w in report.warnings] == ["package-root-missing"]


def test_dry_run_reports_the_planned_runpaths(tmp_path: Path, redist_tarballs) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "o"
    planned = split_to_dir(redist_tarballs["xz"], out, SplitOptions(runpath=_policy(),
                                                                    dry_run=True))
    assert not out.exists()
    real = split_to_dir(redist_tarballs["xz"], out, SplitOptions(runpath=_policy()))
    for member in real.members:
        if member.kind.startswith("elf-") and member.patch not in ("skipped", None):
            dry = planned.member(member.path)
            assert dry.patch == "planned", member.path
            assert (dry.runpath_before, dry.runpath_after, dry.needed_unresolved) == (
                member.runpath_before, member.runpath_after, member.needed_unresolved)
    from cudasplit import inspect
    bin_demo = inspect(redist_tarballs["zst"], SplitOptions(runpath=_policy())).member("bin/demo")
    assert bin_demo.runpath_after == f"{COMPAT}:{DRIVER}/lib:/${{lib}}/lib:$ORIGIN"


def test_cuda_compat_never_gets_its_own_compat_dir(tmp_path: Path) -> None:
    from tests.support.builders import compile_shared
    top = tmp_path / "cuda_compat-linux-aarch64-12.9.40-archive"
    compat = top / "compat"
    compat.mkdir(parents=True)
    compile_shared(compat, "libcuda.so.575.57.08", "int cuInit(int f) { return f; }",
                   soname="libcuda.so.1", needed_libs=("libnvrm_gpu.so",))
    (compat / "libcuda.so.1").symlink_to("libcuda.so.575.57.08")
    (top / "LICENSE").write_text("license")
    report = split_to_dir(top, tmp_path / "o", SplitOptions(runpath=_policy()))
    libcuda = report.member("compat/libcuda.so.575.57.08")
    assert libcuda.output == "out"
    # The driver link stays (libnvrm_* come from the driver), the compat dir does not.
    assert libcuda.runpath_after == f"{DRIVER}/lib:$ORIGIN"
    assert libcuda.needed_unresolved == []  # libnvrm_gpu is a driver library
