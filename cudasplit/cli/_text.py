"""What the CLI prints for a person, made safe: :func:`shown` is the one function every such
line goes through, and the message forms every command uses.

Text printed by a command comes from its input too: member and file names, ``DT_NEEDED``
names, manifest fields, package names from the archive's top directory. On a terminal an ESC
(``\\x1b``) starts a sequence that can move the cursor, rewrite earlier lines or set the window
title (OSC); ``U+009B`` is a one-character CSI for many terminals and ``U+0085`` a line break;
bidi overrides (``U+202E``) reorder what is shown, so a listed name reads as another. So every
character that is not printable (``str.isprintable``: controls, format characters such as the
bidi overrides, line and paragraph separators, lone surrogates, unassigned code points; the
plain space stays) is shown as its Python escape (``\\x1b``, ``\\u202e``), and the line reads
the same on every terminal. Data for programs (``--json``, ``rules show``'s TOML, completion
scripts) is printed exactly as it is, through :func:`data`.

The message forms, on standard error: ``cudasplit: error: MESSAGE``, ``cudasplit: warning:
MESSAGE [code]``, ``cudasplit: problem: ... [code]`` (what ``--strict`` fails on) and
``cudasplit: note: MESSAGE`` (information that is neither).
"""

from __future__ import annotations

import click

__all__ = ["FIELD_FLAGS", "data", "flag_named", "message", "say", "shown"]

# The few controls with a short escape everyone reads; the rest as \xNN, \uNNNN, \UNNNNNNNN.
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def shown(text: str) -> str:
    """``text`` as one line a terminal shows as it is: every character that is not printable
    becomes its Python escape (``\\x1b``, ``\\x9b``, ``\\u202e``, ``\\n``); printable text,
    the plain space and backslashes are left alone. The one function for every line printed."""
    if text.isprintable():  # the common case: one C loop, no copy
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def say(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` for a person (its lines each through :func:`shown`)."""
    click.echo("\n".join(shown(line) for line in text.split("\n")), err=err)


def data(text: str, *, nl: bool = True) -> None:
    """Print ``text`` for a program, exactly (JSON, TOML, a completion script)."""
    click.echo(text, nl=nl)


def message(kind: str, text: str, code: str | None = None) -> str:
    """``cudasplit: KIND: TEXT [code]`` -- the form of every message on standard error (kind:
    error, warning, problem, note), one line, through :func:`shown`."""
    return shown(f"cudasplit: {kind}: {text}" + (f" [{code}]" if code else ""))


# SplitOptions' (and RepackOptions') fields and the options that set them, for messages: the
# library names its parameter (``jobs must be ...``); a person typed ``--jobs``.
FIELD_FLAGS = {
    "jobs": "--jobs", "memory_limit": "--memory-limit", "max_total_bytes": "--max-size",
    "max_ratio": "--max-ratio", "max_members": "--max-members",
    "strip_components": "--strip-components", "cuda_major": "--cuda-major",
    "cuda_version": "--cuda-version", "platform": "--platform",
    "python_version": "--python-version", "glibc_version": "--glibc-version",
    "cuda_component_hook": "--cuda-component-hook", "target_platform": "--target-platform",
    "outputs": "--outputs", "rules_files": "--rules", "package": "--package",
    "patcher": "--patcher",
    # RepackOptions
    "level": "--level", "threads": "--threads", "prefix": "--prefix", "fmt": "--format",
}


def flag_named(message: str) -> str:
    """``jobs must be ...`` -> ``--jobs must be ...``: an option error names the flag."""
    field, sep, rest = message.partition(" ")
    field = field.split("[", 1)[0]
    flag = FIELD_FLAGS.get(field)
    return f"{flag} {rest}" if flag and sep else message
