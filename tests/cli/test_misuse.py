"""Issue 24: no value is accepted silently. Misuse of the API fails at the call, naming the
parameter: a wrong type is a ``TypeError`` (:class:`OptionsTypeError`, also a
:class:`CudasplitError`), a wrong value a :class:`CudasplitError` subclass. The CLI turns the
same values into one line on stderr and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
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
from tests.support.tarutil import TOP, write_archive

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
