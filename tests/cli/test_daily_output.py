"""What a person reads every day (issue 26): inspect's table, explain's dlopen lines, summary
sizes that agree with ``closure``, and counted words in the singular where they are one."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from cudasplit.cli import main
from cudasplit.outputs import closure_of
from tests.support.builders import compile_shared
from tests.support.tarutil import TOP, write_archive

LONG = "include/" + "/".join(["deeply-nested-directory"] * 5) + "/demo.h"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_inspect_has_a_header_aligned_columns_and_separators(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("dir", "lib", None), ("file", "lib/libdemo.so.1", b"x" * 1_234_567),
        ("symlink", "lib/libdemo.so", "libdemo.so.1"), ("file", LONG, b"#pragma once\n")])
    code, stdout, _ = _invoke("inspect", str(archive))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0].split() == ["KIND", "SIZE", "OUTPUT", "RULE", "MEMBER"]
    assert "1,234,567" in stdout
    assert not any(line.startswith("dir ") for line in lines)  # no "dir 0 -" rows
    # The member column starts at the same place on every row, however long the paths.
    starts = {line.index(path) for line, path in zip(lines, [
        "MEMBER", "lib/libdemo.so.1", "lib/libdemo.so ->", LONG], strict=True)}
    assert len(starts) == 1


def test_explain_prints_dlopen_entries_readably(tmp_path: Path) -> None:
    source = ('static const char *const n = "libnvrtc.so.12";\n'
              'const char *name(void) { return n; }\n')
    lib = compile_shared(tmp_path, "libopener.so.1", source, soname="libopener.so.1")
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libopener.so.1",
                                                          lib.read_bytes())])
    code, stdout, _ = _invoke("explain", str(archive), "lib/libopener.so.1")
    assert code == 0
    assert "{'" not in stdout and "[" not in stdout.split("=> output")[1]
    dlopen = [line for line in stdout.splitlines() if "dlopen:" in line]
    assert dlopen and "libnvrtc.so.12" in dlopen[0]


def test_summary_counts_what_closure_counts_in_the_singular(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [
        ("file", "lib/libdemo.so.1", b"x" * 5000), ("symlink", "lib/libdemo.so", "libdemo.so.1"),
        ("file", "include/demo.h", b"#pragma once\n")])
    out = tmp_path / "o"
    code, stdout, _ = _invoke("split", str(archive), "-o", str(out))
    assert code == 0
    lib = next(line for line in stdout.splitlines() if line.startswith("lib "))
    size = closure_of(out).sizes["lib"]
    assert (size.files, size.bytes) == (2, 5000 + len("libdemo.so.1"))
    assert re.search(r"\b2 files\s+5,012 bytes\b", lib), lib
    include = next(line for line in stdout.splitlines() if line.startswith("include "))
    assert re.search(r"\b1 file\s+13 bytes\b", include), include


def test_split_help_groups_its_options_under_headings() -> None:
    """48 options under one heading were a wall: source and rules, outputs, RUNPATH, Nix,
    limits, report, in that order, each option once, none left over (issue 43)."""
    import click

    from cudasplit.cli._optgroups import SECTIONS
    from cudasplit.cli._split import split_command

    code, stdout, _ = _invoke("split", "--help")
    assert code == 0
    headings = [line[:-1] for line in stdout.splitlines() if re.fullmatch(r"[A-Z][^ ].*:", line)]
    assert headings == [title for title, _ in SECTIONS]
    assert "Options:" not in stdout
    ctx = click.Context(split_command)
    for param in split_command.get_params(ctx):
        record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
        if record is not None:
            assert stdout.count(f"  {record[0]}  ") == 1, record[0]


def test_every_command_that_splits_groups_its_options_the_same_way() -> None:
    for command in ("split", "inspect", "explain", "repack"):
        code, stdout, _ = _invoke(command, "--help")
        assert code == 0
        assert "Source and rules:" in stdout and "Report and checks:" in stdout
        assert ("RUNPATH and ELF edits:" in stdout) is (command != "inspect")
        assert "Other options:" not in stdout, command


def test_explain_says_which_outputs_there_are_and_why_a_rule_is_passed_over(
        tmp_path: Path) -> None:
    """cuda_cudart's table declares only ``out``: the stubs rule MATCHes, the member goes to
    ``out``, and the lines between say why (issue 43: a MATCH of stubs, then ``=> out``)."""
    import json

    top = "cuda_cudart-linux-x86_64-12.9.79-archive"
    archive = write_archive(tmp_path / f"{top}.tar.xz", [
        ("file", "lib/stubs/libcuda.so", b"stub"), ("file", "lib/libcudart_static.a", b"!<arch>\n")],
        top=top)
    code, stdout, _ = _invoke("explain", str(archive), "lib/stubs/libcuda.so")
    assert code == 0
    assert "  outputs here: out (chosen by the package table, rules/packages/cuda_cudart.toml; " \
           "--outputs chooses others): stubs is not one, so out, the rule's fallback" in stdout
    assert stdout.splitlines()[-1].startswith("  => output: out")
    code, stdout, _ = _invoke("explain", str(archive), "lib/libcudart_static.a", "--outputs",
                              "out,dev")
    lines = stdout.splitlines()
    assert any("MATCH default.toml:static-archives" in line
               and line.endswith("(static: not an output here, passed on)") for line in lines)
    assert any("MATCH default.toml:libraries" in line for line in lines)
    assert lines[-1] == "  => output: out"
    code, stdout, _ = _invoke("explain", str(archive), "lib/stubs/libcuda.so", "--json")
    data = json.loads(stdout)
    assert data["outputs"] == ["out"] and data["outputs_from"].endswith(
        "rules/packages/cuda_cudart.toml")
    assert [t["fallback"] for t in data["tried"] if t["matched"]] == ["out"]


def test_summary_columns_fit_a_profile_s_long_output_names() -> None:
    """conda-forge outputs are conda package names (``cuda-cudart-dev_linux-64``): the name
    column is as wide as the longest, so the counts stay in one column (issue 43)."""
    from cudasplit import OutputRecord, Report

    report = Report("x.tar.xz", {}, outputs={
        "cuda-cudart-dev_linux-64": OutputRecord("/o/dev", 1, 10),
        "cuda-cudart": OutputRecord("/o/lib", 2, 20_000)})
    lines = report.summary_lines()
    assert [line.split()[0] for line in lines] == ["cuda-cudart", "cuda-cudart-dev_linux-64"]
    assert len({line.index(" byte") for line in lines}) == 1
    assert "1 file " in lines[1] and "2 files" in lines[0]
