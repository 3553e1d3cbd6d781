"""Issue 24: no value is accepted silently. Misuse of the API fails at the call, naming the
parameter: a wrong type is a ``TypeError`` (:class:`OptionsTypeError`, also a
:class:`CudasplitError`), a wrong value a :class:`CudasplitError` subclass. The CLI turns the
same values into one line on stderr and exit 2.
"""

from __future__ import annotations

import hashlib
import inspect as _inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cudasplit
from cudasplit import (
    CudasplitError,
    MemorySink,
    OptionsError,
    OptionsTypeError,
    PackageId,
    RepackOptions,
    RunpathPolicyError,
    SplitOptions,
    inspect,
    platform_name,
    repack_to_dir,
    runpath_policy,
    split,
    split_many,
    split_nix,
    split_to_dir,
)
from cudasplit.cli import main
from tests.support.public import public
from tests.support.tarutil import TOP, write_archive

PUBLIC = public()  # every public name, of cudasplit and its documented modules

# -- SplitOptions: (field values, expected class, the name the message must hold) -------------

TYPE = OptionsTypeError
VALUE = OptionsError
OPTION_CASES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"outputs": "lib,dev"}, TYPE, "outputs"),
    ({"outputs": ["lib"]}, TYPE, "outputs"),
    ({"outputs": ()}, VALUE, "outputs"),
    ({"outputs": ("lib", "libs")}, VALUE, "unknown output"),
    ({"outputs": (None,)}, VALUE, "unknown output"),
    ({"patch": "no"}, TYPE, "patch"),
    ({"patch": None}, TYPE, "patch"),
    ({"strict": 1}, TYPE, "strict"),
    ({"dry_run": "yes"}, TYPE, "dry_run"),
    ({"overwrite": None}, TYPE, "overwrite"),
    ({"fsync": 0}, TYPE, "fsync"),
    ({"nix_markers": "true"}, TYPE, "nix_markers"),
    ({"skip_unsafe_members": 1}, TYPE, "skip_unsafe_members"),
    ({"check_fhs_refs": []}, TYPE, "check_fhs_refs"),
    ({"default_rules": "x"}, TYPE, "default_rules"),
    ({"runpath": "$ORIGIN"}, TYPE, "runpath"),
    ({"runpath": None}, TYPE, "runpath"),
    ({"patcher": "patchelf"}, VALUE, "patcher"),
    ({"patcher": 3}, TYPE, "patcher"),
    ({"package": "cuda_cudart"}, TYPE, "package"),
    ({"rules_files": "extra.toml"}, TYPE, "rules_files"),
    ({"rules_files": ["extra.toml"]}, TYPE, "rules_files"),
    ({"rules_files": ("",)}, VALUE, "rules_files[0]"),
    ({"rules_files": (3,)}, TYPE, "rules_files[0]"),
    ({"rules_dir": ""}, VALUE, "rules_dir"),
    ({"rules_dir": 5}, TYPE, "rules_dir"),
    ({"jobs": -1}, VALUE, "jobs"),
    ({"jobs": 1.5}, TYPE, "jobs"),
    ({"jobs": "4"}, TYPE, "jobs"),
    ({"jobs": True}, TYPE, "jobs"),
    ({"max_members": -1}, VALUE, "max_members"),
    ({"max_members": 0}, VALUE, "max_members"),
    ({"max_members": "9"}, TYPE, "max_members"),
    ({"max_total_bytes": 0}, VALUE, "max_total_bytes"),
    ({"max_total_bytes": 1e9}, TYPE, "max_total_bytes"),
    ({"max_ratio": 0}, VALUE, "max_ratio"),
    ({"max_ratio": -3.0}, VALUE, "max_ratio"),
    ({"max_ratio": float("nan")}, VALUE, "max_ratio"),
    ({"max_ratio": "200"}, TYPE, "max_ratio"),
    ({"max_ratio": True}, TYPE, "max_ratio"),
    ({"strip_components": -1}, VALUE, "strip_components"),
    ({"strip_components": "1"}, TYPE, "strip_components"),
    ({"cuda_major": "twelve"}, VALUE, "cuda_major"),
    ({"cuda_major": 12}, TYPE, "cuda_major"),
    ({"cuda_version": "twelve"}, VALUE, "cuda_version"),
    ({"cuda_version": "12"}, VALUE, "cuda_version"),
    ({"cuda_version": 12.9}, TYPE, "cuda_version"),
    ({"platform": "linux-x86-64"}, VALUE, "linux-x86_64"),   # the suggestion
    ({"platform": "x86_64-linux"}, VALUE, "platform"),       # a word: platform_name() maps it
    ({"platform": ""}, VALUE, "platform"),
    ({"python_version": "3"}, VALUE, "python_version"),
    ({"python_version": 3.12}, TYPE, "python_version"),
    ({"glibc_version": "2"}, VALUE, "glibc_version"),
    ({"glibc_version": 2.42}, TYPE, "glibc_version"),
    ({"cuda_component_hook": "relative/hook"}, VALUE, "cuda_component_hook"),
    ({"progress": "print"}, TYPE, "progress"),
    ({"package_roots": (("cuda_nvrtc",),)}, TYPE, "package_roots"),
    ({"package_roots": {"cuda_nvrtc": "/x"}}, TYPE, "package_roots"),
    # Issue 41: versions are short ASCII numbers (\d took "٢.٢٨"; 5,000 digits made int() raise
    # at the end of the run).
    ({"max_glibc": "\u0662.\u0662\u0668"}, VALUE, "max_glibc"),
    ({"max_glibc": "9" * 40 + ".1"}, VALUE, "max_glibc"),
    ({"cuda_version": "1" * 40 + ".0"}, VALUE, "cuda_version"),
    ({"python_version": "\u0663.\u0661\u0662"}, VALUE, "python_version"),
]


@pytest.mark.parametrize(("fields", "error", "named"), OPTION_CASES,
                         ids=[f"{next(iter(c[0]))}={next(iter(c[0].values()))!r}"
                              for c in OPTION_CASES])
def test_split_options_misuse(fields: dict[str, Any], error: type[Exception],
                              named: str) -> None:
    with pytest.raises(error) as info:
        SplitOptions(**fields)
    assert isinstance(info.value, CudasplitError) and info.value.exit_code == 2
    assert named in str(info.value) and "\n" not in str(info.value)
    if error is TYPE:
        assert isinstance(info.value, TypeError)


def test_good_options_still_build() -> None:
    good = SplitOptions(outputs=None, jobs=None, platform="linux-sbsa", cuda_version="12.9",
                        max_members=1, max_ratio=0.5, strip_components=0,
                        package=PackageId("cuda_cudart"), rules_files=("x.toml",),
                        package_roots=(("cuda_nvrtc", "/nix/store/x"),), cuda_major="12",
                        python_version="3.12", progress=print)
    assert good.effective_jobs() >= 1
    assert SplitOptions().jobs is None and SplitOptions(jobs=3).effective_jobs() == 3
    assert SplitOptions(cuda_version="12.9.1").cuda_version == "12.9.1"


# -- entry points --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("misuse") / f"{TOP}.tar.xz"
    return write_archive(path, [("file", "lib/libx.so.1", b"x")])


Call = Callable[[Path, Path], object]
CALLS: list[tuple[str, Call, type[Exception], str]] = [
    ("split-sink-none", lambda a, t: split(a, None), TYPE, "sink"),   # type: ignore[arg-type]
    ("split-sink-path", lambda a, t: split(a, t), TYPE, "sink"),     # type: ignore[arg-type]
    ("split-source-empty", lambda a, t: split("", MemorySink()), VALUE, "source"),
    ("split-source-int", lambda a, t: split(3, MemorySink()), TYPE, "source"),  # type: ignore
    ("split-source-bytes", lambda a, t: split(b"x.tar", MemorySink()), TYPE, "source"),  # type: ignore
    ("split-options-dict", lambda a, t: split(a, MemorySink(), {"patch": False}),  # type: ignore
     TYPE, "options"),
    ("split_to_dir-empty-dir", lambda a, t: split_to_dir(a, ""), VALUE, "output_dir"),
    ("split_to_dir-none-dir", lambda a, t: split_to_dir(a, None), TYPE, "output_dir"),  # type: ignore
    ("split_to_dir-int-dir", lambda a, t: split_to_dir(a, 7), TYPE, "output_dir"),  # type: ignore
    ("split_to_dir-nul-dir", lambda a, t: split_to_dir(a, "o\0x"), VALUE, "output_dir"),
    ("split_to_dir-empty-source", lambda a, t: split_to_dir("", t / "o"), VALUE, "source"),
    ("split_to_dir-none-source", lambda a, t: split_to_dir(None, t / "o"), TYPE,  # type: ignore
     "source"),
    ("split_to_dir-options-str", lambda a, t: split_to_dir(a, t / "o", "strict"),  # type: ignore
     TYPE, "options"),
    ("split_nix-env-list", lambda a, t: split_nix(a, ["out"]), TYPE, "env"),  # type: ignore
    ("split_nix-empty-source", lambda a, t: split_nix("", {}), VALUE, "source"),
    ("inspect-empty", lambda a, t: inspect(""), VALUE, "source"),
    ("inspect-options", lambda a, t: inspect(a, object()), TYPE, "options"),  # type: ignore
    ("explain-path-int", lambda a, t: cudasplit.explain(a, 3), TYPE, "path"),  # type: ignore
    ("split_many-str", lambda a, t: split_many(str(a), t / "o"), TYPE, "sources"),
    ("split_many-empty-item", lambda a, t: split_many([a, ""], t / "o"), VALUE, "sources[1]"),
    ("split_many-empty-dir", lambda a, t: split_many([a], ""), VALUE, "output_dir"),
    ("repack-empty-dir", lambda a, t: repack_to_dir(a, ""), VALUE, "output_dir"),
    ("repack-options", lambda a, t: repack_to_dir(a, t, None, {"fmt": "xz"}),  # type: ignore
     TYPE, "repack"),
    ("platform_name-typo", lambda a, t: platform_name("linux-x86-64"), VALUE, "linux-x86_64"),
    ("platform_name-unknown", lambda a, t: platform_name("sparc-solaris"), VALUE, "platform"),
    ("interpreter-unknown-arch", lambda a, t: runpath_policy(interpreters=["sparc=/lib/ld.so"]),
     RunpathPolicyError, "sparc"),
    ("tag-unknown", lambda a, t: runpath_policy(tag="dtrpath"), RunpathPolicyError, "tag"),
]


@pytest.mark.parametrize(("name", "call", "error", "named"), CALLS, ids=[c[0] for c in CALLS])
def test_entry_point_misuse(archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            name: str, call: Call, error: type[Exception], named: str) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may land in the current directory either
    with pytest.raises(error) as info:
        call(archive, tmp_path)
    assert isinstance(info.value, CudasplitError), type(info.value)
    assert named in str(info.value) and "\n" not in str(info.value)
    if error is TYPE:
        assert isinstance(info.value, TypeError)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_good_calls_still_work(archive: Path, tmp_path: Path) -> None:
    report = split(archive, MemorySink(), SplitOptions(patch=False))
    assert report.members
    assert platform_name("x86_64-linux") == "linux-x86_64"
    assert platform_name("linux-sbsa") == "linux-sbsa"
    assert runpath_policy(interpreters=["aarch64=/lib/ld-linux-aarch64.so.1"]).interpreters
    assert isinstance(RepackOptions(), RepackOptions)


# -- the CLI: one line, exit 2 ------------------------------------------------------------

CLI_CASES = [
    ("--platform", "linux-x86-64"),
    ("--cuda-version", "twelve"),
    ("--jobs", "-1"),
    ("--max-ratio", "0"),
    ("--outputs", ""),
    ("--interpreter", "sparc=/lib/ld.so"),
    ("--max-members", "0"),
]


@pytest.mark.parametrize(("option", "value"), CLI_CASES, ids=[c[0] for c in CLI_CASES])
@pytest.mark.parametrize("command", ["split", "inspect"])
def test_cli_refuses_silent_values(archive: Path, tmp_path: Path, command: str, option: str,
                                   value: str) -> None:
    args = [command, str(archive), option, value]
    if command == "split":
        args += ["-o", str(tmp_path / "out")]
    if command == "inspect" and option == "--interpreter":
        pytest.skip(f"inspect has no {option}")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and lines, result.stderr
    if option != "--max-members":  # click's own range check: its usage text, then one error
        assert len(lines) == 1 and lines[0].startswith("cudasplit: error: "), result.stderr
    assert not (tmp_path / "out").exists()


def test_cli_refuses_an_empty_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["split", "", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("cudasplit: error: source must not be empty "
                                     "('' is not a file or directory)")
    inspect_result = CliRunner().invoke(main, ["inspect", ""])
    assert inspect_result.exit_code == 2 and "source must not be empty" in inspect_result.stderr
    assert not (tmp_path / "out").exists()


# -- every public entry point, systematically (issue 33) --------------------------------------
#
# Each public function and each options or sink class of cudasplit and its documented modules gets valid
# arguments (GOOD); then each parameter in turn is given values of a wrong type, derived from
# its annotation (a bare string where a sequence is meant, a str where an int is, ...) and
# ``object()`` for all. The call must raise an OptionsTypeError (a CudasplitError and a
# TypeError) naming the parameter, at the call: never a TypeError, AttributeError or
# ValueError from inside, and never a run that goes ahead with the wrong value.

VALUES = ("Ambiguity", "BatchResult", "BudgetReport", "DlopenAudit", "Explanation", "Kind",
          "Layout", "LoadView", "Member", "MemberRecord", "MemberType", "OutputRecord",
          "Problem", "Progress", "RepackResult", "Report", "RuleSet", "RunpathPlan",
          "ToolkitView", "Sink", "PackageId", "StagedSink",
          # The records public calls return and the types of their fields (public so that
          # callers can name them: tests/unit/api/test_public_types.py).
          "AddNeeded", "Artifact", "Assertion", "BudgetViolation", "Change", "ClosureReport",
          "ClosureWarning", "CopyRecord", "Decision", "DlopenNeed", "DropEdit",
          "ExportedSymbol", "FeatureReport", "FeatureResult", "FeatureStatus", "Features",
          "FilePlan", "Gate", "Glob", "GpuCode", "Inside", "Limits", "Link", "LinkInto",
          "Manifest", "NixifyResult", "OutputSize", "OutputWhen", "Package", "PackageLink",
          "PackagePlan", "PackageSet", "PackageSettings", "PcEdit", "Pin", "PlatformPlan",
          "Profile", "PrunePlan", "Reference", "ReleaseDiff", "Rename", "Resolution", "Rule",
          "RuleRef", "RuleTrial", "RunpathPackage", "SetPackage", "SetsResult", "Source",
          "TextEdit", "TextEditsFrom", "VerifyReport", "VerifyResult", "VerifyStatus",
          "VersionNeed", "Where")
"""Public names that are values (records a call returns, enums, the Sink and Source
protocols): built by cudasplit, not arguments users get wrong; ``PackageId`` is made with
:func:`package_id`; ``StagedSink`` is an abstract base (a subclass's ``__init__`` is checked as
it calls it)."""


@dataclass
class World:
    """Valid arguments, on disk once per module."""

    root: Path
    archive: Path
    split: Path
    manifest: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("world")
    archive = write_archive(root / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x"),
                                                     ("file", "include/x.h", b"x")])
    split_to_dir(archive, root / "split", SplitOptions(patch=False))
    data = archive.read_bytes()
    manifest = root / "redistrib_12.9.1.json"
    manifest.write_text(json.dumps({"release_label": "12.9.1", "release_product": "cuda",
                                    "cuda_demo": {
        "name": "Demo", "version": "12.9.79", "linux-x86_64": {
            "relative_path": f"cuda_demo/linux-x86_64/{archive.name}",
            "sha256": hashlib.sha256(data).hexdigest(), "size": str(len(data))}}}))
    return World(root, archive, root / "split", manifest)


def good_arguments(w: World, out: Path) -> dict[str, dict[str, Any]]:
    """Valid keyword arguments of every public entry point (``out``: a fresh directory)."""
    report = inspect(w.archive, SplitOptions(patch=False))
    ruleset = cudasplit.rules.load_ruleset()
    policy = runpath_policy()
    return {
        "split": {"source": w.archive, "sink": MemorySink(), "options": None},
        "split_to_dir": {"source": w.archive, "output_dir": out / "o", "options": None},
        "split_nix": {"source": w.archive, "env": {"outputs": "out", "out": str(out / "n")},
                      "options": SplitOptions(patch=False, default_rules=True)},
        "split_many": {"sources": [w.archive], "output_dir": out / "m", "options": None},
        "inspect": {"source": w.archive, "options": None, "layout": None},
        "explain": {"source": w.archive, "path": "lib/libx.so.1", "options": None},
        "repack_to_dir": {"source": w.archive, "output_dir": out / "r", "options": None,
                          "repack": None},
        "batch_report": {"results": [], "relative": False},
        "directory_kind": {"path": w.split},
        "package_id": {"text": "cuda_cudart"},
        "platform_name": {"word": "linux-x86_64", "cuda_version": None},
        "runpath_policy": {"driver_link": "/run/opengl-driver", "cuda_compat": None,
                           "library_paths": (), "append": (), "keep_absolute": False,
                           "tag": "runpath", "interpreters": (), "ignore_missing": ()},
        "plan_runpath": {"existing": None, "needed": ["libc.so.6"], "own_dir_names": set(),
                         "package_dirs": {}, "library_index": {}, "policy": policy,
                         "is_compat_package": False},
        "load_ruleset": {"package_name": None, "extra_files": (), "rules_dir": None},
        "ruleset_for": {"package": None, "files": (), "default_rules": False},
        "check_rule_file": {"path": cudasplit._rulebook.default_rules_dir() / "default.toml"},
        "ruleset_toml": {"ruleset": ruleset},
        "package_entry_lines": {"ruleset": ruleset},
        "relative_report": {"report": report, "env": None},
        "measure_outputs": {"report": report},
        "open_source": {"path": w.archive, "package": None, "jobs": 1, "limits": None,
                        "strip_components": None, "memory_limit": None},
        "closure_of": {"split_dir": w.split, "roots": None, "env": None, "progress": None},
        "ldd": {"path": w.split, "maps": (), "driver_link": None, "interpreter": None,
                "ld_library_path": (), "system": True},
        "ambiguous_runpaths": {"path": w.split, "maps": (), "driver_link": None},
        "dlopen_audit": {"path": w.split, "inputs": (), "maps": (), "driver_link": None,
                         "interpreter": None, "ld_library_path": (), "system": True,
                         "views": None},
        "closure_budget": {"path": w.split, "forbid": ("static",), "max_bytes": None,
                           "store_dir": "/nix/store"},
        "consumer_guards_hook": {},
        "toolkit_view": {"split_dirs": [w.split], "dest": out / "tk", "packages": (),
                         "arm_target": "sbsa-linux", "overwrite": False, "dry_run": True},
        "load_manifest": {"path": w.manifest},
        "select_artifacts": {"manifest": cudasplit.releases.load_manifest(w.manifest),
                             "platforms": None, "cuda_variants": None, "packages": None},
        "verify_manifest": {"manifest": w.manifest, "tarball_dir": w.root, "platforms": (),
                            "cuda_variants": (), "packages": (), "jobs": 1, "progress": None},
        "manifest_features": {"manifest": w.manifest, "tarball_dir": w.root, "platforms": (),
                              "cuda_variants": (), "packages": (), "jobs": 1,
                              "extended": False, "progress": None},
        "features_of": {"tarball": w.archive, "extended": False, "jobs": 1},
        "nixify_manifest": {"manifest": w.manifest, "tarball_dir": w.root,
                            "output_dir": out / "nix", "platforms": (), "packages": (),
                            "base_url": None, "jobs": 1, "progress": None, "toolkit": False},
        "nixify_sets": {"manifests": [w.manifest], "output_dir": out / "sets",
                        "base_url": None},
        "diff_releases": {"old": w.archive, "new": w.archive, "tarball_dir": None,
                          "old_tarballs": None, "new_tarballs": None,
                          "platform": "linux-x86_64", "jobs": 1, "progress": None},
        "inside_of": {"path": w.split / "lib" / "lib" / "libx.so.1"},
        "exported_symbols": {"path": w.split / "lib" / "lib" / "libx.so.1"},
        "gpu_prune_plan": {"source": w.archive, "gpu_archs": "9.0", "jobs": 1},
        "sbom": {"sources": [w.archive], "manifest": None, "platform": None,
                 "packages": None, "package": None, "strip_components": None, "name": None,
                 "licence": None, "base_url": None, "fmt": "cyclonedx", "jobs": 1,
                 "progress": None},
        "sbom_documents": {"sources": [w.archive], "manifest": None, "platform": None,
                           "packages": None, "package": None, "strip_components": None,
                           "name": None, "licence": None, "base_url": None,
                           "formats": ("cyclonedx", "spdx"), "jobs": 1, "progress": None},
        # Options and sinks.
        "SplitOptions": {},
        "RepackOptions": {"prefix": None, "fmt": "zst", "level": None, "threads": 0,
                          "mtime": None, "staging_parent": None},
        "RunpathPolicy": {},
        "LayoutSpec": {"roots": (), "archives": False, "prefix": None},
        "MemorySink": {"layout": None},
        "DirectorySink": {"roots": {"out": out / "d"}, "staging_parent": None,
                          "overwrite": False, "durable": True},
        "TarballSink": {"directory": out / "t", "package": None, "prefix": None, "fmt": "zst",
                        "level": 10, "threads": 0, "mtime": None, "overwrite": False,
                        "staging_parent": None},
    }


def _entry_points() -> list[str]:
    names = []
    for name in PUBLIC:
        value = PUBLIC[name]
        if name in VALUES or not callable(value) or (
                isinstance(value, type) and issubclass(value, BaseException)):
            continue
        names.append(name)
    return names


def test_every_entry_point_has_good_arguments(tmp_path: Path, world: World) -> None:
    """A new public function or class must be added to GOOD (or VALUES) with valid arguments,
    so the sweep below covers it."""
    good = good_arguments(world, tmp_path)
    assert sorted(set(_entry_points()) - set(good)) == []
    for name, kwargs in good.items():
        params = _inspect.signature(PUBLIC[name]).parameters
        assert set(kwargs) <= set(params), (name, set(kwargs) - set(params))


def _wrong_values(annotation: str) -> list[object]:
    """Values of a wrong type for a parameter annotated ``annotation``."""
    wrong: list[object] = [object()]
    text = annotation.replace(" ", "")
    if text.startswith(("Sequence[", "Iterable[", "Collection[", "tuple[", "list[")):
        wrong.append("text")   # a bare string where several are meant
    elif text.startswith(("Mapping[", "dict[")):
        wrong.append(["a"])
    elif text in ("bool",):
        wrong.append("yes")
    elif text in ("int", "int|None"):
        wrong += ["4", 2.5]
    elif text == "float":
        wrong.append("4")
    elif text in ("str", "str|None"):
        wrong.append(3)
    elif "PathLike" in text or text in ("Path", "Path|None"):
        wrong += [3, b"x"]
    elif "Callback" in text or "Callable" in text:
        wrong.append("print")
    return wrong


def _cases() -> list[tuple[str, str, int]]:
    cases = []
    for name in _entry_points():
        for param in _inspect.signature(PUBLIC[name]).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            for index in range(len(_wrong_values(str(param.annotation)))):
                cases.append((name, param.name, index))
    return cases


@pytest.mark.parametrize(("name", "param", "index"), _cases(),
                         ids=[f"{n}-{p}-{i}" for n, p, i in _cases()])
def test_wrong_type_fails_at_the_call(tmp_path: Path, world: World,
                                      monkeypatch: pytest.MonkeyPatch, name: str, param: str,
                                      index: int) -> None:
    monkeypatch.chdir(tmp_path)
    function = PUBLIC[name]
    parameter = _inspect.signature(function).parameters[param]
    kwargs = dict(good_arguments(world, tmp_path)[name])
    wrong = _wrong_values(str(parameter.annotation))[index]
    kwargs[param] = wrong
    with pytest.raises(CudasplitError) as info:
        function(**kwargs)
    assert isinstance(info.value, TypeError), (type(info.value), info.value)
    assert param in str(info.value) or param.rstrip("s") in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", sorted(set(_entry_points()) - {"TarballSink",
                                                                   "DirectorySink"}))
def test_good_arguments_are_accepted(tmp_path: Path, world: World, name: str) -> None:
    """The GOOD table is right: each call goes through with it (sinks are only built)."""
    PUBLIC[name](**good_arguments(world, tmp_path)[name])


@pytest.mark.parametrize("name", sorted(_entry_points()))
def test_a_parameter_that_does_not_exist(tmp_path: Path, world: World, name: str) -> None:
    """A keyword that is not (or no longer) a parameter: an OptionsTypeError naming it and the
    function, not Python's bare TypeError."""
    kwargs = {**good_arguments(world, tmp_path)[name], "read_ahead_mb": 4}
    with pytest.raises(OptionsTypeError, match="read_ahead_mb"):
        PUBLIC[name](**kwargs)


VALUE_CASES = [("verify_manifest", "jobs", -1), ("manifest_features", "jobs", -2),
               ("nixify_manifest", "jobs", -1), ("diff_releases", "jobs", -1),
               ("features_of", "jobs", 0), ("open_source", "jobs", 0),
               ("open_source", "memory_limit", 5), ("open_source", "strip_components", -1),
               ("closure_budget", "max_bytes", -1), ("toolkit_view", "arm_target", "x86"),
               ("split_to_dir", "output_dir", ""), ("load_manifest", "path", "a\0b"),
               ("diff_releases", "platform", "linux-x86-64"),
               ("verify_manifest", "platforms", ("linux-x86-64",)),
               ("RepackOptions", "level", 99), ("RepackOptions", "fmt", "lz4")]


@pytest.mark.parametrize(("name", "param", "value"), VALUE_CASES,
                         ids=[f"{n}-{p}={v!r}" for n, p, v in VALUE_CASES])
def test_wrong_value_fails_at_the_call(tmp_path: Path, world: World, name: str, param: str,
                                       value: object) -> None:
    kwargs = {**good_arguments(world, tmp_path)[name], param: value}
    with pytest.raises(CudasplitError) as info:
        PUBLIC[name](**kwargs)
    assert "\n" not in str(info.value) and param.rstrip("s") in str(info.value), info.value


# -- issue 41: values of the right type that used to escape as foreign exceptions --------------
#
# A sweep of every public entry point with hostile values of each parameter's own type (empty,
# NUL, 5,000 digits, a 300-byte file name, a path into /proc, an empty list) found these: each
# raised an OSError, ValueError, TypeError or IndexError from inside.

VALUE_CASES_41 = [
    ("split_to_dir", "output_dir", "x" * 300, OptionsError, "output_dir"),        # ENAMETOOLONG
    ("split_to_dir", "source", "d/" * 2100, OptionsError, "source"),
    ("inspect", "source", "y" * 256, OptionsError, "source"),
    ("load_ruleset", "extra_files", ("a\0b",), OptionsError, "extra_files[0]"),   # embedded NUL
    ("ruleset_for", "files", ("a\0b",), OptionsError, "files[0]"),
    ("runpath_policy", "interpreters", ("x86_64=/lib\0",), OptionsError, "interpreters[0]"),
    ("closure_of", "roots", {"x": "/a\0"}, OptionsError, "roots"),
    ("sbom", "sources", (), OptionsError, "sources"),                               # IndexError
    ("gpu_prune_plan", "gpu_archs", "1" * 5000, OptionsError, "gpu_archs"),         # int() limit
    ("gpu_prune_plan", "source", "no-such-file", CudasplitError, "no-such-file"),   # ENOENT
]


@pytest.mark.parametrize(("name", "param", "value", "error", "named"), VALUE_CASES_41,
                         ids=[f"{c[0]}-{c[1]}" for c in VALUE_CASES_41])
def test_hostile_values_fail_at_the_call(tmp_path: Path, world: World,
                                         monkeypatch: pytest.MonkeyPatch, name: str,
                                         param: str, value: object, error: type[Exception],
                                         named: str) -> None:
    monkeypatch.chdir(tmp_path)
    kwargs = {**good_arguments(world, tmp_path)[name], param: value}
    with pytest.raises(error) as info:
        PUBLIC[name](**kwargs)
    assert isinstance(info.value, CudasplitError), type(info.value)
    assert named in str(info.value) and "\n" not in str(info.value), info.value
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_rules_dir_given_as_text_is_a_path() -> None:
    """``rules_dir`` is a path: as a str it raised TypeError (str / str)."""
    shipped = cudasplit._rulebook.default_rules_dir()
    assert cudasplit.rules.load_ruleset("cuda_cudart", rules_dir=str(shipped)).rules


def test_a_package_name_is_never_a_path(tmp_path: Path) -> None:
    """A package name that is no file name (a traversal, a 5,000-byte word) has no package
    rule file: it is never joined into a path (it raised ENAMETOOLONG, and ../x read a TOML
    outside the rules directory)."""
    rules = tmp_path / "rules"
    (rules / "packages").mkdir(parents=True)
    shipped = cudasplit._rulebook.default_rules_dir()
    (rules / "default.toml").write_text((shipped / "default.toml").read_text())
    (tmp_path / "evil.toml").write_text('[[rule]]\nname = "evil"\nmatch = ["**"]\n'
                                        'output = "lib"\n')
    for word in ("../../evil", "x" * 5000, "a/b"):
        ruleset = cudasplit.rules.load_ruleset(word, rules_dir=rules)
        assert all("evil" not in name for name in ruleset.files)


def test_trees_with_unreadable_links_are_walked(tmp_path: Path) -> None:
    """``/proc/1/cwd`` cannot be stat()ed: the tree walkers of ldd, ambiguous_runpaths and
    dlopen_audit raised PermissionError on it (lstat first now)."""
    if not Path("/proc/1/cwd").is_symlink():
        pytest.skip("no /proc/1")
    link = tmp_path / "tree"
    link.mkdir()
    (link / "cwd").symlink_to("/proc/1/cwd")
    for call in (cudasplit.outputs.ldd, cudasplit.guards.ambiguous_runpaths, cudasplit.guards.dlopen_audit):
        call(link)
