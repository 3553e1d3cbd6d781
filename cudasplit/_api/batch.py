"""Many sources at once: which paths form a batch, and :func:`split_many` with its report.

A batch writes each source to ``DIR/<pname>-<platform>-<version>/<output>/`` and keeps going
past a failing source; :func:`batch_report` is the JSON that ``split --report`` writes for it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cudasplit._api.entry import split_to_dir, split_writes
from cudasplit._argcheck import checked
from cudasplit._model import PackageId
from cudasplit._report import Report, relative_report
from cudasplit._run import Cores, Progress, refuse_overlap
from cudasplit._source import (
    TarSource,
    decode_threads,
    detect_codec,
    package_from_filename,
    parse_top_dir,
)
from cudasplit._split.options import SplitOptions
from cudasplit._split.start import open_for
from cudasplit.errors import CudasplitError, SourceError, source_os_error

PathLike = str | os.PathLike[str]
BATCH_SCHEMA = 1  # the version of batch_report's JSON, as Report's own "schema"


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One source of :func:`split_many`: its report, or the error that stopped it.

    Attributes:
        source: the source path.
        output_dir: the directory its outputs went to.
        report: its :class:`Report`; ``None`` when it failed.
        error: the :class:`CudasplitError` that stopped it; ``None`` when it succeeded.

    Raises:
        Nothing: a value.
    """

    source: str
    output_dir: str
    report: Report | None
    error: CudasplitError | None

    def as_dict(self, *, relative: bool = False) -> dict[str, Any]:
        """This run as JSON data; ``relative``: the report without absolute store paths
        (see :func:`relative_report`)."""
        report = None
        if self.report is not None:
            report = relative_report(self.report) if relative else self.report.as_dict()
        return {"source": self.source, "output_dir": self.output_dir,
                "error": None if self.error is None else str(self.error), "report": report}


@checked
def batch_report(results: Sequence[BatchResult], *, relative: bool = False) -> dict[str, Any]:
    """The JSON data of a whole batch (``split --report`` with several sources).

    Args:
        results: what :func:`split_many` returned.
        relative: each report without absolute store paths (see :func:`relative_report`).

    Returns:
        ``{"schema": 1, "runs": [...]}``: every run in order, with its report or its error
        (``cudasplit/schemas/batch.json`` describes it).

    Raises:
        Nothing: the results are data already.
    """
    return {"schema": BATCH_SCHEMA, "runs": [r.as_dict(relative=relative) for r in results]}


def batch_sources(paths: Sequence[PathLike]) -> list[Path]:
    """Expand directories that hold tarballs (not an unpacked redistributable) into their files."""
    result: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and directory_kind(path) == "batch":
            result.extend(_archives_in(path))
        else:
            result.append(path)
    return result


@checked
def directory_kind(path: PathLike) -> str:
    """Whether a directory is an unpacked redistributable or a directory of tarballs, by
    content: a ``*-archive`` directory itself, or a directory holding exactly one, is a tree;
    otherwise a directory holding tarballs (by magic bytes) is a batch, whatever else it
    holds.

    Args:
        path: the directory.

    Returns:
        ``"tree"`` or ``"batch"``.

    Raises:
        SourceNotFoundError: it does not exist (also a ``FileNotFoundError``).
        SourceNotADirectoryError: it is not a directory (also a ``NotADirectoryError``).
        SourceError: it cannot be listed.
    """
    directory = Path(path)
    try:
        entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
    except OSError as exc:
        raise source_os_error(exc, str(directory)) from exc
    if parse_top_dir(directory.name) is not None:
        return "tree"
    tops = [p for p in entries if p.is_dir() and parse_top_dir(p.name) is not None]
    if len(tops) == 1 and len(entries) == 1:
        return "tree"
    return "batch" if any(p.is_file() and _is_archive(p) for p in entries) else "tree"


def _archives_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir()
                  if p.is_file() and not p.name.startswith(".") and _is_archive(p))


def _is_archive(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            detect_codec(fh.read(512))
    except (OSError, CudasplitError):
        return False
    return True


def batch_output_dir(source: Path) -> str:
    """``<pname>-<platform>-<version>-archive.tar.xz`` -> ``<pname>-<platform>-<version>``."""
    package = package_from_filename(source) if source.is_file() else (
        parse_top_dir(source.name) or PackageId(source.name))
    parts = [package.name, package.platform, package.version]
    name = "-".join(p for p in parts if p)
    return name + (f"_cuda{package.cuda_variant}" if package.cuda_variant else "")


@checked
def split_many(sources: Sequence[PathLike], output_dir: PathLike,
               options: SplitOptions | None = None) -> list[BatchResult]:
    """Split several sources concurrently (within ``options.jobs``) into
    ``output_dir/<pname>-<platform>-<version>/<output>/``. One failing source does not stop
    the others: its error is in its result.

    The jobs are a budget of cores: largest source first, each takes the cores it can keep
    busy (a multi-block xz tarball one per block, up to all of them; a single-block or zstd
    one two) and starts when they are free, so a release's big library decodes on every core
    while its small packages run side by side. Sources start in that order, always (size,
    then the order given): never a small one before the biggest.

    Args:
        sources: tarball paths, or directories holding tarballs (expanded to their files).
        output_dir: the directory that receives one directory per source.
        options: what each split does (:class:`SplitOptions`).

    Returns:
        One :class:`BatchResult` per source, in order: its report or its error.

    Raises:
        SourceError: two sources would share one output directory.
    """
    opts = options or SplitOptions()
    paths = batch_sources(sources)
    names = [batch_output_dir(p) for p in paths]
    if len(set(names)) != len(names):
        raise SourceError("two sources would share one output directory: "
                          + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    if not opts.dry_run:
        refuse_overlap([w for name in names for w in split_writes(Path(output_dir) / name)],
                       [*sources, *paths])
    jobs = opts.effective_jobs()
    cores = Cores(jobs)
    cancel = threading.Event()
    progress = _cancellable(opts.progress, cancel)
    # Largest first: a big tarball started last would finish alone on the few cores it got.
    order = sorted(range(len(paths)), key=lambda i: (-_file_size(paths[i]), i))
    turn_of = {index: turn for turn, index in enumerate(order)}

    def one(index: int) -> BatchResult:
        path, target = paths[index], Path(output_dir) / names[index]
        want = _cores_for(path, jobs)
        # The memory cap is the whole batch's: each source gets the share of its cores.
        share = (None if opts.memory_limit is None
                 else max(1 << 20, opts.memory_limit * want // jobs))
        # Its turn, not whichever worker thread asks first: the start order is fixed. The
        # cores go to the next source once this one's decoder has delivered its last byte:
        # the rest of its split (patches, links, report, moving the outputs into place) is
        # a tail that overlaps the next decoding.
        with cores.take(want, turn_of[index]) as release:
            inner = replace(opts, jobs=want, memory_limit=share, progress=progress)
            try:
                source = open_for(path, inner)
                if isinstance(source, TarSource):
                    source.on_decoded = release
                try:
                    report = split_to_dir(source, target, inner)
                finally:
                    close = getattr(source, "close", None)
                    if callable(close):
                        close()
                return BatchResult(str(path), str(target), report, None)
            except CudasplitError as exc:
                return BatchResult(str(path), str(target), getattr(exc, "report", None), exc)
    root_existed = Path(output_dir).exists()
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(paths)))) as pool:
            try:
                done = dict(zip(order, pool.map(one, order), strict=True))
                return [done[index] for index in range(len(paths))]
            except BaseException:
                # Ctrl-C or SIGTERM reached the main thread: the workers stop at their next
                # member (their staging is removed) instead of finishing during the shutdown.
                cancel.set()
                raise
    finally:
        if not root_existed:
            # Workers race to create DIR; whichever aborts last may not know it made DIR.
            with contextlib.suppress(OSError):
                Path(output_dir).rmdir()  # only if empty


def _cores_for(path: Path, jobs: int) -> int:
    """Cores a source can keep busy: its decoder threads and the thread that writes."""
    if path.is_dir():
        return min(jobs, 2)
    return min(jobs, decode_threads(path) + 1)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


class _Cancelled(BaseException):
    """Stops a batch worker; not an Exception, so only the pipeline's cleanup sees it."""


def _cancellable(progress: Callable[[Progress], None] | None,
                 cancel: threading.Event) -> Callable[[Progress], None]:
    def call(update: Progress) -> None:
        # Not on the last call: that one comes after the pipeline's cleanup handler.
        if cancel.is_set() and not update.done:
            raise _Cancelled()
        if progress is not None:
            progress(update)
    return call


__all__ = [
    "BatchResult",
    "batch_output_dir",
    "batch_report",
    "batch_sources",
    "directory_kind",
    "split_many",
]
