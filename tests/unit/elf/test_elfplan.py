"""One planned edit per ELF file: the planner, early patching, races and write failures."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cudasplit import RepackOptions, SplitOptions, repack_to_dir, split_to_dir
from cudasplit._elf.patch import FailFastBackend
from cudasplit._elf.plan import (
    EditResult,
    ElfEdit,
    LibraryIndex,
    PlacedElf,
    PlanContext,
    RunpathPolicy,
    RunpathPolicyError,
    plan_elf,
)
from cudasplit._elf.read import read_elf_info
from cudasplit._sinks import DirectorySink
from cudasplit.errors import (
    CudasplitError,
    OutputError,
    UnknownPatcherError,
    UnresolvedLibrariesError,
)
from tests.support.builders import compile_executable, compile_shared, have_compiler
from tests.support.tarutil import write_archive

DRIVER_LIB = "/run/opengl-driver/lib"


def facts(needed: tuple[str, ...], *, interp: str | None = None, machine: str = "EM_X86_64",
          output: str = "bin", dest: str = "bin/tool") -> PlacedElf:
    info = read_elf_info(Path("/bin/sh"))  # any dynamic executable, fields replaced below
    assert info is not None
    from dataclasses import replace
    info = replace(info, needed=needed, runpath=None, rpath=None, interp=interp, machine=machine)
    return PlacedElf(output, dest, info)


# --- the pure planner -------------------------------------------------------------------------


def test_driver_like_name_of_the_package_is_not_final_early() -> None:
    """The disagreement of issue 11: a driver-like name the package ships later."""
    early = PlanContext(RunpathPolicy(), {("bin", "bin"): {"tool"}}, {}, complete=False)
    plan = plan_elf(facts(("libnvidia-demo.so.1", "libc.so.6")), early)
    assert not plan.final
    final = PlanContext(RunpathPolicy(), {("bin", "bin"): {"tool"}},
                        {"libnvidia-demo.so.1": "/out/lib/lib"})
    complete = plan_elf(facts(("libnvidia-demo.so.1", "libc.so.6")), final)
    assert complete.final
    assert complete.edit.runpath == f"{DRIVER_LIB}:/out/lib/lib:$ORIGIN"


def test_settled_names_make_an_early_plan_final_and_equal() -> None:
    own = {("bin", "bin"): {"tool", "libown.so.1"}}
    early = plan_elf(facts(("libown.so.1", "libm.so.6")),
                     PlanContext(RunpathPolicy(), own, {}, complete=False))
    final = plan_elf(facts(("libown.so.1", "libm.so.6")),
                     PlanContext(RunpathPolicy(), own, {"libx.so": "/out/lib/lib"}))
    assert early.final and early.edit == final.edit


def test_interpreter_only_for_the_arch_we_have_a_loader_for() -> None:
    policy = RunpathPolicy(interpreters=(("x86_64", "/nix/store/g-glibc/lib/ld.so"),))
    ctx = PlanContext(policy, {}, {})
    native = plan_elf(facts((), interp="/lib64/ld-linux-x86-64.so.2"), ctx)
    assert native.edit.interpreter == "/nix/store/g-glibc/lib/ld.so"
    assert native.interpreter_before == "/lib64/ld-linux-x86-64.so.2"
    cross = plan_elf(facts((), interp="/lib/ld-linux-aarch64.so.1", machine="EM_AARCH64"), ctx)
    assert cross.edit.interpreter is None
    library = plan_elf(facts((), interp=None), ctx)
    assert library.edit.interpreter is None


def test_ignore_missing_accepts_by_glob() -> None:
    policy = RunpathPolicy(ignore_missing=("libstdc++*",))
    plan = plan_elf(facts(("libstdc++.so.6", "libgcc_s.so.1")), PlanContext(policy, {}, {}))
    assert plan.unresolved == ("libgcc_s.so.1",)
    assert plan.ignored == ("libstdc++.so.6",)


def test_foreign_arch_files_never_fail_on_unresolved_names() -> None:
    policy = RunpathPolicy(target_arch="x86_64", fail_unresolved=True)
    arm = plan_elf(facts(("libstdc++.so.6",), machine="EM_AARCH64"), PlanContext(policy, {}, {}))
    assert arm.unresolved == () and arm.ignored == ("libstdc++.so.6",)
    native = plan_elf(facts(("libstdc++.so.6",)), PlanContext(policy, {}, {}))
    assert native.unresolved == ("libstdc++.so.6",)
    told = RunpathPolicy(target_arch="x86_64", interpreters=(("aarch64", "/l/ld.so"),))
    arm_told = plan_elf(facts(("libstdc++.so.6",), machine="EM_AARCH64"),
                        PlanContext(told, {}, {}))
    assert arm_told.unresolved == ("libstdc++.so.6",)


def test_replace_needed_is_planned_and_resolved_under_the_new_name() -> None:
    ctx = PlanContext(RunpathPolicy(), {}, {"libtiff.so": "/out/lib/lib"},
                      renames={"libtiff.so.5": "libtiff.so"})
    plan = plan_elf(facts(("libtiff.so.5",)), ctx)
    assert plan.edit.replace_needed == (("libtiff.so.5", "libtiff.so"),)
    assert "/out/lib/lib" in plan.edit.runpath.split(":")  # type: ignore[union-attr]


def test_bad_patcher_is_a_cudasplit_error_at_option_time() -> None:
    with pytest.raises(UnknownPatcherError) as caught:
        SplitOptions(patcher="bogus")
    assert isinstance(caught.value, CudasplitError)


@pytest.mark.parametrize("value", [(("", "/ld.so"),), (("x86_64", "ld.so"),),
                                   (("x86_64", "/a"), ("x86_64", "/b"))])
def test_interpreter_policy_validation(value: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(RunpathPolicyError):
        RunpathPolicy(interpreters=value)


# --- library index: arch checked like auto-patchelf -----------------------------------------


@pytest.mark.skipif(not have_compiler("aarch64"), reason="no aarch64 cross compiler")
def test_library_index_skips_other_architectures(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    compile_shared(tmp_path / "a", "libdual.so.1", "int f(void){return 1;}",
                   soname="libdual.so.1", cc="aarch64-linux-gnu-gcc")
    compile_shared(tmp_path / "b", "libdual.so.1", "int f(void){return 1;}",
                   soname="libdual.so.1")
    (tmp_path / "a" / "libtext.so").write_text("/* GNU ld script */")
    index = LibraryIndex.scan([str(tmp_path / "a"), str(tmp_path / "b")])
    assert index.for_arch(64, "EM_X86_64") == {"libdual.so.1": str(tmp_path / "b")}
    assert index.for_arch(64, "EM_AARCH64") == {"libdual.so.1": str(tmp_path / "a")}


# --- whole runs -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_bytes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("elfplan")
    lib = compile_shared(root, "libnvidia-demo.so.1", "int demo(void){return 7;}",
                         soname="libnvidia-demo.so.1")
    exe = compile_executable(root, "tool", "int demo(void);\nint main(void){return demo()-7;}",
                             needed_libs=[lib])
    other = compile_executable(root, "other", "int main(void){return 0;}")
    return {"lib": lib.read_bytes(), "exe": exe.read_bytes(), "other": other.read_bytes()}


def _runpaths(report) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {m.path: m.runpath_after for m in report.members if m.kind.startswith("elf")}


def test_driver_like_own_library_same_plan_early_and_dry(tmp_path: Path,
                                                          demo_bytes: dict[str, bytes]) -> None:
    # The executable comes first: early patching sees it before its library arrives.
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/tool", demo_bytes["exe"]),
        ("file", "lib/libnvidia-demo.so.1", demo_bytes["lib"])])
    out = tmp_path / "out"
    real = split_to_dir(archive, out, SplitOptions(jobs=2))
    dry = split_to_dir(archive, out, SplitOptions(dry_run=True))
    assert _runpaths(real) == _runpaths(dry)
    written = read_elf_info(out / "bin" / "bin" / "tool")
    assert written is not None and written.runpath == (
        f"{DRIVER_LIB}:{out.resolve()}/lib/lib:$ORIGIN")
    env = {**os.environ, "LD_LIBRARY_PATH": ""}
    assert subprocess.run([out / "bin" / "bin" / "tool"], env=env).returncode == 0


def test_repack_prefix_plans_the_same_in_dry_and_real_runs(
        tmp_path: Path, demo_bytes: dict[str, bytes]) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/tool", demo_bytes["exe"]),
        ("file", "lib/libnvidia-demo.so.1", demo_bytes["lib"])])
    for prefix in ("/opt/demo", None):
        dry = repack_to_dir(archive, tmp_path / "d", SplitOptions(dry_run=True),
                            RepackOptions(prefix=prefix, level=1)).report
        real = repack_to_dir(archive, tmp_path / f"r{prefix is None}", SplitOptions(),
                             RepackOptions(prefix=prefix, level=1)).report
        assert _runpaths(dry) == _runpaths(real)
    assert _runpaths(real)["bin/tool"] == (
        f"{DRIVER_LIB}:/cuda_demo-linux-x86_64-12.9.79/lib/lib:$ORIGIN")


def test_unresolved_names_fail_with_one_message(tmp_path: Path,
                                                 demo_bytes: dict[str, bytes]) -> None:
    root = tmp_path / "src"
    root.mkdir()
    a = compile_executable(root, "a", "int main(void){return 0;}",
                           needed_libs=["libmissing-one.so.1", "libmissing-two.so.2"])
    b = compile_executable(root, "b", "int main(void){return 0;}",
                           needed_libs=["libmissing-two.so.2"])
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/a", a.read_bytes()), ("file", "bin/b", b.read_bytes())])
    failing = SplitOptions(runpath=RunpathPolicy(fail_unresolved=True))
    with pytest.raises(UnresolvedLibrariesError) as caught:
        split_to_dir(archive, tmp_path / "out", failing)
    message = str(caught.value)
    assert "\n" not in message
    for part in ("bin/a (libmissing-one.so.1, libmissing-two.so.2)", "bin/b (libmissing-two.so.2)",
                 "ignore_missing", "library_paths"):  # the API's names (the CLI: the options)
        assert part in message
    assert not (tmp_path / "out").exists()  # failed before the outputs were renamed into place
    with pytest.raises(UnresolvedLibrariesError):  # --strict implies it
        split_to_dir(archive, tmp_path / "out", SplitOptions(strict=True))
    accepted = SplitOptions(runpath=RunpathPolicy(fail_unresolved=True,
                                                  ignore_missing=("libmissing-*",)))
    report = split_to_dir(archive, tmp_path / "out", accepted)
    assert report.member("bin/a").needed_unresolved == []
    assert not [w for w in report.warnings if w.code == "needed-unresolved"]
    plain = split_to_dir(archive, tmp_path / "out2", SplitOptions())
    assert [w.path for w in plain.warnings if w.code == "needed-unresolved"] == ["bin/a", "bin/b"]


def test_library_path_resolves_and_its_dir_goes_into_runpath(tmp_path: Path) -> None:
    libdir = tmp_path / "deps"
    libdir.mkdir()
    dep = compile_shared(libdir, "libdep.so.3", "int dep(void){return 0;}", soname="libdep.so.3")
    exe = compile_executable(tmp_path, "tool", "int dep(void);\nint main(void){return dep();}",
                             needed_libs=[dep])
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "bin/tool", exe.read_bytes())])
    policy = RunpathPolicy(library_paths=(str(libdir),), fail_unresolved=True)
    split_to_dir(archive, tmp_path / "out", SplitOptions(runpath=policy))
    tool = tmp_path / "out" / "bin" / "bin" / "tool"
    info = read_elf_info(tool)
    assert info is not None and info.runpath == f"{DRIVER_LIB}:{libdir}:$ORIGIN"
    assert subprocess.run([tool], env={**os.environ, "LD_LIBRARY_PATH": ""}).returncode == 0


def test_interpreter_written_and_the_program_runs_through_it(
        tmp_path: Path, demo_bytes: dict[str, bytes]) -> None:
    """A Nix-store-length loader path (longer than the 28-byte PT_INTERP it replaces)."""
    system = read_elf_info(Path("/bin/sh"))
    assert system is not None and system.interp is not None
    glibc = tmp_path / "nix" / "store" / ("0" * 32 + "-glibc-2.40-66") / "lib"
    glibc.mkdir(parents=True)
    loader = glibc / "ld-linux-x86-64.so.2"
    loader.write_bytes(Path(system.interp).read_bytes())
    loader.chmod(0o755)
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "bin/other", demo_bytes["other"])])
    policy = RunpathPolicy(interpreters=(("x86_64", str(loader)),))
    report = split_to_dir(archive, tmp_path / "out", SplitOptions(runpath=policy))
    dry = split_to_dir(archive, tmp_path / "out", SplitOptions(runpath=policy, dry_run=True))
    record = report.member("bin/other")
    assert record.interpreter_before == system.interp
    assert record.interpreter_after == str(loader)
    assert dry.member("bin/other").interpreter_after == record.interpreter_after
    tool = tmp_path / "out" / "bin" / "bin" / "other"
    assert read_elf_info(tool).interp == str(loader)  # type: ignore[union-attr]
    assert subprocess.run([tool]).returncode == 0


# --- issue 15: races and write failures -------------------------------------------------------


def test_duplicate_destination_never_patched_while_rewritten(
        tmp_path: Path, demo_bytes: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic: the early patch of the first copy is made slow; the second write of the
    same destination (a duplicate path, then lib64/x onto lib/x) must start after it ends."""
    events: list[str] = []
    lock = threading.Lock()
    early_started = threading.Event()
    real_apply = FailFastBackend.apply
    real_write = DirectorySink.write_file

    def slow_apply(self: FailFastBackend, path: str, edit: ElfEdit) -> EditResult:
        with lock:
            events.append(f"apply-start {Path(path).name}")
        early_started.set()
        time.sleep(0.2)
        result = real_apply(self, path, edit)
        with lock:
            events.append(f"apply-end {Path(path).name}")
        return result

    def logged_write(self, output, dest, stream, mode):  # type: ignore[no-untyped-def]
        with lock:
            again = f"write {dest}" in events
            events.append(f"write {dest}")
        if again:  # the old race needs the second write to overlap the early patch: force it
            assert early_started.wait(5)
        return real_write(self, output, dest, stream, mode)

    monkeypatch.setattr(FailFastBackend, "apply", slow_apply)
    monkeypatch.setattr(DirectorySink, "write_file", logged_write)
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/other", demo_bytes["other"]),
        ("file", "bin/other", demo_bytes["exe"]),       # replaces the first copy
        ("file", "lib64/libx.so", demo_bytes["lib"]),
        ("file", "lib/libx.so", demo_bytes["lib"])])    # same destination through lib64 -> lib
    report = split_to_dir(archive, tmp_path / "out", SplitOptions(jobs=1))
    first_write = events.index("write bin/other")
    second_write = events.index("write bin/other", first_write + 1)
    assert events.index("apply-start other") < events.index("apply-end other") < second_write
    tool = read_elf_info(tmp_path / "out" / "bin" / "bin" / "other")
    assert tool is not None and "libnvidia-demo.so.1" in tool.needed  # the second copy
    assert tool.runpath is not None and tool.runpath.startswith(DRIVER_LIB)
    assert not report.problems
    lib = read_elf_info(tmp_path / "out" / "lib" / "lib" / "libx.so")
    assert lib is not None and lib.runpath == f"{DRIVER_LIB}:$ORIGIN"


def test_disk_full_while_patching_fails_before_outputs_appear(
        tmp_path: Path, demo_bytes: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    import cudasplit._elf.patch.patcher as patch_module

    def full(fd: int, data: object, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(patch_module.os, "pwrite", full)
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "lib/libnvidia-demo.so.1", demo_bytes["lib"]),
        ("file", "bin/tool", demo_bytes["exe"])])
    with pytest.raises(OutputError, match="No space left"):
        split_to_dir(archive, tmp_path / "out", SplitOptions())
    assert not (tmp_path / "out").exists()


# --- CLI, explain, Nix environment ------------------------------------------------------------


def test_explain_shows_the_same_plan_as_the_dry_run(tmp_path: Path,
                                                    demo_bytes: dict[str, bytes]) -> None:
    from cudasplit import explain, inspect

    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/tool", demo_bytes["exe"]),
        ("file", "lib/libnvidia-demo.so.1", demo_bytes["lib"])])
    options = SplitOptions(runpath=RunpathPolicy(cuda_compat="/nix/store/c-compat/compat"))
    told = explain(archive, "bin/tool", options)
    record = inspect(archive, options).member("bin/tool")
    assert told.elf is not None
    assert told.elf["runpath_after"] == record.runpath_after
    assert told.elf["runpath_after"] == "/nix/store/c-compat/compat:/run/opengl-driver/lib:/${lib}/lib:$ORIGIN"


@pytest.mark.skipif(not have_compiler("aarch64"), reason="no aarch64 cross compiler")
def test_cli_interpreter_per_arch_and_ignore_missing(tmp_path: Path,
                                                     demo_bytes: dict[str, bytes]) -> None:
    from click.testing import CliRunner

    from cudasplit.cli import main

    cross = compile_executable(tmp_path, "armtool", "int main(void){return 0;}",
                               cc="aarch64-linux-gnu-gcc", needed_libs=["libarm-only.so.1"])
    archive = write_archive(tmp_path / "a.tar.xz", [
        ("file", "bin/other", demo_bytes["other"]), ("file", "bin/armtool", cross.read_bytes())])
    system = read_elf_info(Path("/bin/sh"))
    assert system is not None and system.interp is not None
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        report = tmp_path / "r.json"
        done = runner.invoke(main, ["split", str(archive), "-o", str(tmp_path / "o"),
                                    "--overwrite", "--dry-run", "--report", str(report),
                                    "--default-rules", *args])
        return done.exit_code, done.output + (report.read_text() if report.exists() else "")

    # A bare path: the loader's own header says x86_64, so the aarch64 file is left alone.
    code, _ = run("--interpreter", system.interp)
    assert code == 0
    import json
    members = {m["path"]: m for m in json.loads((tmp_path / "r.json").read_text())["members"]}
    assert members["bin/armtool"]["interpreter_after"] == "/lib/ld-linux-aarch64.so.1"
    code, _ = run("--interpreter", "aarch64=/nix/store/a-glibc/lib/ld-linux-aarch64.so.1")
    members = {m["path"]: m for m in json.loads((tmp_path / "r.json").read_text())["members"]}
    assert members["bin/armtool"]["interpreter_after"] == (
        "/nix/store/a-glibc/lib/ld-linux-aarch64.so.1")
    assert members["bin/other"]["interpreter_after"] == system.interp
    code, output = run("--strict")
    assert code == 1 and "bin/armtool (libarm-only.so.1)" in output
    code, output = run("--strict", "--ignore-missing", "libarm-*")
    assert code == 0, output


def test_nix_environment_lib_dirs_and_dynamic_linker(tmp_path: Path) -> None:
    from cudasplit._nix import nix_dynamic_linker, nix_library_dirs, with_nix_defaults

    cc = tmp_path / "cc"
    (cc / "nix-support").mkdir(parents=True)
    (cc / "nix-support" / "dynamic-linker").write_text("/nix/store/g-glibc/lib/ld-linux-x86-64.so.2\n")
    (cc / "nix-support" / "cc-ldflags").write_text("-L/nix/store/c-gcc-lib/lib -L /nix/store/d/lib")
    env = {"NIX_CC": str(cc), "buildInputs": "/nix/store/a-zlib /nix/store/b-expat/",
           "NIX_LDFLAGS": "-rpath /x -L/nix/store/e-extra/lib -lfoo -L relative"}
    assert nix_dynamic_linker(env) == "/nix/store/g-glibc/lib/ld-linux-x86-64.so.2"
    assert nix_library_dirs(env) == ("/nix/store/a-zlib/lib", "/nix/store/b-expat/lib",
                                     "/nix/store/e-extra/lib", "/nix/store/c-gcc-lib/lib",
                                     "/nix/store/d/lib")
    policy = with_nix_defaults(RunpathPolicy(library_paths=("/mine",)), env)
    assert policy.fail_unresolved
    assert policy.library_paths[0] == "/mine"
    import platform
    assert policy.interpreter_for(platform.machine()) == (
        "/nix/store/g-glibc/lib/ld-linux-x86-64.so.2")
    kept = with_nix_defaults(RunpathPolicy(interpreters=((platform.machine(), "/mine/ld.so"),)),
                             env)
    assert kept.interpreter_for(platform.machine()) == "/mine/ld.so"
    assert nix_dynamic_linker({}) is None and nix_library_dirs({}) == ()


def test_nix_library_dirs_under_structured_attrs(tmp_path: Path) -> None:
    """``__structuredAttrs``: Nix exports no ``buildInputs``; the lists are in the JSON file
    (a stdenvNoCC build has no NIX_LDFLAGS either, so that is where gcc's lib is)."""
    from cudasplit._nix import nix_library_dirs
    from cudasplit.errors import NixEnvironmentError

    attrs = tmp_path / ".attrs.json"
    attrs.write_text(json.dumps({
        "outputs": {"out": "/nix/store/o-out"},
        "buildInputs": ["/nix/store/c-gcc-13.3.0-lib", "/nix/store/a-zlib", 3],
        "propagatedBuildInputs": ["/nix/store/b-cudart"], "nativeBuildInputs": ["/n/tool"]}))
    env = {"NIX_ATTRS_JSON_FILE": str(attrs)}
    assert nix_library_dirs(env) == ("/nix/store/c-gcc-13.3.0-lib/lib", "/nix/store/a-zlib/lib",
                                     "/nix/store/b-cudart/lib")
    attrs.write_text(json.dumps({"outputs": {"out": "/o"}, "buildInputs": "not a list"}))
    assert nix_library_dirs(env) == ()
    attrs.write_text("[]")
    with pytest.raises(NixEnvironmentError, match="not a JSON object"):
        nix_library_dirs(env)
