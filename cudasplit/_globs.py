"""Path globs where ``**`` really crosses directories, matched without backtracking blow-up.

Semantics (documented in the README):

* ``*`` matches within one path component, ``?`` one character, ``[...]`` a character class
  (never ``/``);
* ``**`` as a whole component matches zero or more components: ``lib/**`` matches everything
  below ``lib/``, ``**/*.a`` matches ``x.a`` and ``a/b/x.a``;
* a pattern without ``/`` matches the last component at any depth (``*.pc`` finds
  ``share/pkgconfig/cuda.pc``), like ``.gitignore``; a pattern with ``/`` is anchored at the
  archive root (top directory stripped).

Bash globs without ``globstar`` (what Nixpkgs uses) only go one level deep; this is the defect
(NixOS/nixpkgs#278705) that leaves ``lib/stubs/*.a`` in the wrong output.

Matching time is linear in the path for a fixed glob, whatever the path holds. A glob is a
wildcard pattern, and for wildcards the leftmost occurrence of each piece between two stars is
always the best one (a later occurrence only leaves less room for the rest). The translation
commits to it with atomic groups (``(?>...)``), so the regex engine never retries another
split: ``*a*a*a*a*a*a*b`` against 200 ``a`` was exponential in the old translation (plain
``[^/]*`` runs), and ``--rules`` globs come from users while the paths come from archives. The
same holds one level up for ``**`` and the runs of whole components between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Glob", "GlobError", "compile_glob"]


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


# Zero or more whole components, each followed by its "/".
_ANY_COMPONENTS = "(?:[^/]*/)*"


def compile_glob(pattern: str) -> Glob:
    """The glob ``pattern`` compiled (:class:`GlobError` when it is malformed)."""
    if not pattern or pattern.startswith("/") or "\x00" in pattern:
        raise GlobError(f"invalid glob {pattern!r}: must be a non-empty relative path")
    anchored = "/" in pattern.rstrip("/")
    body = pattern.rstrip("/") if pattern.endswith("/") else pattern
    if pattern.endswith("/"):
        body += "/**"  # "lib/" means the directory and everything below it
    parts = body.split("/")
    if any(p == "" for p in parts):
        raise GlobError(f"invalid glob {pattern!r}: empty path component")
    if not anchored and parts != ["**"]:
        parts = ["**", *parts]  # the last component at any depth
    try:
        return Glob(pattern, re.compile(_translate_components(parts, pattern), re.DOTALL))
    except re.error as exc:  # a class the checks below let through; never a bare re.error
        raise GlobError(f"invalid glob {pattern!r}: {exc.msg}") from exc


def _translate_components(parts: list[str], pattern: str) -> str:
    """``a/**/b/c/**/d`` -> the runs ``[a]``, ``[b, c]``, ``[d]`` joined by ``**``: the first
    run is anchored at the start, the last at the end, and each run in between takes its
    leftmost place (atomic), which is always a best one."""
    for part in parts:
        if "**" in part and part != "**":
            raise GlobError(f"invalid glob {pattern!r}: '**' must be a whole path component")
    runs: list[list[str]] = [[]]
    for part in parts:
        if part == "**":
            runs.append([])
        else:
            runs[-1].append(_translate_component(part, pattern))
    if len(runs) == 1:  # no "**": one fixed run of components
        return "/".join(runs[0])
    first, *middle, last = runs
    out = [f"{'/'.join(first)}/" if first else ""]
    for run in middle:
        if run:
            out.append(f"(?>{_ANY_COMPONENTS}?{'/'.join(run)}/)")
    if last:
        # The last run ends the path: it starts a fixed number of components before the end.
        out.append(f"{_ANY_COMPONENTS}{'/'.join(last)}")
    else:
        # "lib/**" matches anything below "lib/" (not "lib" itself).
        out.append("(?s:.*)")
    return "".join(out)


def _translate_component(part: str, pattern: str) -> str:
    """One component: its pieces between ``*`` in order, each middle piece at its leftmost
    place (atomic); the first anchored at the component's start, the last at its end."""
    pieces = _pieces(part, pattern)
    if len(pieces) == 1:
        return pieces[0]
    head, *middle, tail = pieces
    return (head + "".join(f"(?>[^/]*?{piece})" for piece in middle if piece)
            + f"[^/]*{tail}(?![^/])")


def _pieces(part: str, pattern: str) -> list[str]:
    """The regexes of the pieces of ``part`` between its stars (fixed length each)."""
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(part):
        c = part[i]
        if c == "*":
            pieces.append([])
        elif c == "?":
            pieces[-1].append("[^/]")
        elif c == "[":
            end = part.find("]", i + 2 if part[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                raise GlobError(f"invalid glob {pattern!r}: unterminated '['")
            pieces[-1].append(_char_class(part[i + 1 : end], pattern))
            i = end
        else:
            pieces[-1].append(re.escape(c))
        i += 1
    return ["".join(piece) for piece in pieces]


def _char_class(inner: str, pattern: str) -> str:
    """``[...]`` of a glob as a regex class of one character, never ``/`` (``[!x]`` would
    otherwise cross a component). A range must not run backwards (``[z-a]``)."""
    negated = inner.startswith("!")
    inner = inner[1:] if negated else inner
    for at in range(1, len(inner) - 1):
        if inner[at] == "-" and inner[at - 1] > inner[at + 1] and (at < 2 or
                                                                    inner[at - 2] != "-"):
            raise GlobError(f"invalid glob {pattern!r}: the range "
                            f"{inner[at - 1]}-{inner[at + 1]} runs backwards")
    inner = inner.replace("\\", "\\\\").replace("[", "\\[")
    if inner.startswith("^"):
        inner = "\\" + inner
    return f"[^/{inner}]" if negated else f"(?![/])[{inner}]"
