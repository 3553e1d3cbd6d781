"""The public entry points for one source: thin wrappers that pick a sink and run the pipeline.

Each opens its source and starts decoding it first (:func:`cudasplit._split.start.started`),
then loads the pipeline, the sinks and the Nix environment while the archive decodes: those
imports are below in the functions on purpose (``python -X importtime``: they are most of a
short split's start-up). Several sources at once are :mod:`cudasplit._api.batch`'s job.
"""

from __future__ import annotations

import difflib
import os
import posixpath
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudasplit._argcheck import checked
from cudasplit._layout import LayoutSpec
from cudasplit._lazy import lazy_face
from cudasplit._model import OUTPUT_NAMES, Kind
from cudasplit._report import MemberRecord, Report
from cudasplit._run import refuse_overlap
from cudasplit._split.options import SplitOptions
from cudasplit._split.start import started
from cudasplit.errors import SourceError

if TYPE_CHECKING:
    from cudasplit._rulebook import Rename, RuleSet
    from cudasplit._sinks import Sink
    from cudasplit._source import Source

# The Sink and Source protocols, which @checked holds the arguments to, load at the first call:
# the sinks load while the archive decodes (the source's face is loaded to decode it anyway).
__getattr__, _ = lazy_face(__name__, {"cudasplit._sinks": ("Sink",),
                                      "cudasplit._source": ("Source",)})

EXPLAIN_SCHEMA = 1  # the "schema" of Explanation.as_dict

PathLike = str | os.PathLike[str]


@checked
def split(source: PathLike | Source, sink: Sink, options: SplitOptions | None = None
          ) -> Report:
    """Split ``source`` into ``sink``: classify every member by the rules, place it, and
    rewrite ELF RUNPATHs (:func:`inspect` plans without writing).

    Args:
        source: a tarball path (``.tar.xz``, ``.tar.zst``, ...), an unpacked directory,
            ``"-"`` (standard input), or a :class:`Source` from :func:`open_source`.
        sink: where the outputs go (:class:`DirectorySink`, :class:`StagedSink`,
            :class:`TarballSink`, :class:`MemorySink`, or your own :class:`Sink`).
        options: what the split does (:class:`SplitOptions`; default: the defaults).

    Returns:
        The :class:`Report`: every member, output, problem and warning.

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
    with started(source, opts) as opened:
        from cudasplit._split.pipeline import split as _split

        return _split(opened, sink, options=opts)


@checked
def split_to_dir(source: PathLike | Source, output_dir: PathLike,
                 options: SplitOptions | None = None) -> Report:
    """Split ``source`` into ``output_dir/<output>/...``, staged, so a failed or killed
    run leaves no finished-looking output.

    Args:
        source: a tarball path, an unpacked directory, ``"-"``, or a :class:`Source`.
        output_dir: the directory that receives one subdirectory per output.
        options: what the split does (:class:`SplitOptions`); ``options.dry_run`` writes
            nothing, ``options.overwrite`` replaces existing outputs.

    Returns:
        The :class:`Report` of the split.

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
    with started(source, opts) as opened:
        from cudasplit._rulebook import DEFAULT_PROFILE
        from cudasplit._sinks import DirectorySink
        from cudasplit._split.pipeline import split as _split

        if opts.dry_run:
            return _split(opened, None, options=opts, layout=LayoutSpec.under(output_dir))
        # Checked while the archive decodes (reading only): nothing is written before it.
        refuse_overlap(split_writes(output_dir), [source])
        sink = DirectorySink.for_output_dir(Path(output_dir), list(OUTPUT_NAMES),
                                            overwrite=opts.overwrite, durable=opts.fsync,
                                            other_outputs=opts.profile != DEFAULT_PROFILE)
        return _split(opened, sink, options=opts)


def split_writes(output_dir: PathLike) -> list[Path]:
    """What a split into ``output_dir`` writes or replaces: every output root
    (``--overwrite`` replaces them all) and its staging directory."""
    from cudasplit._sinks import STAGING_PREFIX  # the sinks load while decoding

    root = Path(output_dir)
    return [*(root / name for name in OUTPUT_NAMES), root / f"{STAGING_PREFIX}*"]


@checked
def split_nix(source: PathLike | Source, env: dict[str, str] | None = None,
              options: SplitOptions | None = None) -> Report:
    """Split ``source`` inside a Nix builder into the derivation's outputs (``$outputs``
    and one variable per output, or structured attrs), with ``--nix`` defaults: the
    build's dynamic linker, its library directories, and unresolved names failing the run.

    Args:
        source: a tarball path, an unpacked directory, ``"-"``, or a :class:`Source`.
        env: the builder environment (default: ``os.environ``).
        options: what the split does (:class:`SplitOptions`).

    Returns:
        The :class:`Report` of the split.

    Raises:
        NixEnvironmentError: the environment names no outputs, or unknown ones.
        SourceError: the source cannot be read; its subclasses say why:
            CorruptArchiveError (damaged data), UnsafeMemberError (a path leaving the
            output roots), LimitExceededError (a decompression bomb guard tripped).
        RulesError: a rule file is invalid (the message names ``file:rule``).
        OptionsError: an option contradicts the source (e.g. an unknown package).
        OutputError: an output cannot be written (exists, permissions, disk full).
        ProblemsFound: ``options.strict`` and problems were found (``.report`` holds
            the report), or DT_NEEDED names resolve nowhere where that fails the run.
    """
    from cudasplit._nix import nix_outputs, with_nix_defaults

    roots = nix_outputs(env)
    opts = replace(options or SplitOptions(), outputs=tuple(roots), nix_build=True)
    opts = replace(opts, runpath=with_nix_defaults(opts.runpath, env))  # loader, libs, failure
    with started(source, opts) as opened:
        from cudasplit._sinks import DirectorySink
        from cudasplit._split.pipeline import split as _split

        if opts.dry_run:
            return _split(opened, None, options=opts, layout=LayoutSpec.fixed(roots))
        return _split(opened, DirectorySink(roots), options=opts)


@checked
def inspect(source: PathLike | Source, options: SplitOptions | None = None,
            layout: LayoutSpec | None = None) -> Report:
    """Classify every member of ``source``; write nothing.

    Args:
        source: a tarball path, an unpacked directory, ``"-"``, or a :class:`Source`.
        options: what a split would do (:class:`SplitOptions`; ``dry_run`` is forced).
        layout: where the outputs would live (default: ``/${output}`` roots).

    Returns:
        The :class:`Report` a dry run gives (``report.dry_run`` is true).

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
    opts = replace(options or SplitOptions(), dry_run=True)
    with started(source, opts) as opened:
        from cudasplit._split.pipeline import split as _split

        return _split(opened, None, options=opts, layout=layout)


@dataclass(frozen=True, slots=True)
class RuleTrial:
    """One rule :func:`explain` tried on a path, and whether it matched."""

    rule: str
    matched: bool
    globs: tuple[str, ...]
    kinds: tuple[str, ...] | None
    output: str | None
    fallback: str | None = None  # the rule's output where its own is not produced


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a member went where it did (:func:`explain`): its rename, every rule tried in
    precedence order, the output, and the planned ELF edit.

    Attributes:
        path: the member's archive path, top directory stripped.
        kind: its kind (as :class:`MemberRecord` says it).
        dest: its path after renames.
        rename: the rename that applied, if any.
        tried: every rule tried, in precedence order, and whether it matched.
        output: the output it goes to; ``None``: not placed.
        note: why, where a rule alone does not say it.
        elf: the planned ELF edit (RUNPATH, interpreter, dlopen names), for ELF files; with
            ``gpu`` and ``glibc`` (what the file carries, as in the report), for ELF files and
            static archives.
        outputs: the outputs this split produces (where a member may go; a matching rule
            whose output is not among them passes the member on to the next); ``None``: every
            output.
        outputs_from: who chose ``outputs``: ``"outputs"`` (the option), or the package
            table's rule file (``rules/packages/cuda_cudart.toml``); ``None`` with ``outputs``.

    Raises:
        Nothing: a value.
    """

    path: str
    kind: str
    dest: str
    rename: str | None
    tried: tuple[RuleTrial, ...]
    output: str | None
    note: str | None
    elf: dict[str, object] | None = None  # the planned ELF edit (same planner as a split)
    outputs: tuple[str, ...] | None = None
    outputs_from: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON data: ``{"schema": 1, "path": ..., "tried": [...], ...}`` (described by
        ``cudasplit/schemas/explain.json``)."""
        return {"schema": EXPLAIN_SCHEMA, **asdict(self)}


@checked
def explain(source: PathLike | Source, path: str, options: SplitOptions | None = None
            ) -> Explanation:
    """Which rule placed ``path`` and which rules it passed over, with the ELF edit a split
    would plan for it.

    Args:
        source: a tarball path, an unpacked directory, ``"-"``, or a :class:`Source`.
        path: an archive path (with or without the top directory, ``./`` allowed) or an
            output path (``lib/libfoo.so``).
        options: what a split would do (:class:`SplitOptions`).

    Returns:
        An :class:`Explanation` (``as_dict()`` gives its JSON data).

    Raises:
        SourceError: ``path`` is no member (the message suggests near matches), or the
            source cannot be read.
        RulesError: a rule file is invalid.
        OptionsError: an option contradicts the source.
    """
    opts = replace(options or SplitOptions(), dry_run=True)
    wanted = _wanted(path)
    with started(source, opts) as opened:
        from cudasplit._split.pipeline import SplitRun

        # One pass over the member records; only the ELF file asked about is read and planned.
        run = SplitRun(opened, None, opts, plan_elf=lambda record: _names(record, wanted))
        report = run.run()
    record = _find_member(report, path, opened.description)
    assert run.ruleset is not None
    explanation = _explain_record(run.ruleset, record.path, Kind(record.kind), record.output,
                                  record.note, run.allowed)
    outputs = None if run.allowed is None else tuple(
        sorted(run.allowed, key=lambda o: (OUTPUT_NAMES.index(o) if o in OUTPUT_NAMES
                                           else len(OUTPUT_NAMES), o)))
    chosen = None if outputs is None else "outputs" if opts.outputs else next(
        (f for f in report.rules_files if "/packages/" in f.replace("\\", "/")), None)
    return replace(explanation, elf=_elf_plan(record), outputs=outputs, outputs_from=chosen)


def _elf_plan(record: MemberRecord) -> dict[str, object] | None:
    """The planned edit of an ELF file, and what it (or a static archive) carries."""
    inside: dict[str, object] = {"gpu": record.gpu, "glibc": record.glibc}
    if record.kind == "static":
        return inside
    if not record.kind.startswith("elf-"):
        return None
    keys = ("patch", "runpath_before", "runpath_after", "runpath_tag", "interpreter_before",
            "interpreter_after", "needed_unresolved", "dlopen")
    return {**{key: getattr(record, key) for key in keys}, **inside}


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
                    note: str | None, allowed: frozenset[str] | None) -> Explanation:
    dest, rename = ruleset.normalise(path)
    trials = tuple(
        RuleTrial(str(rule.ref), hit, tuple(g.pattern for g in rule.globs),
                  None if rule.kinds is None else tuple(sorted(rule.kinds)), rule.output,
                  rule.fallback)
        for rule, hit in ruleset.explain(dest, kind, allowed)
    )
    return Explanation(path, kind.value, dest, _rename_text(rename), trials, output, note)


def _rename_text(rename: Rename | None) -> str | None:
    return None if rename is None else f"{rename.ref}: {rename.source} -> {rename.target}"


__all__ = [
    "Explanation",
    "RuleTrial",
    "explain",
    "inspect",
    "split",
    "split_nix",
    "split_to_dir",
]
