"""``repack_to_dir``: the split, written as one reproducible tarball per output."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ._apiargs import check_optional, check_path, check_source
from ._layout import LayoutSpec
from ._pipeline import SplitOptions
from ._pipeline import split as _split
from ._report import Report
from ._sources import Source
from .sinks._tarball import DEFAULT_FORMAT, DEFAULT_LEVEL, TarballSink

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class RepackOptions:
    """How the archives are written (what goes into them is :class:`SplitOptions`' business)."""

    prefix: str | None = None      # outputs unpack to <prefix>/<output>; default /<stem>
    fmt: str = DEFAULT_FORMAT      # zst | xz | gz
    level: int = DEFAULT_LEVEL
    threads: int = 0               # zstd workers; 0: single-threaded
    mtime: int | None = None       # None: SOURCE_DATE_EPOCH or the fixed default
    staging_parent: Path | None = None  # where members are staged; default: the output dir


@dataclass(slots=True)
class RepackResult:
    """What :func:`repack_to_dir` did: the split report and the archives written."""

    report: Report
    archives: list[Path] = field(default_factory=list)


def repack_to_dir(source: PathLike | Source, output_dir: PathLike,
                  options: SplitOptions | None = None,
                  repack: RepackOptions | None = None) -> RepackResult:
    """Split ``source`` with the same rules and patching as ``split`` and write
    ``<output_dir>/<pname>-<platform>-<version>-<output>.tar.zst`` per output.

    Archives appear only once all of them are complete (temp files + rename). With
    ``options.dry_run`` nothing is written and ``archives`` is empty.
    """
    check_source(source)
    check_path(output_dir, "output_dir")
    check_optional(options, SplitOptions)
    check_optional(repack, RepackOptions, "repack")
    opts = options or SplitOptions()
    pack = repack or RepackOptions()
    if opts.dry_run:  # the same layout the archives will name, so the plans are the same
        return RepackResult(_split(source, None, options=opts,
                                   layout=LayoutSpec.unpacked_at(pack.prefix)))
    sink = TarballSink(Path(output_dir), prefix=pack.prefix, fmt=pack.fmt,
                       level=pack.level, threads=pack.threads, mtime=pack.mtime,
                       overwrite=opts.overwrite, staging_parent=pack.staging_parent)
    report = _split(source, sink, options=opts)
    return RepackResult(report, list(sink.written))


__all__ = ["RepackOptions", "RepackResult", "repack_to_dir"]
