"""Issue 13: one layout, decided before the first member, gives one report whoever asks.

``inspect``, ``--dry-run``, a memory sink, a directory sink and a tarball sink run over every
test tarball with the same layout and must report the same placements, links, RUNPATH plans
and problems (byte-equal JSON). Only the tense may differ, and only it is normalised: the
report's ``dry_run`` flag, ``patch`` (``planned`` where nothing is written, the backend that
wrote the edit otherwise) and notes ("would be renamed" / "renamed").
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zstandard

from cudasplit import (
    CudasplitError,
    LayoutSpec,
    MemorySink,
    RepackOptions,
    Report,
    SplitOptions,
    StagedSink,
    explain,
    inspect,
    open_source,
    repack_to_dir,
    split,
    split_to_dir,
)
from tests.security.test_hostile import make_ctx
from tests.support.hostile import catalog
from tests.support.tarutil import write_archive
from tests.unit.elf.test_plan_agreement import POLICY, _sources

EDITED = {"planned", "in-place", "append", "lief", "native"}


def canonical(report: Report) -> str:
    data = report.as_dict()
    data["dry_run"] = None
    for member in data["members"]:
        if member.get("patch") in EDITED:
            member["patch"] = "edit"
        if member.get("note"):
            member["note"] = member["note"].replace(" would be ", " ")
    return json.dumps(data, indent=1)


def five_reports(source: Path, work: Path, options: SplitOptions) -> dict[str, str]:
    roots = work / "final"          # where every output lives once the run is over
    layout = LayoutSpec.under(roots)
    reports = {
        "inspect": inspect(source, options, layout=layout),
        "dry-run": split_to_dir(source, roots, replace(options, dry_run=True)),
        "memory": split(source, MemorySink(layout), options),
        "directory": split_to_dir(source, roots, options),
        "tarball": repack_to_dir(source, work / "archives", options,
                                 RepackOptions(prefix=str(roots))).report,
    }
    return {name: canonical(report) for name, report in reports.items()}


def test_five_ways_one_report(redist_tarballs: dict[str, Path],
                              reference_trees: dict[str, Path], tmp_path: Path) -> None:
    options = SplitOptions(runpath=POLICY, jobs=2)
    edits = 0
    for number, source in enumerate(_sources(redist_tarballs, reference_trees, tmp_path)):
        reports = five_reports(source, tmp_path / f"w{number}", options)
        for name, text in reports.items():
            assert text == reports["directory"], (source, name)
        data = json.loads(reports["directory"])
        edits += sum(m.get("patch") == "edit" for m in data["members"])
        assert [m["path"] for m in data["members"]] == _listed(source), source
    assert edits > 50  # not vacuous: RUNPATH plans were compared


def five_outcomes(source: Path, work: Path, options: SplitOptions) -> dict[str, str]:
    """Like :func:`five_reports`, with a refusal as its error class (hostile input)."""
    roots = work / "final"
    layout = LayoutSpec.under(roots)
    runs: dict[str, Callable[[], Report]] = {
        "inspect": lambda: inspect(source, options, layout=layout),
        "dry-run": lambda: split_to_dir(source, roots, replace(options, dry_run=True)),
        "memory": lambda: split(source, MemorySink(layout), options),
        "directory": lambda: split_to_dir(source, roots, options),
        "tarball": lambda: repack_to_dir(source, work / "archives", options,
                                         RepackOptions(prefix=str(roots))).report,
    }
    outcomes = {}
    for name, run in runs.items():
        try:
            outcomes[name] = canonical(run())
        except CudasplitError as exc:
            outcomes[name] = f"refused: {type(exc).__name__}"
    return outcomes


def test_five_ways_agree_on_hostile_input(tmp_path: Path) -> None:
    """Every case of the hostile catalog: the same report, or the same refusal, five ways
    (a dry run must refuse what the real run refuses, and report what it reports)."""
    refused = 0
    for number, case in enumerate(catalog()):
        root = tmp_path / f"c{number}"
        root.mkdir()
        source = case.write(root, make_ctx(root))
        outcomes = five_outcomes(source, root, SplitOptions(jobs=1, **case.options))
        for name, outcome in outcomes.items():
            assert outcome == outcomes["directory"], (case.name, name)
        refused += outcomes["directory"].startswith("refused")
    assert refused > 10 and number > 50


def _listed(source: Path) -> list[str]:
    """The source's members in the order it yields them (the report keeps that order)."""
    return [member.path for member, _ in open_source(source).members()]


def test_repack_prefix_dry_run_and_archive_agree(redist_tarballs: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """The RUNPATHs ``repack --prefix`` writes into the archive are the ones its dry run shows."""
    options = SplitOptions(runpath=POLICY, jobs=2)
    pack = RepackOptions(prefix="/opt/cuda")
    real = repack_to_dir(redist_tarballs["zst"], tmp_path / "a", options, pack)
    dry = repack_to_dir(redist_tarballs["zst"], tmp_path / "b",
                        replace(options, dry_run=True), pack)
    assert canonical(real.report) == canonical(dry.report)
    afters = {m.runpath_after for m in real.report.members if m.runpath_after}
    assert afters and all("/opt/cuda/" in a for a in afters if "$ORIGIN" not in a)
    assert not (tmp_path / "b").exists()


class DigestSink(StagedSink):
    """A toy sink, defined here only: the staged base does placement, links and patching;
    this class just turns the finished stage into ``(output, dest) -> sha256``."""

    def __init__(self, layout: LayoutSpec) -> None:
        super().__init__(layout)
        self.digests: dict[tuple[str, str], str] = {}

    def finish(self) -> None:
        for output in self.outputs():
            root = self.stage_root(output)
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    rel = path.relative_to(root).as_posix()
                    self.digests[(output, rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
        self.discard_stage()


def test_a_toy_sink_needs_nothing_but_its_class(redist_tarballs: dict[str, Path],
                                                tmp_path: Path) -> None:
    source = redist_tarballs["xz"]
    roots = tmp_path / "final"
    options = SplitOptions(runpath=POLICY, jobs=2)
    toy = DigestSink(LayoutSpec.under(roots))
    report = split(source, toy, options)
    real = split_to_dir(source, roots, options)
    assert canonical(report) == canonical(real)
    on_disk = {(o, p.relative_to(roots / o).as_posix()):
               hashlib.sha256(p.read_bytes()).hexdigest()
               for o in os.listdir(roots) for p in sorted((roots / o).rglob("*"))
               if p.is_file() and not p.is_symlink()}
    assert toy.digests == on_disk  # byte for byte what the directory sink wrote: patched too
    assert any(m.patch in ("in-place", "append") for m in report.members)


def test_memory_sink_output_is_patched(redist_tarballs: dict[str, Path], tmp_path: Path) -> None:
    roots = tmp_path / "final"
    sink = MemorySink(LayoutSpec.under(roots))
    split(redist_tarballs["gz"], sink, SplitOptions(runpath=POLICY, jobs=1))
    split_to_dir(redist_tarballs["gz"], roots, SplitOptions(runpath=POLICY, jobs=1))
    patched = [key for key in sink.files if key[1].endswith(".so") or ".so." in key[1]]
    assert patched
    for output, dest in patched:
        assert sink.files[(output, dest)] == (roots / output / dest).read_bytes(), dest


def test_tarball_sink_is_told_the_identity(redist_tarballs: dict[str, Path],
                                           tmp_path: Path) -> None:
    """The archives are named from the identity the split read, not by asking the source."""
    result = repack_to_dir(redist_tarballs["zst"], tmp_path / "a", SplitOptions(patch=False))
    names = sorted(p.name for p in result.archives)
    stem = "-".join(filter(None, (result.report.package["name"],
                                  result.report.package["platform"],
                                  result.report.package["version"])))
    assert names and all(n.startswith(stem + "-") for n in names)
    with open(result.archives[0], "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            assert tar.next() is not None


def test_explain_reads_only_the_file_it_explains(redist_tarballs: dict[str, Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass over the member records; the plan is the dry run's for that file, but only
    that ELF file is copied out and read (a dry run copies every one; the patch stage reads
    the spool of the inside stage, or its own)."""
    from cudasplit._split.patchstage import PatchStage

    source = redist_tarballs["zst"]
    options = SplitOptions(runpath=POLICY)
    viewed = inspect(source, options)
    elves = [m for m in viewed.members if m.kind.startswith("elf-") and m.output]
    assert len(elves) > 3
    spooled: list[str] = []
    real = PatchStage.read_spool

    def counting(self: PatchStage, path: str, *args: Any) -> Any:
        spooled.append(path)
        return real(self, path, *args)
    monkeypatch.setattr(PatchStage, "read_spool", counting)
    for member in elves:
        spooled.clear()
        told = explain(source, member.path, options)
        assert spooled == [member.path]
        assert told.elf is not None
        assert (told.elf["runpath_after"], told.elf["interpreter_after"]) == (
            member.runpath_after, member.interpreter_after), member.path


def test_problems_come_in_source_order(tmp_path: Path) -> None:
    """A dangling link (found once the stream ended), a corrupt ELF (found by the patch stage,
    later still) and another dangling link: reported in the order of their members."""
    corrupt = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x03\x00\x3e\x00" + b"\xff" * 40
    entries = [
        ("symlink", "lib/first", "nowhere-1"),
        ("file", "lib/libbad.so.1", corrupt),
        ("file", "LICENSE", b"license"),
        ("symlink", "lib/last", "nowhere-2"),
    ]
    archive = write_archive(tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz",
                            entries)
    for report in (split_to_dir(archive, tmp_path / "o", SplitOptions(jobs=1)),
                   inspect(archive, SplitOptions(jobs=1))):
        assert [(p.path, p.code) for p in report.problems] == [
            ("lib/first", "dangling-symlink"), ("lib/libbad.so.1", "patch-failed"),
            ("lib/last", "dangling-symlink")]


def test_nix_outputs_plan_and_split_agree(redist_tarballs: dict[str, Path],
                                          tmp_path: Path) -> None:
    """In a Nix builder the layout is ``$outputs``: the dry run plans the store paths the real
    run writes (only some outputs declared: the others fall back, in the plan too)."""
    from cudasplit import split_nix

    names = ("out", "lib", "dev", "stubs")
    env = {"outputs": " ".join(names), **{n: str(tmp_path / "store" / n) for n in names}}
    options = SplitOptions(runpath=POLICY, jobs=2, default_rules=True)
    real = split_nix(redist_tarballs["xz"], env, options)
    planned = split_nix(redist_tarballs["xz"], env, replace(options, dry_run=True))
    assert canonical(real) == canonical(planned)
    afters = {m.runpath_after for m in real.members if m.runpath_after}
    assert any(str(tmp_path / "store" / "lib") in a for a in afters)
    assert not any("/${" in a for a in afters)
