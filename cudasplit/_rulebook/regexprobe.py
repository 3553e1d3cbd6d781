"""Whether a ``text_edits`` regex backtracks catastrophically: run on probe inputs built
from its own literals, in a child process with a deadline.

A text edit's regex runs on archive members, which are hostile input: a pattern such as
``^.*check_.*TRT::[A-Za-z]*win`` is quadratic (or worse) on one long line that repeats its
fragments, and Python's ``re`` has no time limit. Shipped patterns are written to be linear
(atomic groups, possessive quantifiers, classes that stop at a delimiter; a test runs this
probe on each of them); a user's pattern is probed by ``rules check`` and when a user rule file
is loaded, and refused with a hint when it does not finish.

The probes: each literal run of the pattern repeated to :data:`PROBE_CHARS` characters, and
the runs in pattern order, with the last one left out (an almost-match that fails late: what
makes backtracking retry every split), plus runs of one letter, digit and space. A linear
pattern gets through them in milliseconds; a quadratic one on :data:`PROBE_CHARS` characters
needs minutes, far past :data:`PROBE_SECONDS`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["PROBE_CHARS", "PROBE_SECONDS", "regex_hazard", "regex_hazards"]

PROBE_CHARS = 200_000
PROBE_SECONDS = 5.0
LOG = logging.getLogger("cudasplit")

# Runs in the child (``python -I -c``): only the standard library, reads the patterns as JSON
# on stdin, prints each pattern's index before probing it so the parent knows which hung.
_CHILD = r"""
import json, re, sys
try:
    import re._parser as sre
    from re._constants import ANY, BRANCH, IN, LITERAL, MAX_REPEAT, MIN_REPEAT, \
        POSSESSIVE_REPEAT, RANGE, SUBPATTERN, ATOMIC_GROUP, ASSERT, ASSERT_NOT, CATEGORY, \
        CATEGORY_DIGIT, CATEGORY_SPACE, CATEGORY_WORD, NEGATE
except ImportError:
    sre = None

def literal_runs(pattern):
    runs, current = [], []
    def flush():
        if current:
            runs.append("".join(current))
            current.clear()
    def sample(items):
        for op, av in items:
            if op == NEGATE:
                return None
            if op == LITERAL:
                return chr(av)
            if op == RANGE:
                return chr(av[0])
            if op == CATEGORY:
                return {CATEGORY_DIGIT: "0", CATEGORY_SPACE: " ", CATEGORY_WORD: "a"}.get(av)
        return None
    def walk(items):
        for op, av in items:
            if op == LITERAL:
                current.append(chr(av))
            elif op == IN:
                ch = sample(av)
                if ch is None:
                    flush()
                else:
                    current.append(ch)
            elif op == ANY:
                current.append("a")
            elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
                flush(); walk(av[2]); flush()
            elif op == SUBPATTERN:
                walk(av[3])
            elif op == ATOMIC_GROUP:
                walk(av)
            elif op in (ASSERT, ASSERT_NOT):
                flush()
            elif op == BRANCH:
                flush()
                for branch in av[1]:
                    walk(branch); flush()
            else:
                flush()
    if sre is not None:
        walk(sre.parse(pattern).data)
    flush()
    return [r for r in runs if r]

def probes(pattern, size):
    runs = literal_runs(pattern)
    found = [run * (size // len(run) + 1) for run in runs]
    for cut in range(1, len(runs)):
        almost = "".join(runs[:cut])
        found.append(almost * (size // len(almost) + 1))
    for a, b in zip(runs, runs[1:]):
        found.append((a + b) * (size // len(a + b) + 1))
    found += ["a" * size, "0" * size, " " * size, "a " * (size // 2), "/a" * (size // 2)]
    return [text[:size] for text in found]

size = int(sys.argv[1])
for index, pattern in enumerate(json.load(sys.stdin)):
    print(index, flush=True)
    compiled = re.compile(pattern)
    for text in probes(pattern, size):
        compiled.search(text)
        compiled.search(text + "\n" + text)
"""


def regex_hazard(pattern: str, *, size: int = PROBE_CHARS,
                 seconds: float = PROBE_SECONDS) -> str | None:
    """Why ``pattern`` is unsafe on hostile text (it did not get through the probes within
    ``seconds``), or ``None`` when it did (or no child process could be started)."""
    return regex_hazards([pattern], size=size, seconds=seconds)[0]


def regex_hazards(patterns: Sequence[str], *, size: int = PROBE_CHARS,
                  seconds: float = PROBE_SECONDS) -> tuple[str | None, ...]:
    """:func:`regex_hazard` of each of ``patterns``: one child process runs them in turn, up
    to the first that hangs; a new child takes the rest. Cached per pattern for the process
    (a batch loads the same user rule file once per source)."""
    todo = [p for p in dict.fromkeys(patterns) if (p, size, seconds) not in _VERDICTS]
    while todo:
        verdicts = _run_probes(todo, size, seconds)
        for pattern, verdict in zip(todo, verdicts, strict=False):
            _VERDICTS[pattern, size, seconds] = verdict
        todo = todo[len(verdicts):]
    return tuple(_VERDICTS[p, size, seconds] for p in patterns)


_VERDICTS: dict[tuple[str, int, float], str | None] = {}


def _run_probes(patterns: list[str], size: int, seconds: float) -> list[str | None]:
    """The verdicts of ``patterns`` up to the first that hangs (all of them if none does)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    try:
        # ``seconds`` for the slowest pattern; a linear one takes well under a second.
        subprocess.run([sys.executable, "-I", "-c", _CHILD, str(size)],
                       input=json.dumps(patterns), capture_output=True, text=True,
                       timeout=seconds + len(patterns) - 1, check=True, env=env)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        hung = int(out.split()[-1]) if out.split() else 0
        return [*(None for _ in range(hung)), _message(size, seconds)]
    except (OSError, subprocess.CalledProcessError) as exc:
        # No child (a sandbox without fork) is no verdict: the pattern compiled already.
        LOG.debug("regex probe not run (%s)", exc)
    return [None for _ in patterns]


def _message(size: int, seconds: float) -> str:
    return (f"backtracks catastrophically: on a {size // 1000} KB line built from its own "
            f"text it ran past {seconds:g} s (make it linear: anchor it per line with (?m)^, "
            "use atomic groups (?>...) or possessive *+ ++, classes that stop at a delimiter "
            "such as [^\"\\n]*, and no match starting inside a run: (?<!\\d)\\d+)")
