"""Command ``inspect``: every member of a source with its kind, size, output and rule (dry run)."""

from __future__ import annotations

from typing import Any

import click

from .. import CudasplitError, Report, inspect
from ._optgroups import COMMON, GroupedCommand, jobs_option, split_options
from ._terminal import fail, status_line
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
