"""``cudasplit diff``: what changed between two releases, as a packager needs to know it.

Either side is a :class:`~cudasplit._release.snapshot.Snapshot` (of a tarball, a split
directory or a manifest with its tarballs); this module compares two of them and writes the
comparison as text (big moves grouped by directory).

The comparison reports packages and outputs that appear or vanish, the size of each output,
members added, removed, moved to another output, moved to another package (crt, CCCL and NVVM
leaving cuda_nvcc in 13.0) and relocated within the tree (``include/cub/`` becoming
``include/cccl/cub/``), and SONAME, DT_NEEDED and ``dlopen`` target changes (the last where
:mod:`cudasplit._elf.read.dlopen` is present, see :mod:`cudasplit._release.sonames`).

What the files carry is compared per package: GPU code architectures added or dropped (CUDA 13
dropping pre-Turing SASS), the glibc floor of each prefix, and the exported dynamic symbols of
each library (matched across releases by SONAME without its version: ``libcudart.so.12`` and
``libcudart.so.13`` are both ``libcudart``): symbols added, removed, or whose version node
moved (``cudaMalloc@@libcudart.so.12`` -> ``@@libcudart.so.13``).
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.graph import Graph
from cudasplit._release.snapshot import UNNAMED, Snapshot, snapshot
from cudasplit._release.sonames import ElfNames
from cudasplit._report import arch_order
from cudasplit._rulebook import renamed_pairs
from cudasplit._words import plural

DIFF_SCHEMA = 1  # the "schema" of as_dict (cudasplit/schemas/diff.json)

__all__ = ["Change", "ReleaseDiff", "Snapshot", "diff_snapshots", "snapshot"]



@dataclass(frozen=True, slots=True, order=True)
class Change:
    """One line of the diff; ``what`` names the kind of change."""

    what: str      # package-added|package-removed|package-renamed|platform-added|
    #                platform-removed|output-added|output-removed|member-added|
    #                member-removed|member-moved|package-moved|relocated|soname-added|
    #                soname-removed|soname-moved|needed-added|needed-removed|
    #                dlopen-added|dlopen-removed|version|gpu-added|gpu-removed|
    #                glibc-floor|symbol-added|symbol-removed|symbol-moved
    package: str
    path: str = ""
    old: str = ""
    new: str = ""


@dataclass(frozen=True, slots=True)
class ReleaseDiff:
    """What :func:`diff_releases` found between OLD and NEW.

    Attributes:
        old: OLD as given.
        new: NEW as given.
        changes: every change, in the order printed.
        sizes: package -> output -> (old bytes, new bytes).
        notes: what to keep in mind reading it (a tarball compared with a split directory).

    Raises:
        Nothing: a value.
    """

    old: str
    new: str
    changes: tuple[Change, ...]
    sizes: dict[str, dict[str, tuple[int, int]]]  # package -> output -> (old bytes, new bytes)
    notes: tuple[str, ...] = ()

    def of(self, what: str) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.what == what)

    def as_dict(self) -> dict[str, Any]:
        return {"schema": DIFF_SCHEMA, "old": self.old, "new": self.new,
                "sizes": {p: {o: {"old": a, "new": b} for o, (a, b) in outs.items()}
                          for p, outs in self.sizes.items()},
                "changes": [asdict(c) for c in self.changes],
                **({"notes": list(self.notes)} if self.notes else {})}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2) + "\n"

    def text_lines(self, *, members: bool = False) -> list[str]:
        return render_diff(self, members)

    def draw(self, fmt: str) -> str:
        """What moved, as Graphviz ``dot`` or ``mermaid`` text (ValueError for another
        format)."""

        return diff_graph(self).render(fmt)


def diff_snapshots(old: Snapshot, new: Snapshot) -> ReleaseDiff:
    old, new = _named_alike(old, new)
    changes: list[Change] = []
    changes += _package_changes(old, new)
    changes += _platform_changes(old, new)
    changes += _member_changes(old, new)
    changes += _elf_changes(old, new)
    changes += _inside_changes(old, new)
    changes += _symbol_changes(old, new)
    sizes = _sizes(old, new)
    changes += _output_changes(sizes)
    return ReleaseDiff(old.label, new.label, tuple(sorted(set(changes))), sizes,
                       _notes(old, new))


def _notes(old: Snapshot, new: Snapshot) -> tuple[str, ...]:
    kinds = {old.kind, new.kind}
    if "split" in kinds and kinds & {"archive", "manifest"}:
        return ("one side is a split directory (the files as written), the other an archive "
                "(its members as a split would place them): the links a split makes (lib64 "
                "-> lib, pkg-config aliases, stub links), the .pc files it rewrites and the "
                "ELF files it patches differ by design; compare two archives or two splits "
                "for what a release changed",)
    return ()


def _named_alike(old: Snapshot, new: Snapshot) -> tuple[Snapshot, Snapshot]:
    """A split directory whose name does not say its package (``split -o out``) compared with
    one package (a tarball, another split): the same package, whatever the names. Without
    this, every member "moved" from ``cuda_cudart`` to ``split``."""
    if list(old.versions) == [UNNAMED] and len(new.versions) == 1:
        return old.renamed(UNNAMED, next(iter(new.versions))), new
    if list(new.versions) == [UNNAMED] and len(old.versions) == 1:
        return old, new.renamed(UNNAMED, next(iter(old.versions)))
    return old, new


def _package_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    # A known rename (cuda_cccl -> cccl at CUDA 13.3, nixpkgs#528773) is one change, not a
    # package removed and another added.
    renames = renamed_pairs(set(old.versions), set(new.versions))
    gone = {r[0] for r in renames}
    came = {r[1] for r in renames}
    found = [Change("package-renamed", a, path=f"CUDA {since}", old=f"{a} {old.versions[a]}",
                    new=f"{b} {new.versions[b]}") for a, b, since in renames]
    found += [Change("package-removed", p, old=old.versions[p])
              for p in old.versions if p not in new.versions and p not in gone]
    found += [Change("package-added", p, new=new.versions[p])
              for p in new.versions if p not in old.versions and p not in came]
    # A side that does not know a version (a split directory named by hand) changed none.
    found += [Change("version", p, old=old.versions[p], new=new.versions[p])
              for p in old.versions if p in new.versions and old.versions[p] != new.versions[p]
              and old.versions[p] and new.versions[p]]
    return found


def _platform_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    """Manifest-level snapshots: platforms a package gained or lost (``windows-arm64`` in
    13.4, ``linux-aarch64`` gone with CUDA 13); renamed packages compare under both names."""
    found = []
    pairs = {a: b for a, b, _ in renamed_pairs(set(old.versions), set(new.versions))}
    for package, before in old.platforms.items():
        after = new.platforms.get(pairs.get(package, package))
        if after is None:
            continue
        found += [Change("platform-removed", package, path=p) for p in before if p not in after]
        found += [Change("platform-added", package, path=p) for p in after if p not in before]
    return found


def _sizes(old: Snapshot, new: Snapshot) -> dict[str, dict[str, tuple[int, int]]]:
    a, b = old.output_sizes(), new.output_sizes()
    result: dict[str, dict[str, tuple[int, int]]] = {}
    for package in sorted(set(a) | set(b)):
        outs = set(a.get(package, {})) | set(b.get(package, {}))
        result[package] = {o: (a.get(package, {}).get(o, 0), b.get(package, {}).get(o, 0))
                           for o in sorted(outs, key=_output_index)}
    return result


def _output_index(name: str) -> int:
    return OUTPUT_NAMES.index(name) if name in OUTPUT_NAMES else len(OUTPUT_NAMES)


def _output_changes(sizes: Mapping[str, Mapping[str, tuple[int, int]]]) -> list[Change]:
    found = []
    for package, outs in sizes.items():
        for output, (before, after) in outs.items():
            if not before and after:
                found.append(Change("output-added", package, output))
            elif before and not after:
                found.append(Change("output-removed", package, output))
    return found


def _member_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    found: list[Change] = []
    old_paths, new_paths = old.by_path(), new.by_path()
    for path in sorted(set(old_paths) | set(new_paths)):
        before, after = old_paths.get(path, set()), new_paths.get(path, set())
        if before == after:
            continue
        found += _path_change(path, before, after)
    return _relocations(found)


def _path_change(path: str, before: set[tuple[str, str]], after: set[tuple[str, str]]
                 ) -> list[Change]:
    old_pkgs, new_pkgs = {p for p, _ in before}, {p for p, _ in after}
    if len(before) == 1 and len(after) == 1:
        (p0, o0), (p1, o1) = next(iter(before)), next(iter(after))
        what = "member-moved" if p0 == p1 else "package-moved"
        return [Change(what, p1, path, f"{p0}:{o0}", f"{p1}:{o1}")]
    found = [Change("member-removed", p, path, o, "") for p, o in before - after
             if p not in new_pkgs or (p, o) not in after]
    found += [Change("member-added", p, path, "", o) for p, o in after - before
              if p not in old_pkgs or (p, o) not in before]
    return found


def _relocations(changes: list[Change]) -> list[Change]:
    """A removed path that reappears with one or two directories more or fewer
    (``include/cub/x`` -> ``include/cccl/cub/x``, ``nvvm/libdevice/x`` -> ``libdevice/x``), in
    the same package or another, is one relocation, not a removal and an addition."""
    exact: dict[str, Change] = {}
    deeper: dict[str, Change] = {}  # an added path with directories dropped -> that addition
    for change in changes:
        if change.what == "member-added":
            exact.setdefault(change.path, change)
            for key in _shallower(change.path):
                deeper.setdefault(key, change)
    kept: list[Change] = []
    used: set[int] = set()
    for change in changes:
        target = _relocated_to(change, exact, deeper, used)
        if target is None:
            kept.append(change)
            continue
        used.add(id(target))
        kept.append(Change("relocated", target.package, change.path,
                           f"{change.package}:{change.old}",
                           f"{target.package}:{target.new}:{target.path}"))
    return [c for c in kept if not (c.what == "member-added" and id(c) in used)]


def _relocated_to(change: Change, exact: Mapping[str, Change], deeper: Mapping[str, Change],
                  used: set[int]) -> Change | None:
    """Only one side loses directories: ``a/x/f`` and ``a/y/f`` are two files, not a move."""
    if change.what != "member-removed":
        return None
    candidates = [deeper.get(change.path)] + [exact.get(k) for k in _shallower(change.path)]
    for target in candidates:
        if target is not None and id(target) not in used:
            return target
    return None


def _shallower(path: str) -> Iterable[str]:
    """``path`` without one or two consecutive directories (never the file name, and at least
    one directory is left: ``LICENSE`` matches nothing)."""
    parts = path.split("/")
    for drop in (1, 2):
        for start in range(len(parts) - 1 - drop + 1):
            rest = parts[:start] + parts[start + drop:]
            if len(rest) >= 2:
                yield "/".join(rest)


def _elf_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    found: list[Change] = []
    for package in sorted(set(old.versions) & set(new.versions)):
        a = _package_elf(old, package)
        b = _package_elf(new, package)
        found += [Change("soname-removed", package, old=s) for s in _sonames(a) - _sonames(b)]
        found += [Change("soname-added", package, new=s) for s in _sonames(b) - _sonames(a)]
        found += [Change("needed-removed", package, old=n) for n in _needed(a) - _needed(b)]
        found += [Change("needed-added", package, new=n) for n in _needed(b) - _needed(a)]
        found += [Change("dlopen-removed", package, old=n) for n in _dlopen(a) - _dlopen(b)]
        found += [Change("dlopen-added", package, new=n) for n in _dlopen(b) - _dlopen(a)]
    return found + _soname_moves(old, new)


def _soname_moves(old: Snapshot, new: Snapshot) -> list[Change]:
    """A SONAME that another package provides now (libnvvm.so.4: cuda_nvcc -> libnvvm)."""
    before, after = _providers(old), _providers(new)
    return [Change("soname-moved", ",".join(sorted(after[s])), s, ",".join(sorted(before[s])),
                   ",".join(sorted(after[s])))
            for s in sorted(set(before) & set(after)) if before[s] != after[s]]


def _providers(snap: Snapshot) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for (package, _), facts in snap.elf.items():
        if facts.soname:
            found.setdefault(facts.soname, set()).add(package)
    return found


def _package_elf(snap: Snapshot, package: str) -> list[ElfNames]:
    return [f for (p, _), f in snap.elf.items() if p == package]


def _sonames(facts: list[ElfNames]) -> set[str]:
    return {f.soname for f in facts if f.soname}


def _needed(facts: list[ElfNames]) -> set[str]:
    return {n for f in facts for n in f.needed}


def _dlopen(facts: list[ElfNames]) -> set[str]:
    return {n for f in facts for n in f.dlopen}

def _inside_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    """GPU code (kind and architecture) a package gained or lost; glibc floors that moved."""
    found: list[Change] = []
    for package in sorted(set(old.versions) & set(new.versions)):
        a, b = _gpu_set(old, package), _gpu_set(new, package)
        found += [Change("gpu-removed", package, kind, old=arch) for kind, arch in a - b]
        found += [Change("gpu-added", package, kind, new=arch) for kind, arch in b - a]
        before, after = _floors(old, package), _floors(new, package)
        for prefix in sorted(set(before) | set(after)):
            if before.get(prefix) != after.get(prefix):
                found.append(Change("glibc-floor", package, prefix, before.get(prefix, ""),
                                    after.get(prefix, "")))
    return found


def _gpu_set(snap: Snapshot, package: str) -> set[tuple[str, str]]:
    return {(str(row["kind"]), str(row["arch"])) for (p, _), (gpu, _) in snap.inside.items()
            if p == package for row in gpu}


def _floors(snap: Snapshot, package: str) -> dict[str, str]:
    best: dict[str, str] = {}
    for (p, _), (_, floors) in snap.inside.items():
        for need in floors if p == package else ():
            prefix, version = str(need["prefix"]), str(need["version"])
            if prefix not in best or _version(version) > _version(best[prefix]):
                best[prefix] = version
    return best


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _symbol_changes(old: Snapshot, new: Snapshot) -> list[Change]:
    """Per library (SONAME without its version), the exported symbols added, removed, or
    moved to another version node."""
    found: list[Change] = []
    for package in sorted(set(old.versions) & set(new.versions)):
        a, b = _exports(old, package), _exports(new, package)
        for library in sorted(set(a) & set(b)):
            found += _library_symbols(package, library, a[library], b[library])
    return found


def _exports(snap: Snapshot, package: str) -> dict[str, dict[str, str]]:
    """library -> symbol name -> ``name@@version`` as exported."""
    found: dict[str, dict[str, str]] = {}
    for (p, path), facts in snap.elf.items():
        if p != package or not facts.exports or "stubs" in path.split("/"):
            continue
        library = _library_key(facts.soname or posixpath.basename(path))
        table = found.setdefault(library, {})
        for symbol in facts.exports:
            table.setdefault(symbol.split("@", 1)[0], symbol)
    return found


def _library_key(name: str) -> str:
    """``libcudart.so.12`` -> ``libcudart``: one library across its majors."""
    return name.split(".so", 1)[0]


def _library_symbols(package: str, library: str, before: Mapping[str, str],
                     after: Mapping[str, str]) -> list[Change]:
    found = [Change("symbol-removed", package, library, old=before[n])
             for n in before if n not in after]
    found += [Change("symbol-added", package, library, new=after[n])
              for n in after if n not in before]
    found += [Change("symbol-moved", package, library, before[n], after[n])
              for n in before if n in after and before[n] != after[n]]
    return found


def render_diff(diff: ReleaseDiff, members: bool) -> list[str]:
    lines = [f"--- {diff.old}", f"+++ {diff.new}"]
    for what, sign in (("package-removed", "-"), ("package-added", "+")):
        lines += [f"{sign} package {c.package} {c.old or c.new}" for c in diff.of(what)]
    lines += [f"~ package renamed {c.old} -> {c.new} ({c.path})"
              for c in diff.of("package-renamed")]
    lines += [f"~ package {c.package} {c.old} -> {c.new}" for c in diff.of("version")]
    for what, sign in (("platform-removed", "-"), ("platform-added", "+")):
        lines += [f"{sign} platform {c.package}: {c.path}" for c in diff.of(what)]
    lines += _size_lines(diff)
    lines += [f"{'+' if c.what == 'output-added' else '-'} output {c.package}:{c.path}"
              for c in diff.changes if c.what in ("output-added", "output-removed")]
    for what in ("package-moved", "relocated", "member-moved", "member-removed", "member-added"):
        lines += _grouped(diff.of(what), what, members)
    lines += [f"soname-moved {c.path}: {c.old} -> {c.new}" for c in diff.of("soname-moved")]
    for what, sign in (("soname-removed", "-"), ("soname-added", "+"),
                       ("needed-removed", "-"), ("needed-added", "+"),
                       ("dlopen-removed", "-"), ("dlopen-added", "+")):
        label = what.split("-")[0]
        lines += [f"{sign} {label} {c.package}: {c.old or c.new}" for c in diff.of(what)]
    return lines + _inside_lines(diff, members)


def _inside_lines(diff: ReleaseDiff, members: bool) -> list[str]:
    """GPU architectures per package and kind on one line; symbols one per line, or moves
    grouped by (old node, new node) unless ``members``."""
    lines = []
    for what, sign in (("gpu-removed", "-"), ("gpu-added", "+")):
        groups: dict[tuple[str, str], list[str]] = {}
        for c in diff.of(what):
            groups.setdefault((c.package, c.path), []).append(c.old or c.new)
        lines += [f"{sign} gpu {package}: {kind} {', '.join(sorted(archs, key=arch_order))}"
                  for (package, kind), archs in sorted(groups.items())]
    lines += [f"~ glibc {c.package}: {c.path} {c.old or '-'} -> {c.new or '-'}"
              for c in diff.of("glibc-floor")]
    for what, sign in (("symbol-removed", "-"), ("symbol-added", "+")):
        lines += [f"{sign} symbol {c.package} {c.path}: {c.old or c.new}" for c in diff.of(what)]
    moved = diff.of("symbol-moved")
    if members:
        return lines + [f"~ symbol {c.package} {c.path}: {c.old} -> {c.new}" for c in moved]
    counts: Counter[tuple[str, str, str, str]] = Counter(
        (c.package, c.path, _node(c.old), _node(c.new)) for c in moved)
    return lines + [f"~ symbols {package} {library} ({n}): version {a} -> {b}"
                    for (package, library, a, b), n in sorted(counts.items())]


def _node(symbol: str) -> str:
    return symbol.split("@")[-1] or "(none)" if "@" in symbol else "(none)"


def _size_lines(diff: ReleaseDiff) -> list[str]:
    lines = []
    for package, outs in diff.sizes.items():
        for output, (before, after) in outs.items():
            if before != after:
                lines.append(f"  size {package}:{output} {before:,} -> {after:,} "
                             f"({after - before:+,})")
    return lines


def _grouped(changes: tuple[Change, ...], what: str, members: bool) -> list[str]:
    """One line per directory and (from, to) pair unless ``members``: 1,700 CCCL headers
    moving read as one line."""
    if members:
        return [f"{what} {c.path}: {old} -> {new}" for c in changes
                for old, new in [_ends(c, member=True)[1:]]]
    groups: dict[tuple[str, str, str], int] = {}
    for c in changes:
        key = _ends(c)
        groups[key] = groups.get(key, 0) + 1
    return [f"{what} {where} ({n} file{'s' if n > 1 else ''}): {old} -> {new}"
            for (where, old, new), n in sorted(groups.items())]


def _ends(c: Change, *, member: bool = False) -> tuple[str, str, str]:
    """(directory group, from, to) as the text shows them (``member``: whole paths)."""
    where = c.path if member else _group_dir(c.path)
    if c.what == "member-removed":
        return where, f"{c.package}:{c.old}", "-"
    if c.what == "member-added":
        return where, "-", f"{c.package}:{c.new}"
    if c.what == "relocated":
        place, _, new_path = c.new.rpartition(":")
        rest = c.path[len(where):] if where.endswith("/") else ""
        same_tail = bool(rest) and new_path.endswith("/" + rest)
        new_dir = new_path[:len(new_path) - len(rest)] if same_tail else new_path
        return where, c.old, f"{place} {new_dir}"
    return where, c.old, c.new


def _group_dir(path: str) -> str:
    parts = posixpath.dirname(path).split("/")
    return "/".join(parts[:2]) + "/" if parts != [""] else path


def diff_graph(diff: ReleaseDiff) -> Graph:
    """A node per package output that changed (its size, members added and removed; new
    ones green, gone ones red) and an edge per pair of outputs members moved between,
    labelled with how many."""
    graph = Graph(f"{diff.old} -> {diff.new}")
    moved: Counter[tuple[str, str]] = Counter()
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    for c in diff.changes:
        if c.what in ("member-moved", "package-moved"):
            moved[(c.old, c.new)] += 1
        elif c.what == "relocated":
            moved[(c.old, ":".join(c.new.split(":")[:2]))] += 1
        elif c.what == "member-added":
            added[f"{c.package}:{c.new}"] += 1
        elif c.what == "member-removed":
            removed[f"{c.package}:{c.old}"] += 1
        elif c.what in ("output-added", "output-removed"):
            graph.node(f"{c.package}:{c.path}", c.what.replace("-", " "),
                       style=c.what.split("-")[1])
        elif c.what in ("package-added", "package-removed"):
            graph.node(c.package, f"{c.what.replace('-', ' ')} {c.old or c.new}",
                       style=c.what.split("-")[1])
        elif c.what == "version":
            graph.node(c.package, f"{c.old} -> {c.new}")
    for package, outputs in diff.sizes.items():
        for output, (before, after) in outputs.items():
            if before != after:
                graph.node(f"{package}:{output}", f"{before:,} -> {after:,} bytes")
    for node, count in sorted(added.items()):
        graph.node(node, f"+{plural(count, 'member')}")
    for node, count in sorted(removed.items()):
        graph.node(node, f"-{plural(count, 'member')}")
    for (source, target), count in sorted(moved.items()):
        graph.edge(source, target, plural(count, "member"))
    return graph
