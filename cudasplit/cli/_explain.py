"""Command ``explain``: which rule placed a path, which it passed over, what the file carries."""

from __future__ import annotations

import json
from typing import Any

import click

from .. import CudasplitError, Explanation, explain
from ._optgroups import COMMON, PATCH, GroupedCommand, jobs_option, split_options
from ._terminal import fail, plural, status_line
from ._text import data, say


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
