#!/usr/bin/env python3
"""Write docs/cudasplit.1 (a roff man page) from the click commands: every command's usage,
help text and options, so the page never drifts from ``--help``.

    python scripts/gen_manpage.py            # write docs/cudasplit.1
    python scripts/gen_manpage.py --check    # exit 1 when docs/cudasplit.1 is out of date
    man -l docs/cudasplit.1
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudasplit import __version__  # noqa: E402
from cudasplit.cli import main  # noqa: E402

PAGE = ROOT / "docs" / "cudasplit.1"


def roff(text: str) -> str:
    """Escape backslashes and leading dots/quotes (roff control characters)."""
    lines = []
    for line in text.replace("\\", "\\e").splitlines():
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def paragraphs(help_text: str) -> list[str]:
    """click's help text: ``\\b`` blocks stay as written (no fill), the rest fills."""
    out = []
    for block in help_text.strip().split("\n\n"):
        if block.startswith("\b\n"):
            out += [".nf", roff(block[2:]), ".fi"]
        else:
            out += [".PP", roff(" ".join(block.split()))]
    return out


def commands(group: click.Group, ctx: click.Context, prefix: str) -> list[str]:
    lines = []
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        path = f"{prefix} {name}"
        pieces = " ".join(command.collect_usage_pieces(sub))
        lines += [f".SS {roff(path)}", f".B {roff(path)}", roff(pieces)]
        lines += paragraphs(command.help or "")
        # A command that groups its options (``cls=GroupedCommand``): its headings, as --help.
        sections = getattr(command, "option_sections", None)
        groups = [("", command.get_params(sub))] if sections is None else [
            ("", [p for p in command.get_params(sub) if not isinstance(p, click.Option)]),
            *sections(sub)]
        for title, params in groups:
            records = [(p, r) for p in params if (r := p.get_help_record(sub)) is not None
                       and (r[1] or isinstance(p, click.Option))]
            if title and records:
                lines += [".PP", f".I {roff(title)}"]
            for _param, record in records:
                lines += [".TP", f".B {roff(record[0])}", roff(record[1])]
        if isinstance(command, click.Group):
            lines += commands(command, sub, path)
    return lines


def page() -> str:
    ctx = click.Context(main, info_name="cudasplit")
    lines = [
        f'.TH CUDASPLIT 1 "" "cudasplit {__version__}" "User Commands"',
        ".SH NAME",
        "cudasplit \\- " + roff((main.help or "").strip().splitlines()[0]),
        ".SH SYNOPSIS",
        ".B cudasplit",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        *paragraphs(main.help or ""),
        ".PP",
        "Every command takes \\fB\\-h\\fR/\\fB\\-\\-help\\fR. Errors are one line on standard "
        "error, \\fBcudasplit: error: ...\\fR; exit 2 for bad input or options, 1 for problems "
        "found (see \\fB\\-\\-strict\\fR).",
        ".SH COMMANDS",
        *commands(main, ctx, "cudasplit"),
        ".SH SHELL COMPLETION",
        'bash: \\fBeval "$(cudasplit completion bash)"\\fR; zsh and fish likewise '
        "(\\fBcudasplit completion \\-\\-help\\fR).",
        ".SH SEE ALSO",
        "The README of the project; \\fBpatchelf\\fR(1), \\fBld.so\\fR(8).",
    ]
    return "\n".join(lines) + "\n"


def run(argv: list[str]) -> int:
    text = page()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run scripts/gen_manpage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
