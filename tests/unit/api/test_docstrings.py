"""Library users (issue 26): every public function says its parameters, what it returns and
what it raises; ``help(cudasplit.split)`` is useful; no docstring points at a private name."""

from __future__ import annotations

import inspect
import re

import pytest

import cudasplit
from tests.support.paths import REPO
from tests.support.public import public

PUBLIC = public()  # every public name, of cudasplit and its documented modules

FUNCTIONS = sorted(n for n in PUBLIC if inspect.isfunction(PUBLIC[n]))
CLASSES = sorted(n for n in PUBLIC if inspect.isclass(PUBLIC[n]))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_docstring_has_args_returns_raises(name: str) -> None:
    function = PUBLIC[name]
    doc = inspect.getdoc(function) or ""
    for parameter in inspect.signature(function).parameters:
        assert re.search(rf"^\s+{parameter}:", doc, re.M), f"{name}: {parameter} undocumented"
    assert "\nReturns:\n" in doc and "\nRaises:\n" in doc, name


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_docstring_names_only_public_functions(name: str) -> None:
    doc = inspect.getdoc(PUBLIC[name]) or ""
    for referenced in re.findall(r":func:`([^`]+)`", doc):
        assert referenced.removeprefix("cudasplit.").split(".")[-1] in PUBLIC, \
            f"{name} points at {referenced}"
    assert not re.search(r"\b_[a-z]\w*\(", doc), name


@pytest.mark.parametrize("name", CLASSES)
def test_classes_have_docstrings(name: str) -> None:
    assert (PUBLIC[name].__doc__ or "").strip(), name


def test_help_of_split_is_useful() -> None:
    text = pydoc_text(cudasplit.split)
    assert "Args:" in text and "ProblemsFound" in text and len(text.splitlines()) > 15


def pydoc_text(obj: object) -> str:
    import pydoc

    return pydoc.render_doc(obj, renderer=pydoc.plaintext)


def _constructed(name: str) -> bool:
    """Classes a user builds (not errors, enums or the Sink protocol)."""
    import enum
    import typing

    cls = PUBLIC[name]
    return not issubclass(cls, BaseException | enum.Enum) and not getattr(
        cls, "_is_protocol", False) and cls is not typing.Protocol


def _taken() -> set[str]:
    """Classes a public function or method takes: what callers build or hand back."""
    import typing

    from tests.unit.api.test_public_types import _annotated, _classes_in, _namespace

    taken = set()
    for name in PUBLIC:
        for where, thing in _annotated(PUBLIC[name]):
            if isinstance(thing, type) or where.endswith(".__init__"):
                continue
            hints = typing.get_type_hints(thing, localns=_namespace())
            taken |= {c.__name__ for key, hint in hints.items() if key != "return"
                      for c in _classes_in(hint)}
    return taken


def _documents_fields(name: str) -> bool:
    """Classes callers build or pass in, and every record that lists its attributes: each
    parameter named. (A record the API only returns needs a docstring of its own:
    tests/unit/api/test_public_types.py.)"""
    doc = inspect.getdoc(PUBLIC[name]) or ""
    return name in TAKEN or "\nAttributes:\n" in doc or "\nArgs:\n" in doc


TAKEN = _taken()


@pytest.mark.parametrize("name", [n for n in CLASSES if _constructed(n) and _documents_fields(n)])
def test_class_docstring_names_every_parameter_and_raises(name: str) -> None:
    cls = PUBLIC[name]
    doc = inspect.getdoc(cls) or ""
    assert "\nAttributes:\n" in doc or "\nArgs:\n" in doc, name
    for parameter in inspect.signature(cls).parameters:
        assert re.search(rf"^\s+{parameter}:", doc, re.M), f"{name}: {parameter} undocumented"
    assert "\nRaises:\n" in doc, name


def test_api_reference_is_generated_from_the_docstrings() -> None:
    import subprocess
    import sys

    repo = REPO
    done = subprocess.run([sys.executable, str(repo / "scripts" / "gen_reference.py"),
                           "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    page = (repo / "docs" / "reference" / "api.md").read_text()
    assert all(f"`{name}`" in page for name in PUBLIC)
