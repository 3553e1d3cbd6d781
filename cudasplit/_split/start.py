"""Opening a split's source, and starting to decode it before the rest of the split is loaded.

The entry points (``cudasplit.split_to_dir`` and friends) open the source first and start its
decoder (threads, or the ``xz``/``zstd`` child), then import the pipeline, the rules, the ELF
planner and the sinks while the archive decodes: on a short run that import is most of the
difference to ``tar``, and liblzma, zstd and the child process work without the interpreter
lock (benchmarks/README.md §12).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from cudasplit._source import Limits, Source, open_source
from cudasplit._split.options import SplitOptions, check_package_known

__all__ = ["open_for", "started"]

PathLike = str | os.PathLike[str]


def open_for(source: PathLike | Source, options: SplitOptions) -> Source:
    """A path opened the way ``options`` asks (identity override, jobs, bomb limits); a
    :class:`Source` as it is."""
    check_package_known(options)
    if not isinstance(source, (str, os.PathLike)):
        return source
    return open_source(source, package=options.package, jobs=options.effective_jobs(),
                       limits=Limits(options.max_total_bytes, options.max_ratio,
                                     options.max_members),
                       strip_components=options.strip_components,
                       memory_limit=options.memory_limit)


@contextlib.contextmanager
def started(source: PathLike | Source, options: SplitOptions) -> Iterator[Source]:
    """:func:`open_for`, with the decoder of a source opened here already running; stopped
    on the way out if the split did not take it over (an error before the first member).
    A :class:`Source` the caller made is left as it is: it is the caller's."""
    opened = open_for(source, options)
    ours = opened is not source
    start = getattr(opened, "start", None)
    if ours and callable(start):
        start()
    try:
        yield opened
    finally:
        close = getattr(opened, "close", None)
        if ours and callable(close):
            close()
