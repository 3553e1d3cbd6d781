"""Text rewrites of package files named by the package table (``[[package.text_edits]]``).

libcudss ships CMake configs that find the package relative to themselves (``../../``) and name
``/usr/local/cuda/lib64``; in split outputs neither holds. Nixpkgs rewrites them in postFixup
with ``substituteInPlace --replace-fail`` and ``sed -E``; this does the same while the member
streams. Replacement texts may name roots:

* ``@output:NAME@`` -- this package's output ``NAME`` (falling back as Nixpkgs' ``outputDev``
  etc. do when the package lacks it);
* ``@PNAME@`` / ``@PNAME.OUTPUT@`` -- another package's root from ``--package-root`` (the
  ``.OUTPUT`` form is tried first, then the package's plain root).

Like ``--replace-fail``, an edit whose text is not found is reported (problem
``text-edit-unmatched``) unless the entry is ``quiet`` (``--replace-quiet``); a text the entry
``forbid``s that is still there afterwards is problem ``text-edit-leftover`` (tensorrt's check
that no ``${_IMPORT_PREFIX}/`` survived). A root that was not given leaves that edit undone
(problem ``package-root-missing``) rather than writing a path that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cudasplit._rulebook import TextEdit

__all__ = ["EditOutcome", "apply_text_edits", "fill_roots"]

_PLACEHOLDER = re.compile(r"@(output:)?([A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)?)@")


@dataclass(frozen=True, slots=True)
class EditOutcome:
    text: str
    unmatched: tuple[str, ...] = ()   # the search texts not found
    missing: tuple[str, ...] = ()     # package roots that were not given
    leftover: tuple[str, ...] = ()    # forbidden texts still present after an entry's edits


def fill_roots(text: str, output_root: Callable[[str], str],
               package_roots: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """``text`` with its placeholders filled; the package references that had no root."""
    missing: list[str] = []

    def one(match: re.Match[str]) -> str:
        if match[1]:
            return output_root(match[2])
        name = match[2]
        root = package_roots.get(name) or package_roots.get(name.split(".")[0])
        if root is None:
            missing.append(name)
            return match[0]
        return root

    return _PLACEHOLDER.sub(one, text), tuple(missing)


def apply_text_edits(text: str, edits: Sequence[TextEdit], output_root: Callable[[str], str],
                     package_roots: Mapping[str, str]) -> EditOutcome:
    """Apply every literal and regex replacement of ``edits`` in order."""
    unmatched: list[str] = []
    missing: list[str] = []
    leftover: list[str] = []
    for edit in edits:
        for regex, (old, new) in [(False, pair) for pair in edit.replace] + [
                (True, pair) for pair in edit.regex]:
            filled, absent = fill_roots(new, output_root, package_roots)
            if absent:
                missing.extend(absent)
                continue
            text, found = _replace(text, old, filled, regex)
            if not found and not edit.quiet:
                unmatched.append(old)
        leftover += [text_ for text_ in edit.forbid if text_ in text]
    return EditOutcome(text, tuple(unmatched), tuple(dict.fromkeys(missing)), tuple(leftover))


def _replace(text: str, old: str, new: str, regex: bool) -> tuple[str, bool]:
    if not regex:
        return text.replace(old, new), old in text
    # The replacement is literal text (a store path), never a template with \1 or \g<...>.
    result, count = re.subn(old, lambda _: new, text)
    return result, count > 0
