"""Closure budgets for consumers: CUDA outputs that must never be referenced at run time, and bytes.

Splitting CUDA into outputs only keeps a consumer's closure small if nothing drags the heavy
outputs back in: a program that records ``cuda_cudart-static`` in a string, or a library whose
RUNPATH names the ``stubs`` output, pulls them into every user's closure. A consumer declares
the outputs it may never reference (:data:`DEFAULT_FORBIDDEN`: static archives, stubs, the
compiler and headers) and optionally a byte budget; :func:`check_budget` walks its run-time
closure the way Nix finds references (every ``/nix/store/<hash>-<name>`` in the bytes of every
file, symlink targets included) and reports each forbidden output it reaches with the reference
chain: which file of which path names the next store path.

What an output is comes from the output itself: ``nix-support/cuda-component`` (the metadata
cudasplit and Nixpkgs' buildRedist write: ``[output]="static"``, ``[compiler]="bin/nvcc"``),
else the store name's last ``-<output>`` word (``cuda_cudart-12.9.79-static``). ``include`` is
``headers``; a path whose metadata names a compiler is ``compiler``. Any output name may be
forbidden too (``dev``, ``doc``, ``samples``).

The Nix build does the same in bash (``consumer-guards-hook.sh``, ``cudasplitForbiddenOutputs``,
``cudasplitClosureBudget``); the root is then the build's own outputs, before Nix registers them.
Sizes are the bytes of regular files plus symlink target lengths (close to, not equal to, the NAR
size ``nix path-info -S`` reports).
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudasplit._model import OUTPUT_NAMES
from cudasplit.errors import SourceError, SourceNotFoundError

__all__ = ["DEFAULT_FORBIDDEN", "BudgetReport", "BudgetViolation", "Link", "check_budget",
           "output_words"]

DEFAULT_FORBIDDEN = ("static", "stubs", "compiler", "headers")
STORE_DIR = "/nix/store"
_NAME = rb"[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+._?=-]+"
_OUTPUT = re.compile(r'\[output\]="([^"]*)"')
_MAX_NAME = 32 + 1 + 211  # hash, dash, the longest name Nix allows


BUDGET_SCHEMA = 1  # the "schema" of as_dict (cudasplit/schemas/budget.json)


@dataclass(frozen=True, slots=True)
class Link:
    """``file`` (inside one path of the closure) names the store path ``names``."""

    file: str
    names: str


@dataclass(frozen=True, slots=True)
class BudgetViolation:
    """One broken rule: a forbidden output in the closure, or too many bytes."""

    kind: str                  # forbidden | bytes
    target: str                # the forbidden store path; the root for "bytes"
    category: str              # static | stubs | compiler | headers | <output> | bytes
    chain: tuple[Link, ...]    # root -> ... -> target ("forbidden" only)
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "category": self.category,
                "chain": [{"file": k.file, "names": k.names} for k in self.chain],
                "message": self.message}


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """A consumer's run-time closure and each way it breaks its budget.

    Attributes:
        root: the consumer path the walk started from.
        closure: every path reached, the root first.
        closure_bytes: the bytes of every path reached.
        max_bytes: the budget asked for (``None``: none).
        forbidden: the output kinds that were forbidden.
        violations: each forbidden output reached (with its chain) or the budget overrun;
            empty when the budget holds.
        sizes: bytes per path reached.

    Raises:
        Nothing: a value.
    """

    root: str
    closure: tuple[str, ...]              # every path reached, the root first
    closure_bytes: int
    max_bytes: int | None
    forbidden: tuple[str, ...]
    violations: tuple[BudgetViolation, ...] = ()
    sizes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"schema": BUDGET_SCHEMA, "root": self.root, "closure": list(self.closure),
                "closure_bytes": self.closure_bytes, "max_bytes": self.max_bytes,
                "forbidden": list(self.forbidden),
                "violations": [v.as_dict() for v in self.violations]}

    def text_lines(self) -> list[str]:
        budget = f" (budget {self.max_bytes:,})" if self.max_bytes is not None else ""
        lines = [f"{self.root}: {len(self.closure)} paths, {self.closure_bytes:,} bytes{budget}; "
                 f"forbidden: {', '.join(self.forbidden) or 'nothing'}"]
        for violation in self.violations:
            lines.append(f"violation: {violation.message}")
            lines.extend(f"    {link.file} names {link.names}" for link in violation.chain)
        return lines


def output_words(path: str) -> set[str]:
    """What a store path is: its output name and the categories of :data:`DEFAULT_FORBIDDEN`
    it falls in (see the module text)."""
    words: set[str] = set()
    meta = Path(path, "nix-support", "cuda-component")
    text = ""
    try:
        text = meta.read_text(errors="replace") if meta.is_file() else ""
    except OSError:
        text = ""
    match = _OUTPUT.search(text)
    if match:
        words.add(match.group(1))
    else:
        last = os.path.basename(path).rsplit("-", 1)[-1]
        if last in OUTPUT_NAMES:
            words.add(last)
    if "[compiler]=" in text:
        words.add("compiler")
    if "include" in words:
        words.add("headers")
    return words


def check_budget(root: str | os.PathLike[str], *, forbid: Sequence[str] = DEFAULT_FORBIDDEN,
                 max_bytes: int | None = None, store_dir: str = STORE_DIR) -> BudgetReport:
    """Walk ``root``'s run-time closure (a store path or any directory; see the module text)."""
    start = _start(os.fspath(root), store_dir)
    store = store_dir.rstrip("/")
    pattern = re.compile(re.escape(store.encode()) + rb"/" + _NAME)
    parent: dict[str, Link | None] = {start: None}
    sizes: dict[str, int] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        size, links = _scan(node, store, pattern)
        sizes[node] = size
        for link in links:
            if link.names not in parent and os.path.lexists(link.names):
                parent[link.names] = link
                queue.append(link.names)
    closure = tuple(parent)
    wanted = tuple(forbid)
    violations = [_forbidden(node, words, parent)
                  for node in closure[1:]
                  if (words := output_words(node) & set(wanted))]
    total = sum(sizes.values())
    if max_bytes is not None and total > max_bytes:
        largest = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        biggest = ", ".join(f"{os.path.basename(p)} {n:,}" for p, n in largest)
        violations.append(BudgetViolation(
            "bytes", start, "bytes", (),
            f"closure of {start} is {total:,} bytes, over the budget of {max_bytes:,} "
            f"(largest: {biggest})"))
    return BudgetReport(start, closure, total, max_bytes, wanted, tuple(violations), sizes)


def _start(root: str, store_dir: str) -> str:
    if not os.path.lexists(root):
        raise SourceNotFoundError("no such file or directory", source=root)
    store = store_dir.rstrip("/") + "/"
    absolute = os.path.abspath(root)
    if absolute.startswith(store):
        # /nix/store/<hash>-name/bin/x: the closure is the whole store path's.
        return store + absolute[len(store):].split("/", 1)[0]
    if not os.path.isdir(absolute):
        raise SourceError("not a store path or a directory", source=absolute)
    return absolute


def _forbidden(node: str, words: set[str], parent: dict[str, Link | None]) -> BudgetViolation:
    chain: list[Link] = []
    link = parent[node]
    while link is not None:
        chain.append(link)
        link = parent[_owner(link.file, parent)]
    chain.reverse()
    category = sorted(words)[0]
    first = chain[0].file if chain else node
    return BudgetViolation("forbidden", node, category, tuple(chain),
                           f"{category} output {node} is in the run-time closure "
                           f"({first} names {chain[0].names if chain else node})")


def _owner(file: str, parent: dict[str, Link | None]) -> str:
    """The closure path holding ``file`` (the longest one that is a prefix)."""
    best = ""
    for path in parent:
        if (file == path or file.startswith(path + "/")) and len(path) > len(best):
            best = path
    return best


def _scan(node: str, store: str, pattern: re.Pattern[bytes]) -> tuple[int, list[Link]]:
    """Bytes under ``node`` and the first file naming each other store path."""
    total = 0
    first: dict[str, str] = {}
    own = node if node.startswith(store + "/") else None
    for full, link in _walk(node):
        if link is not None:
            total += len(link)
            names = _names(link.encode(), store, pattern)
        else:
            total += os.path.getsize(full)
            names = _file_names(full, store, pattern)
        for name in names:
            if name != own:
                first.setdefault(name, full)
    return total, [Link(file, name) for name, file in sorted(first.items())]


def _file_names(full: str, store: str, pattern: re.Pattern[bytes]) -> set[str]:
    try:
        with open(full, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return set()
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _names(data, store, pattern)
    except OSError as exc:
        raise SourceError(f"cannot read ({exc.strerror or exc})", source=full) from exc


def _names(data: bytes | mmap.mmap, store: str, pattern: re.Pattern[bytes]) -> set[str]:
    """Store paths (``<store>/<hash>-<name>``) in ``data``: memchr-fast ``find`` of the store
    prefix, the pattern tried only at each hit."""
    found: set[str] = set()
    prefix = store.encode() + b"/"
    pos = data.find(prefix)
    while pos >= 0:
        match = pattern.match(data[pos:pos + len(prefix) + _MAX_NAME])
        if match is not None:
            found.add(match.group(0).decode())
        pos = data.find(prefix, pos + 1)
    return found


def _walk(root: str) -> Iterator[tuple[str, str | None]]:
    """(full path, symlink target or None) of every non-directory below ``root``, sorted."""
    if os.path.islink(root) or not os.path.isdir(root):
        yield root, (os.readlink(root) if os.path.islink(root) else None)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + links):
            full = os.path.join(dirpath, name)
            yield full, (os.readlink(full) if os.path.islink(full) else None)
