"""The ``cudasplit`` command: a thin click layer over the public API.

It imports nothing from cudasplit but public names (``cudasplit.__all__`` and
``cudasplit.errors``; ``tests/cli/test_public_api.py`` checks): all decisions live in the library.
This package parses options, renders reports and turns :class:`CudasplitError` into
one-line messages and stable exit codes (see README). One module per command family.
"""

from __future__ import annotations

from ._main import Terminated, main, run
from ._terminal import ProgressLine

__all__ = ["ProgressLine", "Terminated", "main", "run"]
