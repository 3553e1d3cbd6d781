"""Command ``closure``: what a split's outputs keep alive, and a consumer's closure budget."""

from __future__ import annotations

import sys

import click

from .. import CudasplitError
from ._optgroups import graph_format
from ._terminal import EXIT_FOUND, EXIT_OK, closure_warnings, fail, status_line
from ._text import data, say, show_result


@click.command("closure")
@click.argument("split_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--root", "roots", multiple=True, metavar="OUTPUT=PATH",
              help="Take the outputs from here instead of SPLIT_DIR/<output> (e.g. a Nix "
              "build's store paths); repeatable. SPLIT_DIR is then ignored.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (--format json).")
@graph_format
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option("--consumer", is_flag=True, help="SPLIT_DIR is a consumer instead: a built store "
              "path or a directory. Walk its run-time closure and exit 1 when it holds a "
              "forbidden output (with the chain of files naming store paths) or is over "
              "--max-bytes.")
@click.option("--forbid", "forbid", multiple=True, metavar="OUTPUT",
              help="With --consumer: an output the closure may never hold (static, stubs, "
              "compiler, headers or any output name; repeatable; default: static, stubs, "
              "compiler, headers). --forbid none forbids nothing.")
@click.option("--max-bytes", type=click.IntRange(min=0), metavar="N",
              help="With --consumer: the closure's byte budget.")
@click.option("--store-dir", default="/nix/store", show_default=True, metavar="DIR",
              help="With --consumer: the Nix store.")
def closure_command(split_dir: str, roots: tuple[str, ...], as_json: bool, fmt: str, strict: bool,
                    consumer: bool, forbid: tuple[str, ...], max_bytes: int | None,
                    store_dir: str) -> None:
    """Bytes per output, which outputs each output references, and what lib/out drag along.

    SPLIT_DIR is what `split -o DIR` wrote (DIR/<output>/...). With --consumer: a consumer's
    closure budget (see --forbid, --max-bytes).
    """
    if consumer:
        _consumer_budget(split_dir, forbid, max_bytes, store_dir, as_json)
    # A lazy public name (``cudasplit._HOMES``): loaded only when this command runs.
    from ..outputs import closure_of

    try:
        with status_line("file") as status:
            report = closure_of(split_dir, roots=_roots(roots) if roots else None,
                                progress=status)
    except CudasplitError as exc:
        fail(exc)
    if show_result(report, "json" if as_json else fmt, report.text_lines):
        closure_warnings(report)
    sys.exit(EXIT_FOUND if strict and report.warnings else EXIT_OK)


def _consumer_budget(path: str, forbid: tuple[str, ...], max_bytes: int | None,
                     store_dir: str, as_json: bool) -> None:
    # Lazy public names (``cudasplit._HOMES``): loaded only when this option is used.
    import json

    from ..guards import DEFAULT_FORBIDDEN_OUTPUTS, closure_budget

    words = tuple(w for w in forbid if w != "none") if forbid else DEFAULT_FORBIDDEN_OUTPUTS
    try:
        report = closure_budget(path, forbid=words, max_bytes=max_bytes, store_dir=store_dir)
    except CudasplitError as exc:
        fail(exc)
    if as_json:
        data(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.text_lines():
            say(line)
    sys.exit(EXIT_FOUND if report.violations else EXIT_OK)


def _roots(values: tuple[str, ...]) -> dict[str, str]:
    roots = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path.startswith("/"):
            raise click.BadParameter(f"{value!r}: expected OUTPUT=/absolute/path",
                                     param_hint="--root")
        roots[name] = path.rstrip("/")
    return roots
