"""Nix text from any input: the one place generated Nix gets its strings, names and comments.

Everything ``nixify``, ``nixify-sets`` and ``nixify --toolkit`` write that came from outside
(a manifest, an archive, an ELF file) goes through these functions:

* :func:`string` -- a Nix string literal that evaluates to exactly the text (``\\``, ``"``,
  ``$`` and the line breaks escaped, so no ``${`` can start an interpolation);
* :func:`attr` -- an attribute name: bare when it is an identifier, else a string;
* :func:`ident` -- a name that must be an identifier (``callPackage`` arguments, scope
  members, file names): anything else is refused with a :class:`ManifestError`;
* :func:`comment` -- text inside a ``#`` comment, JSON-escaped: no line break can end it;
* :func:`interpolate` -- ``"<text>${<expression>}"`` with the text escaped;
* :func:`value` -- a JSON-like value (a manifest entry) as a Nix value, one attribute a line.

Text Nix cannot hold (a NUL character, a lone surrogate from a JSON ``\\ud800`` escape) is
refused the same way: generated files never carry what the input did not say.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

from cudasplit.errors import ManifestError, OutputError

__all__ = ["KEYWORDS", "Value", "attr", "comment", "ident", "interpolate", "is_ident", "string",
           "value", "write_atomically"]

# What :func:`value` writes: text, whole numbers, truth values, null, lists and attribute sets.
Value: TypeAlias = str | int | bool | list["Value"] | dict[str, "Value"] | None

# Nix's reserved words (and `or`, which a bare attribute name cannot be either).
KEYWORDS = frozenset({"assert", "else", "if", "in", "inherit", "let", "or", "rec", "then",
                      "with", "true", "false", "null", "__curPos"})
# Package names: Nix identifiers that are also plain file names (no `'`, no dot, no slash).
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,199}\Z")
_BARE_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_'-]*\Z")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _checked(text: str, what: str) -> str:
    if "\0" in text:
        raise ManifestError(f"{what} {text!r}: a NUL character cannot be written in Nix")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ManifestError(f"{what} {text!r}: not UTF-8 text ({exc.reason})") from None
    return text


def string(text: str, what: str = "text") -> str:
    """``text`` as a Nix string literal that evaluates to ``text``."""
    body = "".join(_ESCAPES.get(c, c) for c in _checked(text, what))
    return f'"{body}"'


def interpolate(text: str, expression: str) -> str:
    """``"<text>${<expression>}"``: ``text`` escaped, ``expression`` generated Nix."""
    return f"{string(text)[:-1]}${{{expression}}}\""


def is_ident(name: str) -> bool:
    """Whether ``name`` may be a package name here (a Nix identifier and a file name)."""
    return bool(_IDENT.match(name)) and name not in KEYWORDS


def ident(name: str, what: str = "package name") -> str:
    """``name`` when it is a Nix identifier that is also a plain file name; else refused."""
    if not is_ident(name):
        raise ManifestError(f"{what} {name!r} is not a Nix identifier (letters, digits, "
                            "'_' and '-', not starting with a digit or '-')")
    return name


def attr(name: str) -> str:
    """``name`` as an attribute name: bare when it can be, else a quoted string."""
    if _BARE_ATTR.match(name) and name not in KEYWORDS:
        return name
    return string(name, "attribute name")


def value(data: Value, indent: str = "") -> str:
    """``data`` as a Nix value: strings through :func:`string`, attribute names through
    :func:`attr` (sorted), one attribute or element a line, nested ``indent`` + two spaces."""
    inner = indent + "  "
    if isinstance(data, bool):
        return "true" if data else "false"
    if isinstance(data, int):
        return str(data)
    if isinstance(data, str):
        return string(data)
    if data is None:
        return "null"
    if isinstance(data, list):
        if not data:
            return "[ ]"
        return "[\n" + "".join(f"{inner}{value(v, inner)}\n" for v in data) + indent + "]"
    if not data:
        return "{ }"
    return "{\n" + "".join(f"{inner}{attr(k)} = {value(v, inner)};\n"
                           for k, v in sorted(data.items())) + indent + "}"


def comment(text: str) -> str:
    """``text`` for a ``#`` comment: JSON-escaped ASCII, so nothing in it ends the comment."""
    return json.dumps(text, ensure_ascii=True)


def write_atomically(directory: Path, files: Mapping[str, str]) -> None:
    """Write every ``name -> text`` into ``directory`` or none: each file is written beside
    its final name and flushed, then all are renamed into place; a failure (a full disk)
    removes what was staged and leaves the files that were there untouched. Names must be
    plain file names (the callers build them from :func:`ident` names)."""
    staged: list[tuple[str, Path]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in sorted(files.items()):
            if "/" in name or name in ("", ".", ".."):
                raise OutputError(f"{directory}: refusing to write {name!r}")
            fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
            staged.append((name, Path(temp)))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        for name, staged_path in staged:
            os.chmod(staged_path, 0o644)
            os.replace(staged_path, directory / name)
        staged = []
    except OSError as exc:
        raise OutputError(f"{directory}: cannot write ({exc.strerror or exc})") from exc
    finally:
        for _, leftover in staged:
            leftover.unlink(missing_ok=True)
