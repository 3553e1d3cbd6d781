"""The public entry points for one source: thin wrappers that pick a sink and run the pipeline.

Several sources at once are :mod:`cudasplit._api_batch`'s job.
"""

from __future__ import annotations

import difflib
import os
import posixpath
from dataclasses import dataclass, replace
from pathlib import Path

from ._layout import LayoutSpec
from ._model import OUTPUT_NAMES, Kind
from ._nixenv import nix_outputs
from ._pipeline import SplitOptions, SplitRun, member_kind, open_for
from ._pipeline import split as _split
from ._report import MemberRecord, Report
from ._resolve import with_nix_defaults
from ._rules import Rename, RuleSet, load_ruleset
from ._sources import Source
from .errors import SourceError
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


def split_nix(source: PathLike | Source, env: dict[str, str] | None = None,
              options: SplitOptions | None = None) -> Report:
    """Inside a Nix builder: the derivation's outputs (``$outputs`` or structured attrs)."""
    roots = nix_outputs(env)
    opts = replace(options or SplitOptions(), outputs=tuple(roots), nix_build=True)
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
    """One rule :func:`explain` tried on a path, and whether it matched."""

    rule: str
    matched: bool
    globs: tuple[str, ...]
    kinds: tuple[str, ...] | None
    output: str | None


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a member went where it did (:func:`explain`): its rename, every rule tried in
    precedence order, the output, and the planned ELF edit."""

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
    "Explanation",
    "RuleTrial",
    "explain",
    "inspect",
    "load_ruleset",
    "member_kind",
    "split",
    "split_nix",
    "split_to_dir",
]
