"""One side of ``cudasplit diff``: every member's package, output, path and size, and its ELF facts.

Either side is a snapshot: every member's package, output (after classification by the rules),
path inside the output and size, plus the soname facts of its ELF files. A snapshot comes from

* a tarball or an unpacked redistributable (one package: classified like ``inspect`` does);
* a split directory: ``DIR/<output>/`` (one package) or ``DIR/<pname>-<platform>-<version>/
  <output>/`` (what a batch ``split`` writes);
* a manifest with its tarballs (every package of one platform).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudasplit._elf.read import read_inside
from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.manifest import find_tarball, load_manifest, select_artifacts
from cudasplit._release.sonames import ElfNames, scan_elf_dir, scan_elf_source
from cudasplit._run import ProgressCallback, Tally
from cudasplit._source import parse_top_dir
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import SourceError

__all__ = ["Entry", "Snapshot", "snapshot"]


@dataclass(frozen=True, slots=True, order=True)
class Entry:
    """One member as placed: which package and output, and how big."""

    package: str
    output: str
    size: int


@dataclass
class Snapshot:
    label: str
    versions: dict[str, str] = field(default_factory=dict)  # package -> version
    members: dict[tuple[str, str], Entry] = field(default_factory=dict)  # (package, path)
    elf: dict[tuple[str, str], ElfNames] = field(default_factory=dict)   # (package, path)
    # A manifest read without its tarballs: package -> the platforms it is built for.
    platforms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # (package, path) -> what an ELF file or static archive carries: GPU code rows (kind,
    # arch, ...) and glibc floor rows (prefix, version, library, symbol), as in the report.
    inside: dict[tuple[str, str], tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]] \
        = field(default_factory=dict)

    def add(self, package: str, path: str, output: str, size: int) -> None:
        self.members[(package, path)] = Entry(package, output, size)

    def output_sizes(self) -> dict[str, dict[str, int]]:
        sizes: dict[str, dict[str, int]] = {}
        for entry in self.members.values():
            per = sizes.setdefault(entry.package, {})
            per[entry.output] = per.get(entry.output, 0) + entry.size
        return sizes

    def by_path(self) -> dict[str, set[tuple[str, str]]]:
        found: dict[str, set[tuple[str, str]]] = {}
        for (package, path), entry in self.members.items():
            found.setdefault(path, set()).add((package, entry.output))
        return found


def snapshot(path: str | os.PathLike[str], *, tarball_dir: str | os.PathLike[str] | None = None,
             platform: str = "linux-x86_64", jobs: int = 1,
             progress: ProgressCallback | None = None) -> Snapshot:
    """A manifest (``*.json``: with ``tarball_dir`` its tarballs are read, without it only the
    manifest: packages, versions, platforms), a split directory, or one tarball/tree;
    ``progress`` hears of every member read."""
    target = Path(path)
    if target.suffix == ".json":
        if tarball_dir is None:
            return _manifest_only(target)
        return _from_manifest(target, Path(tarball_dir), platform, jobs, progress)
    if target.is_dir() and _split_layout(target):
        return _from_split_dir(target)
    snap = Snapshot(str(target))
    tally = Tally(str(target), progress)
    _add_source(snap, target, None, jobs, tally)
    tally.done()
    return snap


def _manifest_only(path: Path) -> Snapshot:
    """What the manifest alone says: every package (any platform), its version, its platforms."""
    manifest = load_manifest(path)
    snap = Snapshot(str(path))
    for package in manifest.packages:
        snap.versions[package.pname] = package.version
        snap.platforms[package.pname] = package.platforms
    return snap


def _from_manifest(path: Path, tarball_dir: Path, platform: str, jobs: int,
                   progress: ProgressCallback | None) -> Snapshot:
    manifest = load_manifest(path)
    snap = Snapshot(str(path))
    tally = Tally(str(path), progress)
    for artifact in select_artifacts(manifest, platforms=(platform,)):
        found = find_tarball(artifact, tarball_dir)
        if found is None:
            raise SourceError(f"no tarball for {artifact.label} ({artifact.filename})",
                              source=str(tarball_dir))
        _add_source(snap, found, artifact.package, jobs, tally)
        snap.versions[artifact.package] = manifest.package(artifact.package).version
    tally.done()
    return snap


def _add_source(snap: Snapshot, path: Path, package: str | None, jobs: int,
                tally: Tally) -> None:
    # Two passes over the tarball (the plan, then the ELF members); progress moves by the
    # bytes of both.
    meter = tally.meter(path.name)
    metering = tally.progress is not None
    report = _split(path, None, options=SplitOptions(
        dry_run=True, patch=False, jobs=jobs, progress=meter.progress() if metering else None))
    name = package or str(report.package.get("name") or path.name)
    snap.versions.setdefault(name, str(report.package.get("version") or ""))
    dests = {}
    for record in report.members:
        if record.output is not None and record.dest is not None and record.kind != "dir":
            snap.add(name, record.dest, record.output, record.size)
            dests[record.path] = record.dest
            if record.gpu or record.glibc:
                snap.inside[(name, record.dest)] = (tuple(record.gpu or ()),
                                                    tuple(record.glibc or ()))
    for facts in scan_elf_source(path, jobs=jobs, on_bytes=meter.again() if metering else None):
        dest = dests.get(facts.path)
        if dest is not None:
            snap.elf[(name, dest)] = ElfNames(dest, facts.soname, facts.needed, facts.dlopen,
                                              facts.exports)
    meter.finish()


def _add_inside(snap: Snapshot, package: str, rel: str, full: Path) -> None:
    """A split file's GPU code and glibc floor (headers only; not ELF: nothing)."""
    if full.is_symlink():
        return
    try:
        inside = read_inside(full)
    except OSError:
        return
    if inside is not None and (inside.gpu or inside.floors):
        floors = tuple({"prefix": n.prefix, "version": n.version, "library": n.library,
                        "symbol": n.symbol} for n in inside.floors)
        snap.inside[(package, rel)] = (tuple(g.as_dict() for g in inside.gpu), floors)


def _split_layout(path: Path) -> str | None:
    """``single`` for DIR/<output>/, ``batch`` for DIR/<package>/<output>/, else None."""
    subdirs = [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if subdirs and all(p.name in OUTPUT_NAMES for p in subdirs):
        return "single"
    if subdirs and all(_is_single(p) for p in subdirs):
        return "batch"
    return None


def _is_single(path: Path) -> bool:
    subdirs = [p for p in path.iterdir() if p.is_dir()]
    return bool(subdirs) and all(p.name in OUTPUT_NAMES for p in subdirs)


def _from_split_dir(path: Path) -> Snapshot:
    snap = Snapshot(str(path))
    if _split_layout(path) == "single":
        # Two single-package split directories compare as one package whatever their names.
        package = parse_top_dir(path.name + "-archive")
        _add_split_package(snap, path, package.name if package else "split")
        return snap
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        package = parse_top_dir(sub.name + "-archive")
        name = package.name if package else sub.name
        _add_split_package(snap, sub, name)
        if package and package.version:
            snap.versions[name] = package.version
    return snap


def _add_split_package(snap: Snapshot, root: Path, name: str) -> None:
    snap.versions.setdefault(name, "")
    for output_dir in sorted(p for p in root.iterdir() if p.name in OUTPUT_NAMES):
        output = output_dir.name
        for dirpath, _dirs, files in os.walk(output_dir):
            for file in files:
                full = Path(dirpath) / file
                rel = str(full.relative_to(output_dir))
                if not rel.startswith("nix-support/"):
                    snap.add(name, rel, output, full.lstat().st_size)
                    _add_inside(snap, name, rel, full)
        for facts in scan_elf_dir(output_dir):
            snap.elf[(name, facts.path)] = facts
