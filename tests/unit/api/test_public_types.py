"""Every type the public API hands out or takes is public: a caller can name it.

The annotations of every public function, of every public method of a public class, and the
fields of every public dataclass are resolved with :func:`typing.get_type_hints`; each class of
the package they mention (inside unions, tuples, mappings, callables ...) must be the object
``cudasplit.<its name>`` or ``cudasplit.<module>.<its name>`` (in the ``__all__`` of
cudasplit or one of its documented modules, hence documented in docs/reference/api.md).
``closure_of`` once returned ``_release.closure.ClosureReport``, and
``LoadView.needed`` held ``_release.ldd.Resolution``s: names no caller could import.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest

import cudasplit
from tests.support.public import public

PUBLIC = public()  # every public name, of cudasplit and its documented modules


@cache
def _namespace() -> dict[str, Any]:
    """Every class and alias the package defines, to resolve string annotations (including
    names imported only under ``TYPE_CHECKING``)."""
    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(cudasplit.__path__, "cudasplit."):
        if info.name.endswith(("__main__", "lief_worker")):
            continue
        module = importlib.import_module(info.name)
        for key, value in vars(module).items():
            if isinstance(value, type) or key[:1].isupper():
                found.setdefault(key, value)
    return found


def _classes_in(annotation: Any) -> Iterator[type]:
    if typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            yield from _classes_in(arg)
    elif isinstance(annotation, list):  # Callable[[A, B], C]
        for arg in annotation:
            yield from _classes_in(arg)
    elif isinstance(annotation, type):
        yield annotation


def _annotated(obj: Any) -> Iterator[tuple[str, Callable[..., Any] | type]]:
    """(where, thing with annotations): a function; a class's fields and public methods."""
    if inspect.isfunction(obj):
        yield obj.__name__, obj
        return
    if not isinstance(obj, type) or issubclass(obj, BaseException):
        return
    if dataclasses.is_dataclass(obj):
        yield obj.__name__, obj
    for attr, value in vars(obj).items():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__",
                                                                            value)
        if (not attr.startswith("_") or attr == "__init__") and inspect.isfunction(function):
            yield f"{obj.__name__}.{attr}", function


def private_types() -> dict[str, list[str]]:
    """Package classes the public API mentions that no public module exports, with where."""
    found: dict[str, list[str]] = {}
    for name in PUBLIC:
        for where, thing in _annotated(PUBLIC[name]):
            hints = typing.get_type_hints(thing, localns=_namespace())
            for key, annotation in hints.items():
                for cls in _classes_in(annotation):
                    if cls.__module__.split(".")[0] != "cudasplit":
                        continue
                    if PUBLIC.get(cls.__name__) is not cls:
                        found.setdefault(f"{cls.__module__}.{cls.__qualname__}", []).append(
                            f"{where}: {key}")
    return found


def test_every_type_the_api_mentions_is_public() -> None:
    assert private_types() == {}


def test_the_walk_sees_through_annotations() -> None:
    from cudasplit._release.closure import ClosureReport

    assert list(_classes_in(typing.Optional[tuple[ClosureReport, ...]])) == [  # noqa: UP045
        ClosureReport, type(None)]
    assert list(_classes_in(Callable[[int], ClosureReport])) == [int, ClosureReport]
    hints = typing.get_type_hints(cudasplit.outputs.closure_of, localns=_namespace())
    assert hints["return"] is ClosureReport is cudasplit.outputs.ClosureReport


@pytest.mark.parametrize("name", sorted(n for n in PUBLIC
                                        if inspect.isclass(PUBLIC[n])))
def test_every_public_class_has_a_docstring_of_its_own(name: str) -> None:
    """Not the signature a dataclass gets when it has none."""
    doc = (PUBLIC[name].__doc__ or "").strip()
    assert doc and not doc.startswith(f"{name}("), name
