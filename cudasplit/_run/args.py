"""Type and value checks of the public entry points' arguments, made at the call (the jobs
count's own check is :func:`cudasplit._run.jobs.check_jobs`).

A wrong type is an :class:`~cudasplit.errors.OptionsTypeError` (a ``TypeError`` and a
:class:`~cudasplit.errors.CudasplitError`) naming the parameter; a wrong value an
:class:`~cudasplit.errors.OptionsError` naming it. Without these, ``split_to_dir(src, "")``
wrote into the current directory and ``split(src, 3)`` failed deep inside with an
``AttributeError``.
"""

from __future__ import annotations

import os

from cudasplit.errors import OptionsError, OptionsTypeError

__all__ = ["check_optional", "check_path", "check_sink", "check_source", "type_name"]

# What a sink must answer to (the :class:`~cudasplit.sinks.Sink` protocol's methods).
_SINK_METHODS = ("start", "ensure_output", "write_file", "make_symlink", "make_hardlink",
                 "staged_path", "outputs", "finish", "abort")


def type_name(value: object) -> str:
    return type(value).__name__


def check_path(value: object, name: str) -> None:
    """A path argument: ``str`` or ``os.PathLike``, not empty (``""`` is no directory: it
    used to mean the current one)."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise OptionsTypeError(f"{name} must be a path (str or os.PathLike), "
                               f"not {type_name(value)}")
    text = os.fspath(value)
    if isinstance(text, bytes):
        raise OptionsTypeError(f"{name} must be a str path, not bytes")
    if not text:
        raise OptionsError(f"{name} must not be empty ('' is not a file or directory)")
    if "\0" in text:
        raise OptionsError(f"{name} must not contain a NUL character: {text!r}")


def check_source(value: object, name: str = "source") -> None:
    """A path (tarball, directory, ``-``) or a :class:`~cudasplit._source.Source`."""
    if isinstance(value, (str, os.PathLike)):
        check_path(value, name)
        return
    if not (callable(getattr(value, "members", None)) and hasattr(value, "description")):
        raise OptionsTypeError(f"{name} must be a path (str or os.PathLike) or a Source, "
                               f"not {type_name(value)}")


def check_sink(value: object, name: str = "sink") -> None:
    """A :class:`~cudasplit.sinks.Sink` (``None`` is refused: :func:`cudasplit.inspect` plans
    without writing)."""
    if value is None:
        raise OptionsTypeError(f"{name} must be a Sink, not None (inspect() plans without "
                               "writing)")
    missing = [m for m in _SINK_METHODS if not callable(getattr(value, m, None))]
    if missing:
        raise OptionsTypeError(f"{name} must be a Sink, not {type_name(value)} "
                               f"(no {missing[0]}())")


def check_optional(value: object, kind: type, name: str = "options") -> None:
    """``None`` or an instance of ``kind`` (a :class:`SplitOptions`, ...)."""
    if value is not None and not isinstance(value, kind):
        raise OptionsTypeError(f"{name} must be a {kind.__name__} or None, "
                               f"not {type_name(value)}")
