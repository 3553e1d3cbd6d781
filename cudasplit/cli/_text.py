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

import re
from collections.abc import Callable, Iterable
from typing import Protocol

import click

__all__ = ["FIELD_FLAGS", "data", "flag_named", "message", "say", "show_result", "shown"]

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


class _Drawable(Protocol):
    def to_json(self) -> str: ...

    def draw(self, fmt: str) -> str: ...


def show_result(result: _Drawable, fmt: str, text_lines: Callable[[], Iterable[str]]) -> bool:
    """``result`` as ``--format``/``--json`` ask: its JSON (data), a ``dot`` or ``mermaid``
    drawing, or its text lines; True when the text was shown (closure and diff)."""
    if fmt == "json":
        data(result.to_json(), nl=False)
    elif fmt in ("dot", "mermaid"):
        say(result.draw(fmt).removesuffix("\n"))
    else:
        for line in text_lines():
            say(line)
        return True
    return False


def message(kind: str, text: str, code: str | None = None) -> str:
    """``cudasplit: KIND: TEXT [code]`` -- the form of every message on standard error (kind:
    error, warning, problem, note), one line, through :func:`shown`."""
    return shown(f"cudasplit: {kind}: {text}" + (f" [{code}]" if code else ""))


# The library's parameters and the options that set them. The library names its parameter
# (``jobs must be ...``, ``raise max_total_bytes``, ``give its root (package_roots x=DIR)``);
# a person typed ``--jobs``: :func:`flag_named` turns one into the other in what is printed.
FIELD_FLAGS = {
    # SplitOptions
    "jobs": "--jobs", "memory_limit": "--memory-limit", "max_total_bytes": "--max-size",
    "max_ratio": "--max-ratio", "max_members": "--max-members",
    "strip_components": "--strip-components", "cuda_major": "--cuda-major",
    "cuda_version": "--cuda-version", "platform": "--platform",
    "python_version": "--python-version", "glibc_version": "--glibc-version",
    "cuda_component_hook": "--cuda-component-hook", "target_platform": "--target-platform",
    "outputs": "--outputs", "rules_files": "--rules", "package": "--package",
    "patcher": "--patcher", "max_glibc": "--max-glibc", "profile": "--profile",
    "package_roots": "--package-root", "default_rules": "--default-rules",
    "skip_unsafe_members": "--skip-unsafe-members", "check_fhs_refs": "--check-fhs-refs",
    "strict": "--strict", "overwrite": "--overwrite", "nix_markers": "--nix-support",
    "consumer_guards": "--consumer-guards", "split_nix": "--nix",
    # RunpathPolicy (runpath_policy's words)
    "driver_link": "--driver-link", "cuda_compat": "--cuda-compat",
    "library_paths": "--library-path", "append": "--append-runpath",
    "keep_absolute": "--keep-runpath", "tag": "--tag", "interpreters": "--interpreter",
    "ignore_missing": "--ignore-missing",
    # RepackOptions
    "level": "--level", "threads": "--threads", "prefix": "--prefix", "fmt": "--format",
    # gpu_prune_plan
    "gpu_archs": "--gpu-archs",
}
# Names that are also something else in a message: ``cuda_compat`` is a package too. They are
# turned into the option only where rules 1 and 3 below find them.
_AMBIGUOUS = frozenset({"cuda_compat"})
_NAMES = "|".join(sorted(FIELD_FLAGS, key=len, reverse=True))
_IN_PARENS = re.compile(rf"\(({_NAMES})(?=[ ):;,])")
# Not inside a path, a template variable (``@target_platform@``) or a quoted key.
_SNAKE = re.compile(r"(?<![\w./@$'\"-])(" + "|".join(
    sorted((n for n in FIELD_FLAGS if "_" in n and n not in _AMBIGUOUS), key=len,
           reverse=True)) + r")(?![\w/@'\"-])")


def flag_named(message: str, *, leading: bool = True) -> str:
    """A library message as a person at the command line reads it, naming the options typed
    instead of the parameters: (1) a parameter opening parentheses, ``(package PNAME)`` ->
    ``(--package PNAME)``; (2) a parameter with an underscore anywhere, ``raise
    max_total_bytes`` -> ``raise --max-size`` (nothing else is spelt like that); (3) with
    ``leading`` (an option's error), the first word: ``jobs must be ...`` -> ``--jobs must be
    ...``, ``append: ...`` -> ``--append-runpath: ...``."""
    text = _IN_PARENS.sub(lambda m: "(" + FIELD_FLAGS[m[1]], message)
    text = _SNAKE.sub(lambda m: FIELD_FLAGS[m[1]], text)
    if leading:
        first, sep, rest = text.partition(" ")
        bare = first.split("[", 1)[0]  # "interpreters[0]" names the option too
        flag = FIELD_FLAGS.get(bare.rstrip(":"))
        if flag and sep:
            return f"{flag}{':' if first.endswith(':') else ''} {rest}"
    return text
