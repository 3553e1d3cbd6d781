"""The commands the documentation shows, read from its fenced blocks and run as a user would.

A page's ```` ```sh ```` and ```` ```console ```` blocks are its commands:

* ``sh``: every line that is not a comment is one command (a trailing ``\\`` joins the next
  line). Nothing is printed in the page, so only the exit status is checked.
* ``console``: a line starting with ``$ `` is a command (continued by ``\\`` as above); the lines
  up to the next command are what it prints, checked by :func:`output_matches`.

A command's trailing comment may say ``exit status N`` (default 0); in a console block a
following ``$ echo $?`` says it too. The commands of one block run in one ``bash`` in the
page's working directory, so ``cd``, variables and files carry from one line to the next;
files carry between the blocks of a page. Each command's output goes to its own file, merged
(stdout and stderr in the order written: Python runs unbuffered), as a terminal shows it.

A plain ```` ``` ```` block that starts like a command (``$ `` or ``cudasplit ``) is an
error (:func:`unlabelled_command_blocks`): unlabelled, it would never be run.

A page whose Python examples are programs to run as printed (``page_blocks(page,
python=True)``) has each ```` ```python ```` block run too, in page order with its commands:
the block's text, unchanged, is fed to ``python3`` (one command, exit status 0).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*$")
COMMAND_LANGS = ("sh", "console")
EXIT_STATUS = re.compile(r"#.*\bexit status (\d+)")


@dataclass
class Command:
    text: str                       # what the page shows, continuation lines joined
    line: int                       # where in the page (1-based)
    expected_output: list[str] | None = None  # console blocks: the lines shown after it
    status: int = 0                 # the exit status the page says (default 0)


@dataclass
class Block:
    lang: str
    line: int                       # the fence's line
    commands: list[Command] = field(default_factory=list)


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """(language, first line number, body lines) of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, lang, start = match.group(1), match.group(2), i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        yield lang, start, body
        i += 1


def _joined(lines: Sequence[str], i: int, first: str) -> tuple[str, int]:
    """A command and its continuation lines (``\\`` at the end), and the index after it."""
    parts = [first]
    while parts[-1].rstrip().endswith("\\") and i < len(lines):
        parts[-1] = parts[-1].rstrip()[:-1].rstrip()
        parts.append(lines[i].strip())
        i += 1
    return " ".join(p for p in parts if p), i


def parse_block(lang: str, start: int, body: Sequence[str]) -> Block:
    block = Block(lang, start)
    i = 0
    while i < len(body):
        line, i = body[i], i + 1
        if lang == "sh":
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            text, i = _joined(body, i, line.strip())
            block.commands.append(Command(text, start + i, None, _status(text)))
        elif line.startswith("$ "):
            text, i = _joined(body, i, line[2:].strip())
            command = Command(text, start + i, [], _status(text))
            if text == "echo $?" and block.commands:
                command.status = 0
            block.commands.append(command)
        elif block.commands and block.commands[-1].expected_output is not None:
            block.commands[-1].expected_output.append(line)  # type: ignore[union-attr]
    for before, after in zip(block.commands, block.commands[1:], strict=False):
        if after.text == "echo $?" and after.expected_output:
            before.status = int(after.expected_output[0].strip())
    return block


def _status(text: str) -> int:
    match = EXIT_STATUS.search(text)
    return int(match.group(1)) if match else 0


def page_blocks(page: Path, *, python: bool = False) -> list[Block]:
    blocks = []
    for lang, start, body in fenced_blocks(page.read_text()):
        if lang in COMMAND_LANGS:
            blocks.append(parse_block(lang, start, body))
        elif python and lang == "python":
            blocks.append(python_block(start, body))
    return blocks


def python_block(start: int, body: Sequence[str]) -> Block:
    """A Python example as one command: ``python3`` reading the block's text as printed."""
    text = "\n".join(body)
    assert "\nPYTHON_BLOCK_END\n" not in f"\n{text}\n"
    return Block("python", start, [Command(f"python3 - <<'PYTHON_BLOCK_END'\n{text}\n"
                                           "PYTHON_BLOCK_END", start + 1)])


def unlabelled_command_blocks(page: Path) -> list[int]:
    """Lines of plain fenced blocks whose first line is a command (not a usage synopsis such
    as ``cudasplit split [OPTIONS] SOURCES...``)."""
    return [start for lang, start, body in fenced_blocks(page.read_text())
            if not lang and body and re.match(r"(\$ |cudasplit )", body[0])
            and "[OPTIONS]" not in body[0]]


# -- comparing what was printed with what the page shows ----------------------------------

NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)*")
ELLIPSIS = ("...", "…")


def normalise(line: str) -> str:
    """Numbers (sizes, counts, versions) become ``#`` and runs of blanks one space: a page
    shows the shape of the output, not one machine's byte counts."""
    return " ".join(NUMBER.sub("#", line).split())


def _line_pattern(expected: str) -> re.Pattern[str]:
    parts = re.split(r"\.\.\.|…", normalise(expected))
    return re.compile(".*".join(re.escape(p) for p in parts) + r"\Z")


def output_matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether ``actual`` is what the page shows: line by line after :func:`normalise` (blank
    lines aside); a line ``...`` (or ``…``) stands for any number of lines, ``...`` inside a
    line for any text. A command the page shows no output for must print nothing."""
    want = [e for e in expected if e.strip()]
    got = [a for a in actual if a.strip()]
    return _match(want, 0, got, 0, {})


def _match(want: Sequence[str], i: int, got: Sequence[str], j: int,
           memo: dict[tuple[int, int], bool]) -> bool:
    key = (i, j)
    if key in memo:
        return memo[key]
    if i == len(want):
        result = j == len(got)
    elif want[i].strip() in ELLIPSIS:
        result = any(_match(want, i + 1, got, k, memo) for k in range(j, len(got) + 1))
    else:
        result = (j < len(got) and _line_pattern(want[i]).match(normalise(got[j])) is not None
                  and _match(want, i + 1, got, j + 1, memo))
    memo[key] = result
    return result


# -- running a block ----------------------------------------------------------------------

@dataclass
class Ran:
    command: Command
    status: int | None      # None: not run (the block stopped before it)
    output: list[str]


def run_block(block: Block, cwd: Path, env: Mapping[str, str], *,
              substitutions: Sequence[tuple[str, str]] = (), skip: Sequence[Command] = (),
              timeout: float = 900) -> list[Ran]:
    """Run the block's commands (less ``skip``) in one bash; each command's merged output and
    status. ``substitutions`` (page text -> this machine) apply to the command text, and are
    undone in its output, so ``/tmp/demo`` in a page can be a private directory here."""
    work = cwd / ".doccommands"
    work.mkdir(exist_ok=True)
    script = ["__last=0"]
    to_run = [c for c in block.commands if c not in skip]
    for n, command in enumerate(to_run):
        text = command.text
        for page_text, here in substitutions:
            text = text.replace(page_text, here)
        # (exit $__last) hands the previous status to `echo $?`; braces keep cd and variables.
        script.append(f"{{ (exit $__last); {text}\n}} >{work}/out.{n} 2>&1 </dev/null; "
                      f"__last=$?; echo $__last >{work}/status.{n}")
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=dict(env), timeout=timeout,
                   check=False)
    results = []
    for n, command in enumerate(to_run):
        status_file, out_file = work / f"status.{n}", work / f"out.{n}"
        status = int(status_file.read_text()) if status_file.exists() else None
        output = out_file.read_text(errors="replace") if out_file.exists() else ""
        for page_text, here in substitutions:
            output = output.replace(here, page_text)
        results.append(Ran(command, status, output.splitlines()))
        status_file.unlink(missing_ok=True)
        out_file.unlink(missing_ok=True)
    return results


def problems(results: Sequence[Ran], page: str) -> list[str]:
    """What differs from the page: exit statuses, and console output."""
    found = []
    for ran in results:
        where = f"{page}:{ran.command.line}: $ {ran.command.text}"
        if ran.status != ran.command.status:
            tail = "\n    ".join(ran.output[-15:])
            found.append(f"{where}\n  exit status {ran.status}, the page says "
                         f"{ran.command.status}; it printed:\n    {tail}")
        elif ran.command.expected_output is not None and ran.command.text != "echo $?" \
                and not output_matches(ran.command.expected_output, ran.output):
            found.append(f"{where}\n  printed:\n    " + "\n    ".join(ran.output)
                         + "\n  the page shows:\n    "
                         + "\n    ".join(ran.command.expected_output))
    return found


def program_of(command: str) -> str:
    """The program a command line starts with, past ``VAR=value`` assignments (``lib=$(...)``
    runs what is inside)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    for word in words:
        inner = re.match(r"[A-Za-z_]\w*=\$\((\S+)", word)
        if inner:
            return inner.group(1)
        if re.match(r"[A-Za-z_]\w*=", word):
            continue
        return word
    return ""
