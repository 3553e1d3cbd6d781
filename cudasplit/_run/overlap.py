"""Outputs apart from inputs: what a command writes, replaces or removes may not be, be
inside, or contain what it reads.

``toolkit SPLIT -o SPLIT --overwrite`` used to delete its own input and exit 0; a directory
source with ``-o`` inside it walked its own staging directory (copying itself again and
again). Each entry point names the paths it will write (the output roots, its staging area)
and the paths it reads, and :func:`refuse_overlap` compares them, with symlinks resolved,
before anything is created.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from cudasplit.errors import OutputError

__all__ = ["refuse_overlap"]

PathLike = str | os.PathLike[str]


def refuse_overlap(writes: Iterable[PathLike], reads: Iterable[object], *,
                   exact: bool = False) -> None:
    """:class:`OutputError` when a path of ``writes`` is, is inside, or contains a path of
    ``reads`` (``"-"`` and non-path sources such as a :class:`Source` are skipped). A path to
    be created under a name not known yet (a staging directory) is given with a ``*``.
    ``exact``: only the same path counts (an output directory that only gets new files)."""
    inputs = [(value, _real(value)) for value in reads
              if isinstance(value, (str, os.PathLike)) and os.fspath(value) != "-"]
    for output in writes:
        out = _real(output)
        for value, real in inputs:
            relation = "is" if out == real else None if exact else _relation(out, real)
            if relation is not None:
                raise OutputError(
                    f"{os.fspath(output)}: this output {relation} the input "
                    f"{os.fspath(value)}; an output may not be, be inside or contain an "
                    "input (nothing was written)")


def _real(path: PathLike | object) -> Path:
    """The path with every symlink of its existing part resolved (the rest as given)."""
    return Path(os.path.realpath(os.fspath(path)))  # type: ignore[arg-type]


def _relation(output: Path, source: Path) -> str | None:
    if output == source:
        return "is"
    if output.is_relative_to(source):
        return "is inside"
    if source.is_relative_to(output):
        return "contains"
    return None
