"""Option errors look like every other error: ``cudasplit: error: ...``, one line, exit 2,
through click's test runner and through the real entry point alike (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.paths import REPO

CASES = [
    (["split"], "Missing argument"),
    (["split", "x.tar.xz", "-o", "o", "--bogus"], "No such option '--bogus'"),
    (["split", "x.tar.xz", "-o", "o", "--jobs", "abc"], "'abc' is not a valid integer"),
    (["ldd", "/nonexistent/path"], "does not exist"),
    (["ldd", ".", "--map", "bad"], "expected /FROM=DIR"),
    (["split", "x.tar.xz"], "give exactly one of --output-dir DIR or --nix"),
    (["nosuch"], "No such command 'nosuch'"),
]


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_one_line_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("cudasplit: error: ") and says in result.stderr
    assert "Usage:" not in result.stderr and result.stdout == ""


def test_real_entry_point_too() -> None:
    done = subprocess.run([sys.executable, "-m", "cudasplit", "split", "--bogus"],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("cudasplit: error: No such option '--bogus'")
    assert done.stderr.count("\n") == 1


def test_help_and_version_still_exit_0() -> None:
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0
    assert CliRunner().invoke(main, ["split", "--help"]).exit_code == 0


# Issue 33 (asked for in 36): an option error names the option as typed, not the API's
# parameter behind it (``--jobs must be ...``, never ``jobs must be ...``).
FLAG_CASES = [
    (["split", "{archive}", "-o", "{out}", "--jobs", "-1"], "--jobs"),
    (["split", "{archive}", "-o", "{out}", "--memory-limit", "5"], "--memory-limit"),
    (["split", "{archive}", "-o", "{out}", "--cuda-major", "x"], "--cuda-major"),
    (["split", "{archive}", "-o", "{out}", "--python-version", "3"], "--python-version"),
    (["inspect", "{archive}", "--max-size", "0"], "--max-size"),
    (["inspect", "{archive}", "--platform", "linux-x86-64"], "--platform"),
    (["repack", "{archive}", "-o", "{out}", "--level", "99"], "--level"),
    (["repack", "{archive}", "-o", "{out}", "--format", "xz", "--level", "10"], "--level"),
    (["repack", "{archive}", "-o", "{out}", "--threads", "-5"], "--threads"),
    (["repack", "{archive}", "-o", "{out}", "--prefix", "relative"], "--prefix"),
    (["verify", "{manifest}", "--tarballs", "{root}", "-j", "-3"], "--jobs"),
    (["nixify", "{manifest}", "--tarballs", "{root}", "-o", "{out}", "-j", "-1"], "--jobs"),
    (["diff", "{manifest}", "{manifest}", "-j", "-1"], "--jobs"),
    (["diff", "{manifest}", "{manifest}", "--platform", "linux-x86-64"], "--platform"),
    # Issue 43: the RUNPATH policy's and the other options' errors named the API's fields.
    (["split", "{archive}", "-o", "{out}", "--driver-link", "rel"], "--driver-link"),
    (["split", "{archive}", "-o", "{out}", "--cuda-compat", "rel"], "--cuda-compat"),
    (["split", "{archive}", "-o", "{out}", "--append-runpath", "a:b"], "--append-runpath"),
    (["split", "{archive}", "-o", "{out}", "--interpreter", "rel"], "--interpreter"),
    (["split", "{archive}", "-o", "{out}", "--max-glibc", "abc"], "--max-glibc"),
    (["split", "{archive}", "-o", "{out}", "--profile", "nope"], "--profile"),
    (["explain", "{archive}", "lib/libx.so.1", "--driver-link", "rel"], "--driver-link"),
    (["repack", "{archive}", "-o", "{out}", "--max-glibc", "2"], "--max-glibc"),
    (["split", "{archive}", "-o", "{out}", "--package", "nosuch"], "--default-rules"),
    (["split", "{archive}", "-o", "{out}", "--max-size", "10"], "--max-size"),
    (["split", "{archive}", "-o", "{out}", "--max-members", "1"], "--max-members"),
    (["gpu-plan", "{archive}", "--gpu-archs", "hopper"], "--gpu-archs"),
]


@pytest.mark.parametrize(("args", "flag"), FLAG_CASES, ids=[" ".join(a[:1] + a[-2:])
                                                            for a, _ in FLAG_CASES])
def test_option_errors_name_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    from tests.support.tarutil import TOP, write_archive

    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x")])
    manifest = tmp_path / "redistrib_12.9.1.json"
    manifest.write_text('{"release_label": "12.9.1"}')
    values = {"archive": str(archive), "out": str(tmp_path / "out"), "root": str(tmp_path),
              "manifest": str(manifest)}
    result = CliRunner().invoke(main, [a.format(**values) for a in args])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("cudasplit: error: ")
    assert flag in result.stderr, result.stderr
    field = flag.removeprefix("--").replace("-", "_")
    assert f" {field} " not in result.stderr and not result.stderr.startswith(
        f"cudasplit: error: {field}"), result.stderr
    assert not (tmp_path / "out").exists()


# -- the library names its parameters, the command line its options (issue 43) --------------


def test_library_errors_name_parameters_not_options(tmp_path: Path) -> None:
    from cudasplit import LimitExceededError, OptionsError, PackageId, SplitOptions, split_to_dir
    from tests.support.tarutil import TOP, write_archive

    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x" * 64)])
    with pytest.raises(LimitExceededError) as bomb:
        split_to_dir(archive, tmp_path / "o", SplitOptions(max_total_bytes=10))
    assert "raise max_total_bytes" in str(bomb.value) and "--" not in str(bomb.value)
    with pytest.raises(OptionsError) as unknown:
        split_to_dir(archive, tmp_path / "o", SplitOptions(package=PackageId("nosuch")))
    assert "(default_rules)" in str(unknown.value) and "--" not in str(unknown.value)


def _flags() -> set[str]:
    """Every option of every command, as typed (``--package-root``)."""
    import importlib

    import click

    from cudasplit.cli._main import COMMANDS

    found: set[str] = set()

    def walk(command: click.Command) -> None:
        for param in command.params:
            found.update(o for o in getattr(param, "opts", ()) if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    for module, attr in COMMANDS.values():
        walk(getattr(importlib.import_module(f"cudasplit.cli.{module}"), attr))
    return found


# Library text that may name an option: what it writes runs the command line itself.
CALLS_THE_CLI = {
    "cudasplit/_release/nixify/render.py": "a comment of a generated expression whose build "
                                           "runs cudasplit through its setup hook",
    "cudasplit/_release/nixify/toolkit.py": "a generated expression that runs cudasplit toolkit",
    "cudasplit/_launch.py": "the program's entry point reads the split command line (its "
                            "table of options that take a value) before the CLI loads",
}


def test_the_library_names_no_command_line_option() -> None:
    """Messages, problems and log records of the library name its parameters
    (``max_total_bytes``), never the options (``--max-size``): an API user has no option, and
    the command line turns the one into the other (cli/_text.flag_named)."""
    import ast
    import re

    flags = _flags()
    pattern = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    found = []
    for path in sorted((REPO / "cudasplit").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel.startswith("cudasplit/cli/") or rel in CALLS_THE_CLI:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings:
                named = sorted(set(pattern.findall(node.value)) & flags)
                if named:
                    found.append(f"{rel}:{node.lineno}: {named}")
    assert found == []


def test_flag_named_turns_parameters_into_options() -> None:
    from cudasplit.cli._text import FIELD_FLAGS, flag_named

    assert flag_named("jobs must be 0 or more") == "--jobs must be 0 or more"
    assert flag_named("append: 'x' is bad") == "--append-runpath: 'x' is bad"
    assert flag_named("give its root (package_roots x=DIR)", leading=False) == \
        "give its root (--package-root x=DIR)"
    assert flag_named("raise max_total_bytes", leading=False) == "raise --max-size"
    assert flag_named("name the package (package PNAME)", leading=False) == \
        "name the package (--package PNAME)"
    # Words that only look like parameters stay: a package, a path, prose.
    for text in ("cuda_compat's libcuda", "lib/max_ratio.h", "the package table",
                 "platform linux-sbsa", "@target_platform@", "'cuda_version' must be"):
        assert flag_named(text, leading=False) == text
    assert flag_named(flag_named("raise max_total_bytes")) == "raise --max-size"  # once only
    assert set(FIELD_FLAGS.values()) <= _flags()
