"""Commands that look without writing: ``inspect``, ``explain`` and ``rules show|check``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from .. import (
    CudasplitError,
    Report,
    check_rule_file,
    explain,
    inspect,
    ruleset_for,
    ruleset_toml,
)
from ._optgroups import COMMON, PATCH, split_options
from ._terminal import fail, status_line
from ._text import data, say


@click.command("inspect")
@click.argument("source", type=click.Path(exists=False))
@COMMON
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def inspect_command(source: str, as_json: bool, **kw: Any) -> None:
    """List every member with kind, size, output and rule; write nothing."""
    try:
        with status_line() as status:
            report = inspect(source, split_options(kw, COMMON, dry_run=True, progress=status))
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
    Directories are left out: they are created where their content lands."""
    rows = [("KIND", "SIZE", "OUTPUT", "RULE", "MEMBER")]
    for m in report.members:
        if m.kind == "dir":
            continue
        size = f"{m.size:,}" if m.kind not in ("symlink", "hardlink") else ""
        path = m.path + (f" -> {m.link}" if m.link else "")
        if m.dest is not None and m.dest != m.path:
            path += f"  (as {m.dest})"
        rows.append((m.kind, size, m.output or "-", m.rule, path))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return [f"{kind:{widths[0]}}  {size:>{widths[1]}}  {output:{widths[2]}}  "
            f"{rule:{widths[3]}}  {path}" for kind, size, output, rule, path in rows]


@click.command("explain")
@click.argument("source", type=click.Path(exists=False))
@click.argument("path")
@COMMON
@PATCH
@click.option("--json", "as_json", is_flag=True)
def explain_command(source: str, path: str, as_json: bool, **kw: Any) -> None:
    """Say which rule placed PATH and which rules it passed over.

    PATH: an archive path (with or without the top directory, as `tar tf` prints it, `./`
    allowed) or an output path (lib/libfoo.so); near matches are suggested.
    """
    try:
        with status_line() as status:
            result = explain(source, path, split_options(kw, COMMON, PATCH, dry_run=True,
                                                         progress=status))
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(result.as_dict(), indent=2))
        return
    say(f"{result.path} ({result.kind})")
    if result.rename:
        say(f"  renamed by {result.rename} -> {result.dest}")
    for trial in result.tried:
        mark = "MATCH" if trial.matched else "pass "
        say(f"  {mark} {trial.rule:40} {', '.join(trial.globs)}"
                   + (f" kind={','.join(trial.kinds)}" if trial.kinds else ""))
    say(f"  => output: {result.output or '(not placed)'}"
               + (f"  ({result.note})" if result.note else ""))
    for key, value in (result.elf or {}).items():
        if value not in (None, []):
            say(f"  => {key}: {_readable(value)}")


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
def rules_show(files: Sequence[str], package: str | None) -> None:
    """Print the effective rules in precedence order (FILES first, then the shipped ones) as
    one TOML rule file: the package table merged key by key, then every rename and rule.
    Read back (tomllib), it gives the same rules; comments say which file each came from."""
    try:
        ruleset = ruleset_for(package, files)
        data(ruleset_toml(ruleset), nl=False)
    except CudasplitError as exc:
        fail(exc)


@rules_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def rules_check(files: Sequence[str]) -> None:
    """Validate rule files (each on its own); exit 2 with file:rule on the first error."""
    try:
        for name in files:
            check_rule_file(name)
            say(f"{name}: ok")
    except CudasplitError as exc:
        fail(exc)
