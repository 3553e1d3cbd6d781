"""The public entry points, thin wrappers that pick a sink and run the pipeline."""

from __future__ import annotations

import contextlib
import difflib
import os
import posixpath
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from ._codecs import detect_codec
from ._layout import LayoutSpec
from ._model import OUTPUT_NAMES, Kind, PackageId
from ._nixenv import nix_outputs
from ._pipeline import Progress, SplitOptions, SplitRun, member_kind, open_for
from ._pipeline import split as _split
from ._report import MemberRecord, Report
from ._resolve import with_nix_defaults
from ._rules import Rename, RuleSet, load_ruleset
from ._sources import Source, package_from_filename, parse_top_dir
from .errors import CudasplitError, SourceError
from .sinks import DirectorySink, Sink

PathLike = str | os.PathLike[str]


def split(source: PathLike | Source, sink: Sink | None, options: SplitOptions | None = None
          ) -> Report:
    """Split into any sink (``None``: plan only)."""
    return _split(source, sink, options=options)


def split_to_dir(source: PathLike | Source, output_dir: PathLike,
                 options: SplitOptions | None = None) -> Report:
    """``DIR/<output>/...``; staged, so a failed or killed run leaves no finished-looking output."""
    opts = options or SplitOptions()
    if opts.dry_run:
        return _split(source, None, options=opts, layout=LayoutSpec.under(output_dir))
    sink = DirectorySink.for_output_dir(Path(output_dir), list(OUTPUT_NAMES),
                                        overwrite=opts.overwrite, durable=opts.fsync)
    return _split(source, sink, options=opts)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One source of :func:`split_many`: its report, or the error that stopped it."""

    source: str
    output_dir: str
    report: Report | None
    error: CudasplitError | None


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


def directory_kind(path: PathLike) -> str:
    """``"tree"`` (an unpacked redistributable) or ``"batch"`` (a downloads directory), by
    content: a ``*-archive`` directory itself, or a directory holding exactly one, is a tree;
    otherwise a directory holding tarballs (by magic bytes) is a batch, whatever else it holds.
    """
    directory = Path(path)
    if parse_top_dir(directory.name) is not None:
        return "tree"
    entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
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


def split_many(sources: Sequence[PathLike], output_dir: PathLike,
               options: SplitOptions | None = None) -> list[BatchResult]:
    """Split several sources concurrently (within ``options.jobs``) into
    ``DIR/<pname>-<platform>-<version>/<output>/``. One failing source does not stop the others.
    """
    opts = options or SplitOptions()
    paths = batch_sources(sources)
    names = [batch_output_dir(p) for p in paths]
    if len(set(names)) != len(names):
        raise SourceError("two sources would share one output directory: "
                          + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    workers = max(1, min(opts.effective_jobs(), len(paths)))
    cancel = threading.Event()
    # Each source gets its share of the jobs; decompression and writes release the GIL.
    inner = replace(opts, jobs=max(1, opts.effective_jobs() // workers),
                    progress=_cancellable(opts.progress, cancel))
    def one(item: tuple[Path, str]) -> BatchResult:
        path, name = item
        target = Path(output_dir) / name
        try:
            return BatchResult(str(path), str(target), split_to_dir(path, target, inner), None)
        except CudasplitError as exc:
            return BatchResult(str(path), str(target), getattr(exc, "report", None), exc)
    root_existed = Path(output_dir).exists()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            try:
                return list(pool.map(one, zip(paths, names, strict=True)))
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


def split_nix(source: PathLike | Source, env: dict[str, str] | None = None,
              options: SplitOptions | None = None) -> Report:
    """Inside a Nix builder: the derivation's outputs (``$outputs`` or structured attrs)."""
    roots = nix_outputs(env)
    opts = replace(options or SplitOptions(), outputs=tuple(roots))
    opts = replace(opts, runpath=with_nix_defaults(opts.runpath, env))  # loader, libs, failure
    if opts.dry_run:
        return _split(source, None, options=opts, layout=LayoutSpec.fixed(roots))
    return _split(source, DirectorySink(roots), options=opts)


def inspect(source: PathLike | Source, options: SplitOptions | None = None,
            layout: LayoutSpec | None = None) -> Report:
    """Classify every member; write nothing. Roots are ``/${output}`` unless ``layout`` says."""
    return _split(source, None, options=replace(options or SplitOptions(), dry_run=True),
                  layout=layout)


@dataclass(frozen=True, slots=True)
class RuleTrial:
    rule: str
    matched: bool
    globs: tuple[str, ...]
    kinds: tuple[str, ...] | None
    output: str | None


@dataclass(frozen=True, slots=True)
class Explanation:
    path: str
    kind: str
    dest: str
    rename: str | None
    tried: tuple[RuleTrial, ...]
    output: str | None
    note: str | None
    elf: dict[str, object] | None = None  # the planned ELF edit (same planner as a split)


def explain(source: PathLike | Source, path: str, options: SplitOptions | None = None
            ) -> Explanation:
    """Which rule placed ``path`` (archive path, top dir stripped) and which it passed over."""
    opts = replace(options or SplitOptions(), dry_run=True)
    source = open_for(source, opts)
    wanted = _wanted(path)
    # One pass over the member records; only the ELF file asked about is read and planned.
    run = SplitRun(source, None, opts, plan_elf=lambda record: _names(record, wanted))
    report = run.run()
    record = _find_member(report, path, source.description)
    assert run.ruleset is not None
    explanation = _explain_record(run.ruleset, record.path, Kind(record.kind), record.output,
                                  record.note)
    return replace(explanation, elf=_elf_plan(record))


def _elf_plan(record: MemberRecord) -> dict[str, object] | None:
    if not record.kind.startswith("elf-"):
        return None
    keys = ("patch", "runpath_before", "runpath_after", "runpath_tag", "interpreter_before",
            "interpreter_after", "needed_unresolved", "dlopen")
    return {key: getattr(record, key) for key in keys}


def _wanted(path: str) -> str:
    return posixpath.normpath("/" + path.strip()).lstrip("/")


def _candidates(wanted: str) -> list[str]:
    candidates = [wanted]
    if "/" in wanted:
        candidates.append(wanted.split("/", 1)[1])  # tar tf shows the top directory
    return candidates


def _names(record: MemberRecord, wanted: str) -> bool:
    """Whether ``record`` may be the member ``wanted`` names (see :func:`_find_member`)."""
    return (record.path in _candidates(wanted)
            or (record.dest is not None
                and wanted in (record.dest, f"{record.output}/{record.dest}")))


def _find_member(report: Report, path: str, description: str) -> MemberRecord:
    """The member ``path`` names: an archive path (top dir stripped or not, ``./`` prefixed,
    as ``tar tf`` prints it) or an output path (``lib/libfoo.so``, ``lib/lib/libfoo.so``)."""
    wanted = _wanted(path)
    by_path = {m.path: m for m in report.members}
    for candidate in _candidates(wanted):
        if candidate in by_path:
            return by_path[candidate]
    for record in report.members:
        if record.dest is not None and wanted in (record.dest, f"{record.output}/{record.dest}"):
            return record
    near = difflib.get_close_matches(wanted, list(by_path), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
    raise SourceError(f"no member {wanted!r} in the archive{hint}", source=description)


def _explain_record(ruleset: RuleSet, path: str, kind: Kind, output: str | None,
                    note: str | None) -> Explanation:
    dest, rename = ruleset.normalise(path)
    trials = tuple(
        RuleTrial(str(rule.ref), hit, tuple(g.pattern for g in rule.globs),
                  None if rule.kinds is None else tuple(sorted(rule.kinds)), rule.output)
        for rule, hit in ruleset.explain(dest, kind)
    )
    return Explanation(path, kind.value, dest, _rename_text(rename), trials, output, note)


def _rename_text(rename: Rename | None) -> str | None:
    return None if rename is None else f"{rename.ref}: {rename.source} -> {rename.target}"


__all__ = [
    "BatchResult",
    "Explanation",
    "RuleTrial",
    "batch_sources",
    "directory_kind",
    "explain",
    "inspect",
    "load_ruleset",
    "member_kind",
    "split",
    "split_many",
    "split_nix",
    "split_to_dir",
]
