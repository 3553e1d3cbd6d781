"""Files and bytes of finished outputs, counted as :func:`closure_of` counts them."""

from __future__ import annotations

import os

from cudasplit._argcheck import checked
from cudasplit._release.closurescan import _walk as walk_outputs
from cudasplit._report import Report

__all__ = ["measure_outputs"]


@checked
def measure_outputs(report: Report) -> dict[str, tuple[int, int]]:
    """``(files, bytes)`` of each output directory of a finished split, counted as
    :func:`closure_of` counts: every non-directory (symlinks and ``nix-support`` files
    too), a symlink by the length of its target, a file by its size on disk after patching.

    Args:
        report: the report of a split that wrote its outputs (not a dry run).

    Returns:
        Output name -> (files, bytes); outputs whose directory is missing (a dry run, a
        directory removed since) are left out.

    Raises:
        Nothing: an entry that cannot be read counts as zero bytes.
    """
    sizes: dict[str, tuple[int, int]] = {}
    for name, record in report.outputs.items():
        if not os.path.isdir(record.directory):
            continue
        files = total = 0
        for _rel, full in walk_outputs(record.directory):
            files += 1
            try:
                total += len(os.readlink(full)) if os.path.islink(full) else \
                    os.path.getsize(full)
            except OSError:
                continue
        sizes[name] = (files, total)
    return sizes
