"""Arguments of the public entry points, checked against their own annotations at the call.

Every public function (and the options and sinks users build) takes its arguments through
:func:`checked`: an unknown or missing parameter, or a value of the wrong type, is an
:class:`~cudasplit.errors.OptionsTypeError` (a ``CudasplitError`` and a ``TypeError``) that
names the parameter, raised before anything runs. Without it a bare string where a list is
meant (``platforms="linux-x86_64"``) was taken letter by letter, an ``int`` where a path is
meant failed as an ``AttributeError`` deep inside, and a keyword that no longer exists was a
plain ``TypeError``. The annotations are the contract the API reference documents; this reads
them, so a signature and its check cannot drift apart.

What an annotation accepts: ``str``, ``bool``, ``int`` (never a ``bool``), ``float`` (an
``int`` too); a path (``Path``, ``os.PathLike``, the ``PathLike`` aliases) is a ``str`` or an
``os.PathLike`` giving one, not empty, with no component over 255 bytes and at most 4,095
bytes in all (what the kernel refuses as ``ENAMETOOLONG``); ``Sequence``/``Collection``/
``Iterable``/``tuple``/``list`` of X a collection (never a bare ``str`` or ``bytes``) whose
items are X; ``Mapping``/``dict`` a mapping; ``Callable`` anything callable; a class its
instances; a ``Protocol`` (``Sink``, ``Source``) anything with its methods and attributes;
``None`` where the annotation allows it. No text anywhere in an argument (a path, a word, an
item of a list, a key or value of a mapping) may hold a NUL: no name, path or word of this
API can. A name the annotation uses that cannot be resolved (an import under
``TYPE_CHECKING`` only) accepts anything.
"""

from __future__ import annotations

import builtins
import collections.abc as abc
import functools
import inspect
import os
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any, TypeVar

from cudasplit.errors import OptionsError, OptionsTypeError

__all__ = ["check_fields", "check_value", "checked"]

class _Unknown:
    """An annotation name that cannot be resolved: anything goes."""


F = TypeVar("F", bound=Callable[..., Any])


@typing.overload
def checked(function: F, /) -> F: ...


@typing.overload
def checked(function: None = None, /, **minimum: int) -> Callable[[F], F]: ...


def checked(function: Any = None, /, **minimum: int) -> Any:
    """``function``, its arguments checked against its annotations at every call; ``minimum``:
    the least value of integer parameters (``@checked(jobs=1)``), an OptionsError below it.
    On a class (a dataclass, whose fields ``__post_init__`` checks): its ``__init__`` takes
    only the parameters it has, an unknown one an OptionsTypeError."""
    if function is None:
        return functools.partial(checked, **minimum)
    if isinstance(function, type):
        function.__init__ = _bound_only(function)  # type: ignore[misc]
        return function
    signature = inspect.signature(function)
    name = function.__qualname__.removesuffix(".__init__")
    hints: dict[str, Any] | None = None

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal hints
        if hints is None:  # resolved at the first call: every module is loaded by then
            hints = _hints(function)
        bound = _bind(signature, name, args, kwargs)
        for param, value in bound.arguments.items():
            if param in ("self", "cls") or param not in hints:
                continue
            kind = signature.parameters[param].kind
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            check_value(param, value, hints[param])
            least = minimum.get(param)
            if least is not None and isinstance(value, int) and value < least:
                raise OptionsError(f"{param} must be an integer >= {least}, not {value}")
        return function(*args, **kwargs)

    return call


def _bind(signature: inspect.Signature, name: str, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> inspect.BoundArguments:
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise OptionsTypeError(f"{name}(): {exc}") from None


def _bound_only(klass: type) -> Callable[..., None]:
    init: Callable[..., None] = vars(klass)["__init__"]
    signature = inspect.signature(init)

    @functools.wraps(init)
    def call(*args: Any, **kwargs: Any) -> None:
        _bind(signature, klass.__name__, args, kwargs)
        init(*args, **kwargs)

    return call


def check_fields(instance: object) -> None:
    """Every field of a dataclass ``instance`` against its annotation (``__post_init__``)."""
    hints = _hints(type(instance))
    for field in getattr(instance, "__dataclass_fields__", {}):
        if field in hints:
            check_value(field, getattr(instance, field), hints[field])


def check_value(name: str, value: object, hint: Any) -> None:
    """OptionsTypeError naming ``name`` unless ``value`` conforms to ``hint``; OptionsError for
    an empty path or one with NUL."""
    problem = _mismatch(value, hint)
    if problem is not None:
        raise OptionsTypeError(f"{name} must be {_describe(hint)}, not {_shown(value)}"
                               + (f" ({problem})" if problem else ""))
    _check_text(name, value, hint)


MAX_PATH_BYTES = 4095      # PATH_MAX less its NUL
MAX_NAME_BYTES = 255       # NAME_MAX: one component


def _check_text(name: str, value: object, hint: Any, depth: int = 0) -> None:
    """OptionsError for a NUL in any text of ``value`` (items, keys and values included), or
    a path that is empty or too long for the kernel (``hint`` says whether ``value`` is one;
    ``''`` used to mean the current directory)."""
    if depth > 8:
        return
    if isinstance(value, os.PathLike) and not isinstance(value, str):
        try:
            value = os.fspath(value)
        except TypeError:
            return
    if isinstance(value, str):
        if "\0" in value:
            raise OptionsError(f"{name} must not contain a NUL character: {_shown(value)}")
        if _may_be_path(hint):
            if not value:
                raise OptionsError(f"{name} must not be empty ('' is not a file or directory)")
            _check_path_length(name, value)
        return
    if isinstance(value, Mapping):
        key_hint, item_hint = (*typing.get_args(hint), Any, Any)[:2]
        for key, item in value.items():
            _check_text(name, key, key_hint, depth + 1)
            _check_text(name, item, item_hint, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        item_hint = _item_hint(hint)
        for index, item in enumerate(value):
            _check_text(f"{name}[{index}]", item, item_hint, depth + 1)


def _may_be_path(hint: Any) -> bool:
    """A path, or a union one of whose members is (``PathLike | Source``)."""
    if _is_path_hint(hint):
        return True
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and any(
        _is_path_hint(a) or a is os.PathLike or typing.get_origin(a) is os.PathLike
        for a in typing.get_args(hint))


def _item_hint(hint: Any) -> Any:
    """What the items of a collection annotated ``hint`` are (``Any`` when not said)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [_item_hint(a) for a in typing.get_args(hint) if a is not type(None)]
        paths = [a for a in inner if _may_be_path(a)]
        return paths[0] if paths else Any
    args = [a for a in typing.get_args(hint) if a is not Ellipsis]
    return args[0] if len(args) == 1 else Any


def _check_path_length(name: str, text: str) -> None:
    raw = os.fsencode(text)
    if len(raw) > MAX_PATH_BYTES:
        raise OptionsError(f"{name} is {len(raw)} bytes long, more than a path may be "
                           f"({MAX_PATH_BYTES})")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_NAME_BYTES:
        raise OptionsError(f"{name} has a component of {len(longest)} bytes, more than a file "
                           f"name may be ({MAX_NAME_BYTES}): {_shown(text)}")


def _shown(value: object) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:45] + "..." + text[-10:]
    return f"{type(value).__name__} {text}".replace("\n", " ")


# -- resolving annotations ---------------------------------------------------------------------


class _Namespace(dict):  # type: ignore[type-arg]
    """The names an annotation may use: its module's (those its lazy face loads too), the
    typing ones, else :class:`_Unknown`."""

    def __init__(self, module: types.ModuleType | None) -> None:
        super().__init__(vars(builtins))
        self.update(vars(module) if module is not None else {})
        self.update({"Path": Path, "os": os, "Any": Any})
        self._module = module

    def __missing__(self, key: str) -> Any:
        return getattr(self._module, key, _Unknown)


def _hints(obj: Any) -> dict[str, Any]:
    """``obj``'s annotations evaluated (strings under ``from __future__ import annotations``)."""
    target = vars(obj).get("__init__", obj) if isinstance(obj, type) else obj
    raw: dict[str, Any] = {}
    for klass in reversed(obj.__mro__) if _is_dataclass(obj) else [target]:
        raw.update(getattr(klass, "__annotations__", {}))
    names = _Namespace(sys.modules.get(getattr(obj, "__module__", ""), None))
    resolved = {}
    for key, text in raw.items():
        if key == "return":
            continue
        try:
            resolved[key] = eval(text, {}, names) if isinstance(text, str) else text
        except Exception:  # an annotation this cannot read: no check rather than a false one
            resolved[key] = _Unknown
    return resolved


def _is_dataclass(obj: Any) -> bool:
    return isinstance(obj, type) and hasattr(obj, "__dataclass_fields__")


# -- conforming ----------------------------------------------------------------------------------

_COLLECTIONS = (abc.Sequence, abc.Collection, abc.Iterable, abc.Set, abc.MutableSequence)


def _mismatch(value: object, hint: Any) -> str | None:
    """None when ``value`` conforms to ``hint``, else why not ("" when the type says it)."""
    if hint is _Unknown or hint is Any or isinstance(hint, TypeVar):
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if any(_mismatch(value, arg) is None for arg in args):
            return None
        return ""
    if hint is None or hint is type(None):
        return None if value is None else ""
    if origin is typing.Literal:
        return None if value in args else ""
    if _is_path_hint(hint):
        return None if _is_path(value) else ""
    if origin is not None:
        return _generic_mismatch(value, origin, args)
    return _plain_mismatch(value, hint)


def _plain_mismatch(value: object, hint: Any) -> str | None:
    if hint is bool:
        return None if isinstance(value, bool) else ""
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else ""
    if hint is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
    if hint in (abc.Callable, Callable):
        return None if callable(value) else ""
    if isinstance(hint, type) and getattr(hint, "_is_protocol", False):
        missing = [m for m in _protocol_members(hint) if not hasattr(value, m)]
        return None if not missing else f"no {missing[0]}"
    if isinstance(hint, type):
        if hint in _COLLECTIONS or hint in (tuple, list, dict, abc.Mapping):
            return _generic_mismatch(value, hint, ())
        return None if isinstance(value, hint) else ""
    return None  # something this does not model (a NewType, a string literal type): accepted


def _generic_mismatch(value: object, origin: Any, args: tuple[Any, ...]) -> str | None:
    if origin in (abc.Callable, Callable):
        return None if callable(value) else ""
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        if not isinstance(value, Mapping):
            return ""
        if len(args) == 2:
            for key, item in value.items():
                if _mismatch(key, args[0]) is not None or _mismatch(item, args[1]) is not None:
                    return f"entry {key!r}"
        return None
    if origin is type:
        return None if isinstance(value, type) else ""
    if origin in (tuple, list, set, frozenset) or origin in _COLLECTIONS:
        return _collection_mismatch(value, origin, args)
    return None if not isinstance(origin, type) or isinstance(value, origin) else ""


def _collection_mismatch(value: object, origin: Any, args: tuple[Any, ...]) -> str | None:
    if isinstance(value, (str, bytes)) or not isinstance(value, abc.Iterable):
        return ""
    if origin in (tuple, list, set, frozenset) and not isinstance(value, origin):
        return ""
    if origin in (abc.Sequence, abc.MutableSequence) and not isinstance(value, abc.Sequence):
        return ""
    if not isinstance(value, abc.Collection):  # an iterator: its items cannot be looked at
        return None
    items = list(value)
    if origin is tuple and args and args[-1] is not Ellipsis:
        if len(items) != len(args):
            return f"{len(items)} items, not {len(args)}"
        pairs = list(zip(items, args, strict=True))
    else:
        pairs = [(item, args[0]) for item in items] if args else []
    for index, (item, hint) in enumerate(pairs):
        inner = _mismatch(item, hint)
        if inner is not None:
            return f"item {index}: {_shown(item)}" + (f", {inner}" if inner else "")
    return None


@functools.cache
def _protocol_members(protocol: type) -> tuple[str, ...]:
    names = set()
    for klass in protocol.__mro__:
        if klass in (object, typing.Generic) or not getattr(klass, "_is_protocol", False):
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= set(getattr(klass, "__annotations__", {}))
    return tuple(sorted(names))


def _is_path_hint(hint: Any) -> bool:
    """``Path``, ``os.PathLike[str]``, or a union of ``str`` with one of them."""
    if hint in (Path, PurePath) or typing.get_origin(hint) is os.PathLike or hint is os.PathLike:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return any(_is_path_hint(a) for a in args) and all(
            a is str or _is_path_hint(a) for a in args)
    return False


def _is_path(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        return False
    return isinstance(os.fspath(value), str)


def _describe(hint: Any) -> str:
    """A type in words: ``a path (str or os.PathLike)``, ``a sequence of str``."""
    if _is_path_hint(hint):
        optional = type(None) in typing.get_args(hint)
        return "a path (str or os.PathLike)" + (" or None" if optional else "")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if hint is None or hint is type(None):
        return "None"
    if origin in (abc.Callable, Callable) or hint in (abc.Callable, Callable):
        return "callable"
    if origin is not None and (origin in _COLLECTIONS or origin in (tuple, list, set)):
        word = {tuple: "a tuple", list: "a list", set: "a set"}.get(origin, "a sequence")
        inner = [a for a in args if a is not Ellipsis]
        return f"{word} of {_describe(inner[0])}" if len(inner) == 1 else word
    if origin in (dict, abc.Mapping):
        return "a mapping"
    if isinstance(hint, type):
        return {str: "a str", int: "an int", bool: "True or False", float: "a number"}.get(
            hint, f"a {hint.__name__}")
    return str(hint)
