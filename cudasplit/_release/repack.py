"""``repack_to_dir``: the split, written as one reproducible tarball per output, or (a
profile's ``fmt="conda"``) as one conda package per output into a channel."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit._argcheck import check_fields, checked
from cudasplit._layout import LayoutSpec
from cudasplit._report import Report
from cudasplit._rulebook import DEFAULT_PROFILE, default_rules_dir
from cudasplit._run import refuse_overlap, resolve_jobs
from cudasplit._sinks import (
    DEFAULT_FORMAT,
    DEFAULT_LEVEL,
    TarballSink,
    mtime_from_env,
)
from cudasplit._source import Source
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import OptionsError

PathLike = str | os.PathLike[str]


@checked
@dataclass(frozen=True, slots=True)
class RepackOptions:
    """How the archives are written (what goes into them is :class:`SplitOptions`' business).

    Attributes:
        prefix: where the outputs unpack: ``<prefix>/<output>`` (default ``/<stem>``).
        fmt: ``zst``, ``xz`` or ``gz``; ``conda``: one ``.conda`` per output of a profile
            that describes conda packages (``SplitOptions(profile="conda-forge")``), into
            ``<output_dir>/<subdir>/``.
        level: the compression level: zst and conda 1-22, xz 0-9, gz 1-9; ``None``: 10 for
            zst and conda, 9 for xz and gz.
        threads: zstd compressor threads; ``None``: the split's cores
            (``SplitOptions.jobs``); 0: single-threaded; -1: every CPU the process may use.
            The bytes are the same for any value >= 1 (so on any machine by default) and
            differ with 0.
        mtime: the members' mtime (``None``: ``SOURCE_DATE_EPOCH`` or a fixed default).
        staging_parent: where members are staged (default: the output directory).

    Raises:
        OptionsError: an unknown format, a level out of the format's range, threads below
            -1, a relative prefix, a negative mtime (each naming the field).
        OptionsTypeError: a field of the wrong type (also a ``TypeError``).
    """

    prefix: str | None = None      # outputs unpack to <prefix>/<output>; default /<stem>
    fmt: str = DEFAULT_FORMAT      # zst | xz | gz | conda
    level: int | None = None       # None: the format's default (LEVELS)
    threads: int | None = None     # zstd threads; None: the split's jobs; 0: single-threaded
    mtime: int | None = None       # None: SOURCE_DATE_EPOCH or the fixed default
    staging_parent: Path | None = None  # where members are staged; default: the output dir

    def __post_init__(self) -> None:
        check_fields(self)
        _check_repack(self)

    def effective_level(self) -> int:
        """The level the archives are written with."""
        return LEVELS[self.fmt][2] if self.level is None else self.level


# Per format: the lowest and highest level, and the default (zst's is the long-standing
# DEFAULT_LEVEL; xz and gz were always written at their highest, 9).
LEVELS = {"zst": (1, 22, DEFAULT_LEVEL), "xz": (0, 9, 9), "gz": (1, 9, 9),
          "conda": (1, 22, DEFAULT_LEVEL)}


def _check_repack(options: RepackOptions) -> None:
    """The values; the types are check_fields' (``__post_init__``)."""
    if options.fmt not in LEVELS:
        raise OptionsError(f"fmt must be one of {', '.join(LEVELS)}, not {options.fmt!r}")
    low, high, _default = LEVELS[options.fmt]
    for name, value, minimum, maximum in (("level", options.level, low, high),
                                          ("threads", options.threads, -1, None),
                                          ("mtime", options.mtime, 0, None)):
        if value is None:
            continue
        if value < minimum or (maximum is not None and value > maximum):
            span = f"{minimum}-{maximum}" if maximum is not None else f">= {minimum}"
            where = f" for {options.fmt}" if name == "level" else ""
            raise OptionsError(f"{name} must be {span}{where}, not {value}")
    prefix = options.prefix
    if prefix is not None and (not prefix.startswith("/") or "\0" in prefix):
        raise OptionsError(f"prefix must be an absolute path, not {prefix!r}")


@dataclass(slots=True)
class RepackResult:
    """What :func:`repack_to_dir` did: the split report and the archives written.

    Attributes:
        report: the split's :class:`Report`.
        archives: the archives written (empty in a dry run).

    Raises:
        Nothing: a value.
    """

    report: Report
    archives: list[Path] = field(default_factory=list)


@checked
def repack_to_dir(source: PathLike | Source, output_dir: PathLike,
                  options: SplitOptions | None = None,
                  repack: RepackOptions | None = None) -> RepackResult:
    """Split ``source`` with the same rules and patching as :func:`split` and write
    ``<output_dir>/<pname>-<platform>-<version>-<output>.tar.zst`` per output, or with
    ``fmt="conda"`` ``<output_dir>/<subdir>/<name>-<version>-<build>.conda`` per output
    (byte-for-byte reproducible; a client indexes and installs the channel).
    Archives appear only once all of them are complete (temp files + rename).

    Args:
        source: a tarball path, an unpacked directory, ``"-"``, or a :class:`Source`.
        output_dir: where the archives go.
        options: what the split does (:class:`SplitOptions`); with ``dry_run`` nothing is
            written and ``archives`` is empty.
        repack: the archives' format, level, prefix and threads (:class:`RepackOptions`).

    Returns:
        A :class:`RepackResult`: the archives written and the split's report.

    Raises:
        SourceError: the source cannot be read; its subclasses say why:
            CorruptArchiveError (damaged data), UnsafeMemberError (a path leaving the
            output roots), LimitExceededError (a decompression bomb guard tripped).
        RulesError: a rule file is invalid (the message names ``file:rule``).
        OptionsError: an option contradicts the source (e.g. an unknown package).
        OutputError: an output cannot be written (exists, permissions, disk full).
        ProblemsFound: ``options.strict`` and problems were found (``.report`` holds
            the report), or DT_NEEDED names resolve nowhere where that fails the run.
    """
    opts = options or SplitOptions()
    pack = repack or RepackOptions()
    if opts.dry_run:  # the same layout the archives will name, so the plans are the same
        return RepackResult(_split(source, None, options=opts,
                                   layout=LayoutSpec.unpacked_at(pack.prefix)))
    threads = (opts.effective_jobs() if pack.threads is None
               else resolve_jobs(None) if pack.threads < 0 else pack.threads)
    if pack.fmt == "conda":
        return _repack_conda(source, Path(output_dir), opts, pack, threads)
    # The stage goes into output_dir: a directory source must not hold it.
    refuse_overlap([Path(output_dir) / f"{TarballSink.stage_prefix}*"], [source])
    sink = TarballSink(Path(output_dir), prefix=pack.prefix, fmt=pack.fmt,
                       level=pack.effective_level(), threads=threads, mtime=pack.mtime,
                       overwrite=opts.overwrite, staging_parent=pack.staging_parent,
                       progress=opts.progress)
    report = _split(source, sink, options=opts)
    return RepackResult(report, list(sink.written))


def _repack_conda(source: PathLike | Source, channel: Path, opts: SplitOptions,
                  pack: RepackOptions, threads: int) -> RepackResult:
    if opts.profile == DEFAULT_PROFILE:
        raise OptionsError("the conda format (fmt conda) packs a profile's conda packages: "
                           "give one (profile conda-forge); the default profile's outputs are "
                           "Nix outputs")
    if pack.prefix is not None:
        raise OptionsError("an unpack prefix (prefix) does not apply to the conda format "
                           "(fmt conda): conda installs the packages into its own prefix")
    from cudasplit._release.conda import CondaChannelSink  # only repack --format conda

    refuse_overlap([channel], [source])
    sink = CondaChannelSink(channel, opts.rules_dir or default_rules_dir(), opts.profile,
                            platform=opts.platform, cuda_version=opts.cuda_version,
                            level=pack.effective_level(), threads=threads,
                            mtime=mtime_from_env() if pack.mtime is None else pack.mtime,
                            overwrite=opts.overwrite, staging_parent=pack.staging_parent,
                            source_name=_source_name(source))
    report = _split(source, sink, options=opts)
    return RepackResult(report, list(sink.written))


def _source_name(source: PathLike | Source) -> str:
    """How messages name the archive: its path, or a source object's description."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return source.description


__all__ = ["RepackOptions", "RepackResult", "repack_to_dir"]
