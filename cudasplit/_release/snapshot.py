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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cudasplit._elf.read import read_inside
from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.manifest import find_tarball, load_manifest, select_artifacts
from cudasplit._release.sonames import ElfNames, scan_elf_dir, scan_elf_source
from cudasplit._run import Progress, ProgressCallback, Tally
from cudasplit._source import parse_top_dir
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import SourceError

__all__ = ["UNNAMED", "Entry", "Snapshot", "snapshot"]

# The package of a single-package split directory whose name does not say it (``-o out``):
# compared with a one-package side, it takes that side's name (``diff_snapshots``).
UNNAMED = "split"


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
    # What was read: "archive" (a tarball or an unpacked tree: members as a split would place
    # them), "split" (a split directory: the files as written), "manifest" (with its
    # tarballs) or "manifest-only".
    kind: str = "archive"

    def add(self, package: str, path: str, output: str, size: int) -> None:
        self.members[(package, path)] = Entry(package, output, size)

    def output_sizes(self) -> dict[str, dict[str, int]]:
        sizes: dict[str, dict[str, int]] = {}
        for entry in self.members.values():
            per = sizes.setdefault(entry.package, {})
            per[entry.output] = per.get(entry.output, 0) + entry.size
        return sizes

    def renamed(self, old: str, new: str) -> Snapshot:
        """This snapshot with package ``old`` called ``new``."""
        def key(pair: tuple[str, str]) -> tuple[str, str]:
            return (new, pair[1]) if pair[0] == old else pair

        return Snapshot(
            self.label, {new if p == old else p: v for p, v in self.versions.items()},
            {key(k): replace(e, package=new) if e.package == old else e
             for k, e in self.members.items()},
            {key(k): v for k, v in self.elf.items()},
            {new if p == old else p: v for p, v in self.platforms.items()},
            {key(k): v for k, v in self.inside.items()}, self.kind)

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
    ``progress`` hears of every member read (see :class:`_Passes`) or, for a split directory,
    of every file."""
    target = Path(path)
    if target.suffix == ".json":
        if tarball_dir is None:
            return _manifest_only(target)
        return _from_manifest(target, Path(tarball_dir), platform, jobs, progress)
    if target.is_dir() and _split_layout(target):
        return _from_split_dir(target, Tally(str(target), progress, unit="file"))
    snap = Snapshot(str(target))
    passes = _Passes(progress)
    _add_source(snap, target, None, jobs, passes.of(str(target)))
    passes.done()
    return snap


class _Passes:
    """The status of reading tarballs twice (the split's plan, then the ELF names): one series
    per tarball and pass, its ``source`` naming both (``x.tar.xz (pass 2 of 2: ELF names)``,
    ``..., tarball 3 of 30``), its members and bytes those of that pass. So the line counts
    members, never shows more bytes than the tarball holds, and its rate is of one pass (one
    series adding both passes showed "0 members", then "1 member", and twice the bytes)."""

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.progress = progress
        self.last: Progress | None = None

    def of(self, where: str) -> _Pass | None:
        return None if self.progress is None else _Pass(self, where)

    def tell(self, update: Progress) -> None:
        assert self.progress is not None
        self.last = update
        self.progress(update)

    def done(self) -> None:
        if self.progress is not None and self.last is not None:
            self.progress(replace(self.last, done=True))


class _Pass:
    """One tarball's two series (see :class:`_Passes`)."""

    def __init__(self, passes: _Passes, where: str) -> None:
        self.passes = passes
        self.first = f"{where} (pass 1 of 2: placing members)"
        self.second = f"{where} (pass 2 of 2: ELF names)"
        self.members, self.bytes, self.current = 0, 0, ""

    def placing(self, update: Progress) -> None:
        """The split's own progress, as the first series."""
        self.passes.tell(Progress(self.first, update.members, update.bytes, update.current,
                                  unit=update.unit))

    def member(self, path: str) -> None:
        """The second pass reached ``path`` (the members before it are done)."""
        self.current = path
        self.passes.tell(Progress(self.second, self.members, self.bytes, path))
        self.members += 1

    def read(self, total: int) -> None:
        """The second pass has read ``total`` tar bytes."""
        self.bytes = total
        self.passes.tell(Progress(self.second, max(self.members - 1, 0), total, self.current))


def _manifest_only(path: Path) -> Snapshot:
    """What the manifest alone says: every package (any platform), its version, its platforms."""
    manifest = load_manifest(path)
    snap = Snapshot(str(path), kind="manifest-only")
    for package in manifest.packages:
        snap.versions[package.pname] = package.version
        snap.platforms[package.pname] = package.platforms
    return snap


def _from_manifest(path: Path, tarball_dir: Path, platform: str, jobs: int,
                   progress: ProgressCallback | None) -> Snapshot:
    manifest = load_manifest(path)
    snap = Snapshot(str(path), kind="manifest")
    passes = _Passes(progress)
    artifacts = select_artifacts(manifest, platforms=(platform,))
    for number, artifact in enumerate(artifacts, 1):
        found = find_tarball(artifact, tarball_dir)
        if found is None:
            raise SourceError(f"no tarball for {artifact.label} ({artifact.filename})",
                              source=str(tarball_dir))
        _add_source(snap, found, artifact.package, jobs,
                    passes.of(f"{found}, tarball {number} of {len(artifacts)}"))
        snap.versions[artifact.package] = manifest.package(artifact.package).version
    passes.done()
    return snap


def _add_source(snap: Snapshot, path: Path, package: str | None, jobs: int,
                status: _Pass | None) -> None:
    # Two passes over the tarball (the plan, then the ELF members), each with its own status.
    report = _split(path, None, options=SplitOptions(
        dry_run=True, patch=False, jobs=jobs,
        progress=None if status is None else status.placing))
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
    for facts in scan_elf_source(path, jobs=jobs,
                                 on_bytes=None if status is None else status.read,
                                 on_member=None if status is None else status.member):
        dest = dests.get(facts.path)
        if dest is not None:
            snap.elf[(name, dest)] = ElfNames(dest, facts.soname, facts.needed, facts.dlopen,
                                              facts.exports)


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


def _from_split_dir(path: Path, tally: Tally) -> Snapshot:
    snap = Snapshot(str(path), kind="split")
    if _split_layout(path) == "single":
        # Two single-package split directories compare as one package whatever their names.
        package = parse_top_dir(path.name + "-archive")
        _add_split_package(snap, path, package.name if package else UNNAMED, tally)
        tally.done()
        return snap
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        package = parse_top_dir(sub.name + "-archive")
        name = package.name if package else sub.name
        _add_split_package(snap, sub, name, tally)
        if package and package.version:
            snap.versions[name] = package.version
    tally.done()
    return snap


def _add_split_package(snap: Snapshot, root: Path, name: str, tally: Tally) -> None:
    snap.versions.setdefault(name, "")
    seen: set[tuple[int, int]] = set()  # (device, inode) of the files counted
    for output_dir in sorted(p for p in root.iterdir() if p.name in OUTPUT_NAMES):
        output = output_dir.name
        for dirpath, dirs, files in os.walk(output_dir):
            # A symlink to a directory is listed with the directories (and not followed).
            links = [d for d in dirs if (Path(dirpath) / d).is_symlink()]
            for file in sorted([*files, *links]):
                full = Path(dirpath) / file
                rel = str(full.relative_to(output_dir))
                if not rel.startswith("nix-support/"):
                    size = _size(full, seen)
                    snap.add(name, rel, output, size)
                    _add_inside(snap, name, rel, full)
                    tally.add(f"{output}/{rel}", size)
        for facts in scan_elf_dir(output_dir):
            snap.elf[(name, facts.path)] = facts


def _size(path: Path, seen: set[tuple[int, int]]) -> int:
    """A file's bytes as its member counts them in a tarball: a symlink 0, and a file already
    counted under another name (a hard link) 0; so a split and the tarball it came from agree
    on every output the split did not patch or rewrite."""
    stat = path.lstat()
    if path.is_symlink() or (stat.st_dev, stat.st_ino) in seen:
        return 0
    seen.add((stat.st_dev, stat.st_ino))
    return stat.st_size
