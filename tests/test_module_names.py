"""Docstrings and comments name modules and files that exist.

Modules move and get renamed; a docstring that still says ``_libmajor.py`` or
``:mod:`._manifestparse``` sends the reader nowhere (and once sent users there, in a message).
Read with ``ast`` and ``tokenize`` from the source; nothing of the package is executed except
the imports that check a dotted ``cudasplit.x.y`` name's last part.

What counts as naming a module, in a docstring, a comment or a string:

* ``:mod:`target``` (absolute, or relative to the module's package);
* ``cudasplit.a.b[.attr]``: the longest module prefix exists and the rest is an attribute of it;
* a file name ending in ``.py``: with a folder (``tests/unit/api/test_public_face.py``), relative to the
  repository, the package or the module's folder; bare (``libmajor.py``), a file of that name
  somewhere in the repository (or one of the few outside files in ``OUTSIDE``);
* a private name ``_name`` (``_tarfields``, ``_codecchunks.all_zero``): a module, or a name the
  package defines (function, class, attribute, variable, argument).
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cudasplit"
SOURCES = sorted(PACKAGE.rglob("*.py"))
# Files named in the code that live outside this repository.
OUTSIDE = {"auto-patchelf.py"}  # Nixpkgs' autoPatchelfHook
# Private-looking words that are not ours: Nixpkgs' ``_cuda`` attribute set, NVIDIA's
# ``_cudaNN`` archive suffix (``_cuda13``), the flag ``typing`` sets on a Protocol class.
FOREIGN = re.compile(r"_cuda\d*|_is_protocol")

MOD = re.compile(r":mod:`~?([\w.]+)`")
DOTTED = re.compile(r"(?<![\w.])cudasplit((?:\.\w+)+)")
PY_FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
PRIVATE = re.compile(r"(?<![\w./-])(_[a-z][a-z0-9_]*)(?![\w{])")


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_dotted(p): p for p in SOURCES}
BASENAMES = {p.stem for p in SOURCES} | {p.parent.name for p in SOURCES}


@cache
def _defined() -> frozenset[str]:
    names: set[str] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return frozenset(names)


@cache
def _repo_files() -> frozenset[str]:
    skip = {".venv", ".git", "node_modules", ".bench-cache", ".gpu", ".whl"}
    return frozenset(p.name for p in ROOT.rglob("*.py")
                     if not skip.intersection(p.relative_to(ROOT).parts))


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every string literal (docstrings included)."""
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def _resolve_relative(path: Path, target: str) -> str:
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    dots = len(target) - len(target.lstrip("."))
    base = package.split(".")
    base = base[:len(base) - (dots - 1)] if dots > 1 else base
    return ".".join([*base, target.lstrip(".")])


def _bad_mod(path: Path, target: str) -> bool:
    name = _resolve_relative(path, target) if target.startswith(".") else target
    return name.startswith("cudasplit") and name not in MODULES


def _bad_dotted(parts: list[str]) -> bool:
    known = [k for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in MODULES]
    longest = max(known)
    if longest == len(parts):
        return False
    module = importlib.import_module(".".join(parts[:longest]))
    return not hasattr(module, parts[longest])


def _bad_file(path: Path, name: str) -> bool:
    if "/" in name:
        return not any((base / name).exists() for base in (ROOT, PACKAGE, path.parent))
    return name not in _repo_files() and name not in OUTSIDE


def _bad_private(word: str) -> bool:
    return not FOREIGN.fullmatch(word) and word not in BASENAMES and word not in _defined()


def stale_names(path: Path) -> list[str]:
    found = []
    for number, line in _prose(path):
        bad = [f":mod:`{m}`" for m in MOD.findall(line) if _bad_mod(path, m)]
        bad += [f"cudasplit{m}" for m in DOTTED.findall(line)
                if _bad_dotted(f"cudasplit{m}".split("."))]
        bad += [m for m in PY_FILE.findall(line) if _bad_file(path, m)]
        bad += [m for m in PRIVATE.findall(line) if _bad_private(m)]
        found += [f"{path.relative_to(ROOT)}:{number}: {name}" for name in bad]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_docstrings_and_comments_name_modules_that_exist(path: Path) -> None:
    assert stale_names(path) == []


def test_the_check_catches_what_it_should(tmp_path: Path) -> None:
    here = PACKAGE / "_split" / "pipeline.py"
    assert _bad_mod(here, "._manifestparse") and not _bad_mod(here, ".libmajor")
    assert _bad_mod(PACKAGE / "_source" / "__init__.py", "._tarsource")
    assert not _bad_mod(PACKAGE / "_source" / "__init__.py", ".tar")
    assert _bad_dotted(["cudasplit", "_source", "open_sourcez"])
    assert not _bad_dotted(["cudasplit", "_source", "open_source"])
    assert _bad_dotted(["cudasplit", "_split", "_gone"])
    assert _bad_file(here, "_libmajor.py") and not _bad_file(here, "libmajor.py")
    assert _bad_file(here, "tests/test_public_api.py")
    assert not _bad_file(here, "tests/cli/test_public_api.py")
    assert _bad_private("_codecchunks") and not _bad_private("_reach")
    module = tmp_path / "mod.py"
    module.write_text('"""See ``_tarfields`` and (_pkgtable.py)."""\n# the _cudaNN suffix\n')
    words = " ".join(line for _, line in _prose(module))
    assert PRIVATE.findall(words) == ["_tarfields", "_pkgtable"]
