"""Reading one rule file's TOML within fixed bounds: its size, its nesting, its dotted keys.

``tomllib`` is not linear in every input: a dotted key of N parts costs it N² in time and
memory (a 200 KB line ``a.a.a...`` = 1 took the process to the OOM killer), and every level of
nested arrays or inline tables is a level of recursion (``RecursionError`` past about 1,000).
Before ``tomllib`` sees a file, one linear pass over its text (strings and comments skipped)
checks the bounds below; then its cost is linear in the file:

* at most :data:`MAX_RULE_FILE` bytes (the shipped files are under 5 KB);
* at most :data:`MAX_NESTING` levels of ``[`` and ``{``;
* at most :data:`MAX_DOTS` dots outside strings on one line (a dotted key's parts, or a
  table header's).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from cudasplit.errors import RulesError

__all__ = ["MAX_DOTS", "MAX_NESTING", "MAX_RULE_FILE", "read_toml"]

MAX_RULE_FILE = 1 << 20
MAX_NESTING = 32
MAX_DOTS = 128

# The tokens that matter, strings and comments first so their insides are skipped. Each
# alternative's repetitions are over disjoint characters, possessive: linear whatever the text.
_TOKEN = re.compile(r'''
      """(?:[^"\\]|\\.|"(?!""))*+"{3,5}
    | \'\'\'(?:[^']|'(?!''))*+'{3,5}
    | "(?:[^"\\\n]|\\.)*+"
    | '[^'\n]*+'
    | \#[^\n]*+
    | [\n\[\]{}.]
''', re.VERBOSE | re.DOTALL)


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document in ``path``; :class:`RulesError` (naming the file) when it cannot be
    read, is not UTF-8 TOML, or is past a bound."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_RULE_FILE + 1)
    except OSError as exc:
        raise RulesError(f"{path}: cannot read rule file ({exc.strerror})") from exc
    if len(raw) > MAX_RULE_FILE:
        raise RulesError(f"{path}: larger than {MAX_RULE_FILE >> 20} MiB; not a rule file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # tomllib decodes before parsing
        raise RulesError(f"{path}: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset "
                         f"{exc.start}); TOML files must be UTF-8") from exc
    fault = shape_fault(text)
    if fault is not None:
        raise RulesError(f"{path}: {fault}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{path}: invalid TOML ({exc})") from exc
    except RecursionError as exc:   # not reached within MAX_NESTING; kept as the last word
        raise RulesError(f"{path}: invalid TOML (nested too deeply)") from exc


def shape_fault(text: str) -> str | None:
    """What in ``text`` is past a bound (one pass), or ``None``."""
    depth, dots, line = 0, 0, 1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "\n":
            dots, line = 0, line + 1
        elif token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return f"line {line}: nested more than {MAX_NESTING} levels deep"
        elif token in "]}":
            depth = max(0, depth - 1)
        elif token == ".":
            dots += 1
            if dots > MAX_DOTS:
                return f"line {line}: more than {MAX_DOTS} dots in a key or table name"
        elif "\n" in token:            # a multi-line string: the line it ends on
            dots, line = 0, line + token.count("\n")
    return None
