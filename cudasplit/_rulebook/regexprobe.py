"""Whether a ``text_edits`` regex backtracks catastrophically: a rule on its structure, then probe
inputs that cover its character classes, run in a child process with a bounded total cost.

A text edit's regex runs on archive members, which are hostile input: a pattern such as
``^.*check_.*TRT::[A-Za-z]*win`` is quadratic (or worse) on one long line that repeats its
fragments, and Python's ``re`` has no time limit. Shipped patterns are written to be linear
(atomic groups, possessive quantifiers, classes that stop at a delimiter; a test runs this
check on each of them); a user's pattern is checked by ``rules check`` and when a user rule
file is loaded, and refused with a hint when it fails.

1. **Structure** (in this process, no child): an unbounded quantifier whose body holds another
   quantifier (not atomic, not possessive) is refused unless the body also has a required part
   whose characters the inner one cannot match, a delimiter between the repetitions.
   ``(a+)+``, ``(?:[^\\w\\s]+)+x`` and ``(\\w+\\s?)+`` are refused (each splits a run of
   matching characters in exponentially many ways); ``(?:\\s*,\\s*\\w+)*`` is not (the comma
   delimits). Characters are compared over a sample alphabet (ASCII and a few others), each
   class asked with the regex engine itself.
2. **Probes**: each literal run of the pattern, with every character class replaced by a
   character it matches (so ``[^\\w\\s]`` is probed with punctuation: the old probes only ever
   held letters, digits and spaces, and that pattern passed), repeated to :data:`PROBE_CHARS`
   characters; the runs in order with the last left out (an almost-match that fails late); a
   run of each class's character; runs of one letter, digit and space. A linear pattern gets
   through them in milliseconds.
3. **Cost**: one child runs the probes (it dies with this process: ``PR_SET_PDEATHSIG``, and it
   may use at most the budget's CPU time: ``RLIMIT_CPU``). A pattern that runs past
   :data:`PROBE_SECONDS` is refused and a new child takes the rest; all patterns of one call
   together get :data:`PROBE_BUDGET` seconds, after which the rest are refused unprobed. A
   pattern longer than :data:`MAX_PATTERN` characters is refused before any of this.
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import math
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["MAX_PATTERN", "PROBE_BUDGET", "PROBE_CHARS", "PROBE_SECONDS", "regex_hazard",
           "regex_hazards", "structure_hazard"]

PROBE_CHARS = 200_000
PROBE_SECONDS = 5.0          # one pattern's probes
PROBE_BUDGET = 20.0          # all patterns of one rule file's load together
MAX_PATTERN = 4096           # characters of one pattern
LOG = logging.getLogger("cudasplit")

# Characters every class is asked about: ASCII, Latin-1 letters and space, a CJK letter, the
# line and paragraph separators.
_ALPHABET = [chr(c) for c in range(128)] + ["\xa0", "\xe9", "\xff", "\u4e2d", "\u2028"]

# Runs in the child (``python -I -c``): only the standard library. Arguments: the probe size,
# this process's pid, the CPU seconds it may use. It reads each pattern's seed strings as
# JSON on stdin and prints each pattern's index before probing it, so the parent knows which
# one runs long.
_CHILD = r"""
import ctypes, json, os, re, resource, signal, sys
size, parent, cpu = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
try:   # die with the parent (Linux); then make sure it had not died already
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    sys.exit(3)
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
for index, (pattern, seeds) in enumerate(json.load(sys.stdin)):
    print(index, flush=True)
    compiled = re.compile(pattern)
    for seed in seeds:
        text = (seed * (size // len(seed) + 1))[:size]
        compiled.search(text)
        compiled.search(text + "\n" + text)
print("done", flush=True)
"""


def regex_hazard(pattern: str, *, size: int = PROBE_CHARS,
                 seconds: float = PROBE_SECONDS) -> str | None:
    """Why ``pattern`` is unsafe on hostile text (its structure, or it did not get through
    the probes within ``seconds``), or ``None`` when it is safe (or no child process could be
    started)."""
    return regex_hazards([pattern], size=size, seconds=seconds)[0]


def regex_hazards(patterns: Sequence[str], *, size: int = PROBE_CHARS,
                  seconds: float = PROBE_SECONDS,
                  budget: float = PROBE_BUDGET) -> tuple[str | None, ...]:
    """:func:`regex_hazard` of each of ``patterns``, all of them in at most about ``budget``
    seconds: one child probes them in turn; a pattern past ``seconds`` is refused and a new
    child takes the rest; once ``budget`` is spent the rest are refused unprobed. Cached per
    pattern for the process (a batch loads the same user rule file once per source)."""
    todo: list[str] = []
    for pattern in dict.fromkeys(patterns):
        if (pattern, size, seconds) in _VERDICTS:
            continue
        static = structure_hazard(pattern)
        if static is not None:
            _VERDICTS[pattern, size, seconds] = static
        else:
            todo.append(pattern)
    ends = time.monotonic() + budget
    unprobed: dict[str, str] = {}   # not cached: another call has a budget of its own
    while todo:
        left = ends - time.monotonic()
        if left <= 0:
            unprobed.update((pattern, _budget_message(budget)) for pattern in todo)
            break
        verdicts = _run_probes(todo, size, seconds, left, budget)
        for pattern, verdict in zip(todo, verdicts, strict=False):
            if verdict is not None and verdict.startswith(_UNPROBED):
                unprobed[pattern] = verdict
            else:
                _VERDICTS[pattern, size, seconds] = verdict
        todo = todo[len(verdicts):]
    return tuple(unprobed[p] if p in unprobed else _VERDICTS[p, size, seconds]
                 for p in patterns)


_VERDICTS: dict[tuple[str, int, float], str | None] = {}
_UNPROBED = "was not probed"


# -- 1. structure ---------------------------------------------------------------------------------

def structure_hazard(pattern: str) -> str | None:
    """Why ``pattern``'s structure backtracks exponentially (nested quantifiers over the same
    characters, nothing required between the repetitions), or ``None``."""
    if len(pattern) > MAX_PATTERN:
        return f"is longer than {MAX_PATTERN} characters"
    try:
        parsed = _parse(pattern)
    except Exception:  # the caller compiled it already: no verdict here
        return None
    return _Structure(parsed.state).walk(parsed.data)


def _engine(part: str) -> Any:
    """``re._parser``, ``re._compiler`` or ``re._constants``: the engine's own parser, so what
    it runs is what is checked (private modules, stable since Python 3.11)."""
    return importlib.import_module(f"re._{part}")


def _parse(pattern: str) -> Any:
    return _engine("parser").parse(pattern)


class _Structure:
    """The nested-quantifier rule over one parsed pattern (sets of sample characters)."""

    def __init__(self, state: Any) -> None:
        c = _engine("constants")
        self.c, self.state = c, state
        self.repeats = (c.MAX_REPEAT, c.MIN_REPEAT)
        self.sets: dict[int, frozenset[str]] = {}   # by the node's text

    def walk(self, items: Iterable[tuple[Any, Any]], guarded: bool = False) -> str | None:
        """The first hazard in ``items``; ``guarded``: inside an atomic group or a possessive
        repeat (its inner choices are never retried)."""
        c = self.c
        for op, av in items:
            if op in self.repeats and av[1] == c.MAXREPEAT and not guarded:
                found = self._nested(av[2])
                if found is not None:
                    return found
            for child, inner_guard in self._children(op, av):
                found = self.walk(child, guarded or inner_guard)
                if found is not None:
                    return found
        return None

    def _children(self, op: Any, av: Any) -> list[tuple[list[Any], bool]]:
        c = self.c
        if op in self.repeats:
            return [(av[2], False)]
        if op == c.POSSESSIVE_REPEAT:
            return [(av[2], True)]
        if op == c.ATOMIC_GROUP:
            return [(av, True)]
        if op == c.SUBPATTERN:
            return [(av[3], False)]
        if op == c.BRANCH:
            return [(branch, False) for branch in av[1]]
        if op in (c.ASSERT, c.ASSERT_NOT):
            return [(av[1], False)]
        if op == c.GROUPREF_EXISTS:
            return [(branch, False) for branch in av[1:] if branch is not None]
        return []

    def _nested(self, body: list[Any]) -> str | None:
        """An unbounded repeat's body: each inner quantifier needs a required delimiter."""
        sequence = self._flat(body)
        for at, (op, av) in enumerate(sequence):
            for inner in self._inner_repeats(op, av):
                chars = self._chars([inner])
                others = [item for i, item in enumerate(sequence) if i != at]
                if not any(self._required(item) and not (self._chars([item]) & chars)
                           for item in others):
                    return ("nests a quantifier inside another over the same characters, "
                            "with nothing required between the repetitions (each run of "
                            "those characters splits in exponentially many ways)" + _HINT)
        return None

    def _flat(self, body: list[Any]) -> list[tuple[Any, Any]]:
        """``body`` with plain groups opened: their parts are parts of the sequence."""
        out: list[tuple[Any, Any]] = []
        for op, av in body:
            if op == self.c.SUBPATTERN:
                out.extend(self._flat(av[3]))
            else:
                out.append((op, av))
        return out

    def _inner_repeats(self, op: Any, av: Any) -> list[tuple[Any, Any]]:
        """The quantifiers in one part that may repeat and backtrack (not guarded)."""
        c = self.c
        if op in self.repeats:
            return [(op, av)] if av[1] > 1 else self._inner_in(av[2])
        if op in (c.SUBPATTERN, c.BRANCH, c.GROUPREF_EXISTS):
            return [found for child, _ in self._children(op, av) for found in
                    self._inner_in(child)]
        return []

    def _inner_in(self, items: list[Any]) -> list[tuple[Any, Any]]:
        return [found for op, av in items for found in self._inner_repeats(op, av)]

    def _required(self, item: tuple[Any, Any]) -> bool:
        return bool(self._width([item])[0] >= 1)

    def _width(self, items: list[Any]) -> tuple[int, int]:
        low, high = _engine("parser").SubPattern(self.state, list(items)).getwidth()
        return int(low), int(high)

    def _chars(self, items: list[Any]) -> frozenset[str]:
        """The sample characters any part of ``items`` can consume."""
        c = self.c
        found: set[str] = set()
        for op, av in items:
            if op in (c.LITERAL, c.NOT_LITERAL, c.IN, c.ANY, c.CATEGORY, c.LITERAL_IGNORE,
                      c.NOT_LITERAL_IGNORE, c.LITERAL_UNI_IGNORE, c.NOT_LITERAL_UNI_IGNORE,
                      c.LITERAL_LOC_IGNORE, c.NOT_LITERAL_LOC_IGNORE, c.IN_IGNORE,
                      c.IN_UNI_IGNORE, c.IN_LOC_IGNORE):
                found |= self._single(op, av)
            elif op in (c.GROUPREF, c.GROUPREF_IGNORE, c.GROUPREF_UNI_IGNORE,
                        c.GROUPREF_LOC_IGNORE):
                found |= set(_ALPHABET)       # a back reference: anything its group took
            else:
                for child, _ in self._children(op, av):
                    found |= self._chars(child)
        return frozenset(found)

    def _single(self, op: Any, av: Any) -> frozenset[str]:
        """The sample characters one single-character node matches (asked of the engine)."""
        if op == self.c.LITERAL:
            return frozenset(chr(av))
        key = hash((str(op), repr(av)))
        known = self.sets.get(key)
        if known is None:
            node = _engine("compiler").compile(_engine("parser").SubPattern(self.state,
                                                                              [(op, av)]))
            known = self.sets[key] = frozenset(ch for ch in _ALPHABET if node.fullmatch(ch))
        return known


_HINT = (" (make it linear: anchor it per line with (?m)^, use atomic groups (?>...) or "
         "possessive *+ ++, classes that stop at a delimiter such as [^\"\\n]*, and no match "
         "starting inside a run: (?<!\\d)\\d+)")


# -- 2. probes ------------------------------------------------------------------------------------

_MAX_SEEDS = 32       # runs and classes probed per pattern (about 100 probes in all)


def probe_seeds(pattern: str) -> list[str]:
    """The short strings the child repeats to :data:`PROBE_CHARS` characters."""
    runs, classes = _runs(pattern)
    runs, classes = runs[:_MAX_SEEDS], classes[:_MAX_SEEDS]   # a bounded number of probes
    seeds = list(runs)
    seeds += ["".join(runs[:cut]) for cut in range(1, len(runs))]
    seeds += [a + b for a, b in itertools.pairwise(runs)]
    seeds += classes
    seeds += ["a", "0", " ", "a ", "/a", "*", "-_"]
    return [s for s in dict.fromkeys(seeds) if s]


def _runs(pattern: str) -> tuple[list[str], list[str]]:
    """The pattern's literal runs (a class as a character it matches) and one character per
    class."""
    try:
        parsed = _parse(pattern)
    except Exception:  # as above
        return [], []
    structure = _Structure(parsed.state)
    c = structure.c
    runs: list[str] = []
    classes: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    def sample(op: Any, av: Any) -> str | None:
        chars = structure._single(op, av)
        if not chars:
            return None
        # A printable one that is no letter or digit when there is one (what a class like
        # [^\w\s] is about), else the first.
        printable = sorted(ch for ch in chars if ch.isprintable())
        odd = [ch for ch in printable if not ch.isalnum() and ch != " "]
        return (odd or printable or sorted(chars))[0]

    def walk(items: list[Any]) -> None:
        for op, av in items:
            if op in (c.LITERAL, c.IN, c.ANY, c.CATEGORY, c.NOT_LITERAL, c.IN_IGNORE,
                      c.IN_UNI_IGNORE, c.LITERAL_IGNORE, c.LITERAL_UNI_IGNORE):
                ch = chr(av) if op == c.LITERAL else sample(op, av)
                if ch is None:
                    flush()
                    continue
                current.append(ch)
                if op != c.LITERAL:
                    classes.append(ch)
            elif op in (*structure.repeats, c.POSSESSIVE_REPEAT):
                flush()
                walk(av[2])
                flush()
            elif op == c.SUBPATTERN:
                walk(av[3])
            elif op == c.ATOMIC_GROUP:
                walk(av)
            elif op == c.BRANCH:
                flush()
                for branch in av[1]:
                    walk(branch)
                    flush()
            else:
                flush()

    walk(parsed.data)
    flush()
    return runs, list(dict.fromkeys(classes))


# -- 3. the child ---------------------------------------------------------------------------------

def _run_probes(patterns: list[str], size: int, seconds: float, left: float,
                budget: float) -> list[str | None]:
    """The verdicts of ``patterns`` up to the first that runs past ``seconds`` (all of them
    if none does), within ``left`` seconds of the call's ``budget``."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    cpu = max(1, math.ceil(left) + 1)
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-c", _CHILD, str(size), str(os.getpid()), str(cpu)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env)
    except OSError as exc:
        # No child (a sandbox without fork) is no verdict: the pattern compiled already.
        LOG.debug("regex probe not run (%s)", exc)
        return [None for _ in patterns]
    try:
        return _watch(child, patterns, size, seconds, left, budget)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def _watch(child: subprocess.Popen[bytes], patterns: list[str], size: int, seconds: float,
           left: float, budget: float) -> list[str | None]:
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(json.dumps([[p, probe_seeds(p)] for p in patterns]).encode())
        child.stdin.close()
    except OSError:
        return [None for _ in patterns]
    verdicts: list[str | None] = []
    ends, current, pending = time.monotonic() + left, -1, b""
    pattern_ends = ends
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while True:
            wait = min(pattern_ends, ends) - time.monotonic()
            if wait <= 0:
                if current < 0:
                    return [None for _ in patterns]
                over_budget = pattern_ends > ends
                return [*verdicts, _budget_message(budget) if over_budget
                        else _message(size, seconds)]
            if not selector.select(wait):
                continue
            data = os.read(child.stdout.fileno(), 4096)
            if not data:       # the child ended early (no fork, no memory): no verdict
                LOG.debug("regex probe child ended (exit %s)", child.wait())
                return [*verdicts, *(None for _ in patterns[len(verdicts):])]
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line == b"done":
                    return [*verdicts, *(None for _ in patterns[len(verdicts):])]
                if current >= 0:
                    verdicts.append(None)
                current = int(line)
                pattern_ends = time.monotonic() + seconds


def _message(size: int, seconds: float) -> str:
    return (f"backtracks catastrophically: on a {size // 1000} KB line built from its own "
            f"text it ran past {seconds:g} s" + _HINT)


def _budget_message(budget: float) -> str:
    return (f"{_UNPROBED}: this file's patterns took more than {budget:g} s to probe in "
            "all" + _HINT)
