"""The public entry points, thin wrappers that pick a sink and run the pipeline."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import SourceError
from .model import OUTPUT_NAMES, Kind
from .nixenv import nix_outputs
from .pipeline import SplitOptions, SplitRun, member_kind
from .pipeline import split as _split
from .report import Report
from .rules import Rename, RuleSet, load_ruleset
from .sinks import DirectorySink, Sink
from .sources import Source, open_source

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
        return _split(source, None, options=opts)
    sink = DirectorySink.for_output_dir(Path(output_dir), list(OUTPUT_NAMES),
                                        overwrite=opts.overwrite)
    return _split(source, sink, options=opts)


def split_nix(source: PathLike | Source, env: dict[str, str] | None = None,
              options: SplitOptions | None = None) -> Report:
    """Inside a Nix builder: the derivation's outputs (``$outputs`` or structured attrs)."""
    roots = nix_outputs(env)
    opts = replace(options or SplitOptions(), outputs=tuple(roots))
    if opts.dry_run:
        return _split(source, None, options=opts)
    return _split(source, DirectorySink(roots), options=opts)


def inspect(source: PathLike | Source, options: SplitOptions | None = None) -> Report:
    """Classify every member; write nothing."""
    return _split(source, None, options=replace(options or SplitOptions(), dry_run=True))


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


def explain(source: PathLike | Source, path: str, options: SplitOptions | None = None
            ) -> Explanation:
    """Which rule placed ``path`` (archive path, top dir stripped) and which it passed over."""
    opts = replace(options or SplitOptions(), dry_run=True)
    if isinstance(source, (str, os.PathLike)):
        source = open_source(source, package=opts.package)
    run = SplitRun(source, None, opts)
    report = run.run()
    wanted = path.strip("/")
    try:
        record = report.member(wanted)
    except KeyError:
        raise SourceError(f"no member {wanted!r} in the archive",
                          source=source.description) from None
    assert run.ruleset is not None
    return _explain_record(run.ruleset, record.path, Kind(record.kind), record.output,
                           record.note)


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


__all__ = ["Explanation", "RuleTrial", "explain", "inspect", "load_ruleset", "member_kind",
           "split", "split_nix", "split_to_dir"]
