"""Commands that look without writing: ``inspect``, ``explain`` and ``rules show|check``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from .. import (
    CudasplitError,
    Explanation,
    Report,
    check_rule_file,
    explain,
    inspect,
    platform_name,
    ruleset_for,
    ruleset_toml,
)
from ._optgroups import COMMON, PATCH, GroupedCommand, jobs_option, split_options
from ._terminal import fail, plural, status_line
from ._text import data, say


@click.command("inspect", cls=GroupedCommand)
@click.argument("source", type=click.Path(exists=False))
@COMMON
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@jobs_option("decoder threads")
def inspect_command(source: str, as_json: bool, jobs: int | None, **kw: Any) -> None:
    """List every member with kind, size, output and rule; write nothing."""
    try:
        with status_line() as status:
            report = inspect(source, split_options(kw, COMMON, dry_run=True, jobs=jobs,
                                                   progress=status))
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(report.to_json(), nl=False)
        return
    for line in member_table(report):
        say(line)


def member_table(report: Report) -> list[str]:
    """One row per member under a header; the widths come from the rows, and the paths,
    whose length has no bound, come last so that long ones never push a column out of line.
    Directories are left out: they are created where their content lands. Packages with
    ELF files get a GLIBC column (the floor) and, with GPU code, a GPU column."""
    inside = any(m.gpu or m.glibc for m in report.members)
    gpu = any(m.gpu for m in report.members)
    rows = [("KIND", "SIZE", "OUTPUT", "RULE", *(("GLIBC",) if inside else ()),
             *(("GPU",) if gpu else ()), "MEMBER")]
    for m in report.members:
        if m.kind == "dir":
            continue
        size = f"{m.size:,}" if m.kind not in ("symlink", "hardlink") else ""
        path = m.path + (f" -> {m.link}" if m.link else "")
        if m.dest is not None and m.dest != m.path:
            path += f"  (as {m.dest})"
        extra = ((glibc_cell(m.glibc),) if inside else ()) + ((gpu_cell(m.gpu),) if gpu else ())
        rows.append((m.kind, size, m.output or "-", m.rule, *extra, path))
    columns = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(columns)]
    return ["  ".join(cell.rjust(widths[i]) if i == 1 else cell.ljust(widths[i])
                      for i, cell in enumerate(row[:columns])) + f"  {row[-1]}"
            for row in rows]


def glibc_cell(glibc: list[dict[str, str | None]] | None) -> str:
    """``2.27``: the file's GLIBC floor (``-`` when it needs none)."""
    need = next((n for n in glibc or [] if n.get("prefix") == "GLIBC"), None)
    return str(need["version"]) if need else "-"


def gpu_cell(gpu: list[dict[str, Any]] | None) -> str:
    """``sass:75,80,90a ptx:120``: the architectures a file carries code for, by kind."""
    kinds: dict[str, list[str]] = {}
    for row in gpu or []:
        kinds.setdefault(str(row["kind"]), []).append(str(row["arch"]).removeprefix("sm_"))
    return " ".join(f"{kind}:{','.join(archs)}" for kind, archs in kinds.items()) or "-"


@click.command("explain", cls=GroupedCommand)
@click.argument("source", type=click.Path(exists=False))
@click.argument("path")
@COMMON
@PATCH
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@jobs_option("decoder threads")
def explain_command(source: str, path: str, as_json: bool, jobs: int | None,
                    **kw: Any) -> None:
    """Say which rule placed PATH and which rules it passed over.

    PATH: an archive path (with or without the top directory, as `tar tf` prints it, `./`
    allowed) or an output path (lib/libfoo.so); near matches are suggested.
    """
    try:
        with status_line() as status:
            result = explain(source, path, split_options(kw, COMMON, PATCH, dry_run=True,
                                                         jobs=jobs, progress=status))
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(result.as_dict(), indent=2))
        return
    say(f"{result.path} ({result.kind})")
    if result.rename:
        say(f"  renamed by {result.rename} -> {result.dest}")
    produced = set(result.outputs) if result.outputs is not None else None
    for trial in result.tried:
        mark = "MATCH" if trial.matched else "pass "
        passed_on = (trial.matched and produced is not None and trial.output is not None
                     and trial.output not in produced and trial is not result.tried[-1])
        say(f"  {mark} {trial.rule:40} {', '.join(trial.globs)}"
            + (f" kind={','.join(trial.kinds)}" if trial.kinds else "")
            + (f"  ({trial.output}: not an output here, passed on)" if passed_on else ""))
    for line in outputs_lines(result):
        say(f"  {line}")
    say(f"  => output: {result.output or '(not placed)'}"
        + (f"  ({result.note})" if result.note else ""))
    for key, value in (result.elf or {}).items():
        if key in ("gpu", "glibc"):
            continue
        if value not in (None, []):
            say(f"  => {key}: {_readable(value)}")
    for line in inside_lines(result.elf or {}):
        say(f"  => {line}")


def outputs_lines(result: Explanation) -> list[str]:
    """Where the deciding rule names an output this split does not produce (cuda_cudart's
    package table declares only ``out``, so the ``stubs`` rule's member goes to ``out``): which
    outputs there are, who chose them, and why the member goes where it goes."""
    matched = [t for t in result.tried if t.matched]
    if result.outputs is None or result.output is None or not matched or \
            matched[-1].output == result.output:
        return []
    rule = matched[-1]
    source = result.outputs_from
    chooser = ("--outputs" if source == "outputs" else
               f"the package table, {_rules_file(source)}" if source else "the profile")
    why = ("the rule's fallback" if rule.fallback == result.output else
           "include's fallback" if rule.output == "include" and result.output == "dev" else
           "where a member goes that no rule places in an output produced here")
    others = "" if source == "outputs" else "; --outputs chooses others"
    return [f"outputs here: {', '.join(result.outputs)} (chosen by {chooser}{others}): "
            f"{rule.output} is not one, so {result.output}, {why}"]


def _rules_file(path: str) -> str:
    """``/…/rules/packages/cuda_cudart.toml`` -> ``rules/packages/cuda_cudart.toml``."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-3:]) if parts[-3:-1] == ["rules", "packages"] else path


def inside_lines(facts: dict[str, Any]) -> list[str]:
    """``explain``'s lines for what a file carries: its glibc floor, its GPU code."""
    lines = [f"needs {n['prefix']}_{n['version']} (symbol {n['symbol'] or '-'} from "
             f"{n['library']})" for n in facts.get("glibc") or []]
    for row in facts.get("gpu") or []:
        packed = f", {row['compressed']} compressed" if row["compressed"] else ""
        lines.append(f"gpu code: {row['kind']} {row['arch']}: "
                     f"{plural(row['entries'], 'entry', 'entries')}, "
                     f"{row['stored']:,} bytes stored ({row['size']:,} unpacked{packed})")
    return lines


def _readable(value: object) -> str:
    """``dlopen`` entries as ``libnvrtc.so.12 (from cuda_nvrtc)``, lists comma-separated."""
    if isinstance(value, list):
        return ", ".join(_readable(item) for item in value)
    if isinstance(value, dict):
        name, package = value.get("name"), value.get("package")
        return f"{name} (from {package})" if package else str(name)
    return str(value)


@click.group("rules")
def rules_group() -> None:
    """Show or check rule files."""


@rules_group.command("show")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--package", help="Include rules/packages/<NAME>.toml.")
@click.option("--profile", default="default", show_default=True, metavar="NAME",
              help="Whose layout: default (Nixpkgs' outputs) or conda-forge.")
@click.option("--platform", "platform", metavar="NAME", help="The platform a profile's "
              "@target_platform@/@targets_dir@ are filled for (linux-x86_64, linux-sbsa).")
def rules_show(files: Sequence[str], package: str | None, profile: str,
               platform: str | None) -> None:
    """Print the effective rules in precedence order (FILES first, then the shipped ones) as
    one TOML rule file: the package table merged key by key, then every rename and rule.
    Read back (tomllib), it gives the same rules; comments say which file each came from."""
    try:
        ruleset = ruleset_for(package, files, profile=profile,
                              platform=None if platform is None else platform_name(platform))
        data(ruleset_toml(ruleset), nl=False)
    except CudasplitError as exc:
        fail(exc)


@rules_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--profile", default="default", show_default=True, metavar="NAME",
              help="Check each file over this profile's default.toml (its outputs, variables).")
@click.option("--platform", "platform", metavar="NAME", help="The platform a profile's "
              "@target_platform@/@targets_dir@ are filled for (linux-x86_64, linux-sbsa).")
def rules_check(files: Sequence[str], profile: str, platform: str | None) -> None:
    """Validate rule files (each on its own); exit 2 with file:rule on the first error."""
    try:
        for name in files:
            check_rule_file(name, profile=profile,
                            platform=None if platform is None else platform_name(platform))
            say(f"{name}: ok")
    except CudasplitError as exc:
        fail(exc)
