"""Path globs where ``**`` really crosses directories.

Semantics (documented in the README):

* ``*`` matches within one path component, ``?`` one character, ``[...]`` a character class;
* ``**`` as a whole component matches zero or more components: ``lib/**`` matches everything
  below ``lib/``, ``**/*.a`` matches ``x.a`` and ``a/b/x.a``;
* a pattern without ``/`` matches the last component at any depth (``*.pc`` finds
  ``share/pkgconfig/cuda.pc``), like ``.gitignore``; a pattern with ``/`` is anchored at the
  archive root (top directory stripped).

Bash globs without ``globstar`` (what Nixpkgs uses) only go one level deep; this is the defect
(NixOS/nixpkgs#278705) that leaves ``lib/stubs/*.a`` in the wrong output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class GlobError(ValueError):
    """A glob pattern is malformed (reported by the rule loader with ``file:rule``)."""


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled rule glob (``**`` spans directories, ``*`` stays within one).

    Attributes:
        pattern: the glob as written.
        regex: the expression it compiles to.

    Raises:
        Nothing: a value (:func:`compile_glob` raises GlobError for a malformed pattern).
    """

    pattern: str
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        return self.regex.fullmatch(path) is not None


def compile_glob(pattern: str) -> Glob:
    if not pattern or pattern.startswith("/") or "\x00" in pattern:
        raise GlobError(f"invalid glob {pattern!r}: must be a non-empty relative path")
    anchored = "/" in pattern.rstrip("/")
    body = pattern.rstrip("/") if pattern.endswith("/") else pattern
    if pattern.endswith("/"):
        body += "/**"  # "lib/" means the directory and everything below it
    parts = body.split("/")
    if any(p == "" for p in parts):
        raise GlobError(f"invalid glob {pattern!r}: empty path component")
    regex = _translate_components(parts, pattern)
    if not anchored:
        regex = "(?:.*/)?" + regex
    return Glob(pattern, re.compile(regex, re.DOTALL))


def _translate_components(parts: list[str], pattern: str) -> str:
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            # Zero or more whole components; at the end it also needs the separator before it.
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        if "**" in part:
            raise GlobError(f"invalid glob {pattern!r}: '**' must be a whole path component")
        out.append(_translate_component(part, pattern) + ("" if last else "/"))
    regex = "".join(out)
    # "lib/**" should match "lib/x" but not "lib" itself nor "libfoo"; ".*" after "lib/" does that.
    return regex


def _translate_component(part: str, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                raise GlobError(f"invalid glob {pattern!r}: unterminated '['")
            inner = part[i + 1 : end]
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)
