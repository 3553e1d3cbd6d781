"""``repack_to_dir``: the split, written as one reproducible tarball per output."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .model import OUTPUT_NAMES, PackageId
from .pipeline import SplitOptions, open_for
from .pipeline import split as _split
from .report import Report
from .sinks.tarball import DEFAULT_FORMAT, DEFAULT_LEVEL, TarballSink, archive_stem
from .sources import Source

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
    opts = options or SplitOptions()
    pack = repack or RepackOptions()
    # Opened here (not in split) because the sink names its archives after the identity.
    source = open_for(source, opts)
    opened = source

    def identity() -> PackageId:
        # Asked only after the first member: a tar source knows its top directory by then.
        return opts.package or opened.package

    if opts.dry_run:  # the same roots the archives will name, so the plans are the same
        return RepackResult(_split(source, None, options=opts,
                                   plan_roots=_PlannedRoots(pack.prefix, identity)))

    sink = TarballSink(Path(output_dir), identity, prefix=pack.prefix, fmt=pack.fmt,
                       level=pack.level, threads=pack.threads, mtime=pack.mtime,
                       overwrite=opts.overwrite, staging_parent=pack.staging_parent)
    report = _split(source, sink, options=opts)
    return RepackResult(report, list(sink.written))


class _PlannedRoots(Mapping[str, str]):
    """``TarballSink.output_root`` without a sink: ``<prefix>/<output>``, the default prefix
    computed from the identity when first asked (after the first member)."""

    def __init__(self, prefix: str | None, identity: Callable[[], PackageId]) -> None:
        self._prefix, self._identity = prefix, identity

    def __getitem__(self, output: str) -> str:
        prefix = self._prefix if self._prefix is not None else "/" + archive_stem(self._identity())
        return f"{prefix.rstrip('/')}/{output}"

    def __iter__(self) -> Iterator[str]:
        return iter(OUTPUT_NAMES)

    def __len__(self) -> int:
        return len(OUTPUT_NAMES)


__all__ = ["RepackOptions", "RepackResult", "repack_to_dir"]
