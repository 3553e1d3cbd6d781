"""A report-only plan: the GPU code each library would keep for the GPUs named, the bytes saved.

NVIDIA's licence does not allow shipping modified libraries, so nothing is ever written: the
plan says what a build limited to some compute capabilities (Nixpkgs' ``cudaCapabilities``,
``8.0;9.0``) carries that no listed GPU can run.

How the CUDA driver picks code, per fatbinary container (one compilation unit's kernels), for a
GPU of compute capability X.Y -- the rules this plan applies:

* SASS ``sm_XZ`` (a cubin) runs on GPUs of the same major X with minor Y >= Z: ``sm_80`` on
  8.0, 8.6 and 8.9, never on 9.0. ``sm_XZa`` (architecture-specific) runs on X.Z only;
  ``sm_XZf`` (family-specific) on the same major with Y >= Z.
* PTX of ``compute_XZ`` is compiled by the driver (JIT) for any GPU of capability >= X.Z,
  later majors included; ``a`` PTX on X.Z only, ``f`` PTX within its family.
* A container's SASS that runs on the GPU is loaded; only when none does is its PTX compiled
  (the highest PTX architecture not above the GPU's).

So for each container and each GPU listed, the plan keeps the highest SASS that runs there
(and an exact ``a`` build of it), else the highest PTX that compiles there. Everything else in
the container is what a pruned build would not need; LTO-IR (used by ``nvlink -dlto``, never
loaded) is kept when its architecture is not above a listed GPU. A container with no code for
a listed GPU is reported: that library cannot run those kernels there at all.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudasplit._elf.read import AR_MAGIC, FatbinEntry, arch_key, fatbin_entries
from cudasplit._model import MemberType
from cudasplit._run import ProgressCallback, Tally
from cudasplit._source import open_source
from cudasplit._words import plural
from cudasplit.errors import (
    CudasplitError,
    OptionsError,
    SourceNotFoundError,
    source_os_error,
)

__all__ = ["PRUNE_SCHEMA", "FilePlan", "PrunePlan", "parse_capabilities", "prune_plan",
           "runs_on"]

PRUNE_SCHEMA = 1  # the "schema" of as_dict (cudasplit/schemas/gpu-plan.json)

_CAPABILITY = re.compile(r"^(?:sm_|compute_)?([0-9]{1,4})(?:\.([0-9]{1,4}))?[af]?$")


def parse_capabilities(text: str | Sequence[str]) -> tuple[tuple[int, int], ...]:
    """``"8.0 9.0"``, ``"8.0;9.0"`` (Nixpkgs), ``"sm_80,sm_90a"`` or ``["8.6"]`` -> capabilities
    ``((8, 0), (9, 0))``; :class:`OptionsError` for a word that is none."""
    words = re.split(r"[\s,;]+", text) if isinstance(text, str) else list(text)
    found = []
    for word in (w.strip() for w in words if w.strip()):
        match = _CAPABILITY.match(word)
        if match is None:
            raise OptionsError(f"gpu_archs: {word!r} is not a compute capability (8.0, 9.0a, "
                               "sm_90, 90)")
        major, minor = (int(match[1]), int(match[2])) if match[2] is not None else \
            divmod(int(match[1]), 10)
        found.append((major, minor))
    if not found:
        raise OptionsError("gpu_archs: name at least one compute capability (e.g. 8.0;9.0)")
    return tuple(sorted(set(found)))


def _capability(arch: str) -> tuple[int, int, str]:
    number, suffix = arch_key(arch)
    major, minor = divmod(number, 10)
    return major, minor, suffix


def runs_on(kind: str, arch: str, target: tuple[int, int]) -> bool:
    """Whether code of ``kind`` built for ``arch`` can run on a GPU of capability ``target``
    (SASS as it is, PTX and LTO-IR after compilation); see the module's rules."""
    major, minor, suffix = _capability(arch)
    if suffix == "a":
        return (major, minor) == target
    if kind == "sass" or suffix == "f":
        return major == target[0] and minor <= target[1]
    return (major, minor) <= target


def _best(entries: list[FatbinEntry], target: tuple[int, int]) -> list[FatbinEntry]:
    """The entries a GPU would use: the highest runnable SASS (and an exact ``a`` build),
    else the highest PTX that compiles for it."""
    for kind in ("sass", "ptx"):
        usable = [e for e in entries if e.kind == kind and runs_on(kind, e.arch, target)]
        if usable:
            top = max(arch_key(e.arch)[0] for e in usable)
            return [e for e in usable if arch_key(e.arch)[0] == top]
    return []


@dataclass
class FilePlan:
    """One file's plan: what it has, what it would keep, and the GPUs some of its kernels
    have no code for.

    Attributes:
        path: the file (a member path, or a path under a split directory).
        gpu_bytes: bytes of all its fatbinary entries.
        kept_bytes: bytes of the entries the plan keeps.
        kept: ``(kind, arch)`` -> how many entries are kept.
        dropped: ``(kind, arch)`` -> how many entries could go.
        uncovered: a requested capability (``"9.0"``) -> containers with no code for it.

    Raises:
        Nothing: a value.
    """

    path: str
    gpu_bytes: int = 0                      # bytes of all fatbinary entries
    kept_bytes: int = 0
    kept: dict[tuple[str, str], int] = field(default_factory=dict)     # (kind, arch) -> entries
    dropped: dict[tuple[str, str], int] = field(default_factory=dict)
    uncovered: dict[str, int] = field(default_factory=dict)  # "9.0" -> containers without code

    @property
    def saved(self) -> int:
        return self.gpu_bytes - self.kept_bytes

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "gpu_bytes": self.gpu_bytes, "kept_bytes": self.kept_bytes,
                "saved_bytes": self.saved, "kept": _rows(self.kept),
                "dropped": _rows(self.dropped), "uncovered": dict(self.uncovered)}


def _rows(table: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    return [{"kind": k, "arch": a, "entries": n}
            for (k, a), n in sorted(table.items(), key=lambda i: (i[0][0], arch_key(i[0][1])))]


@dataclass
class PrunePlan:
    """The plan for every file of a source that carries GPU code.

    Attributes:
        source: what was read.
        targets: the compute capabilities asked for, as ``X.Y``.
        files: one :class:`FilePlan` per file with GPU code, in source order.
        problems: fatbinaries that could not be read whole (their files are planned from
            what could be read).

    Raises:
        Nothing: a value.
    """

    source: str
    targets: tuple[str, ...]
    files: list[FilePlan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def saved(self) -> int:
        return sum(f.saved for f in self.files)

    def as_dict(self) -> dict[str, Any]:
        """JSON data (described by ``cudasplit/schemas/gpu-plan.json``)."""
        return {"schema": PRUNE_SCHEMA, "source": self.source, "targets": list(self.targets),
                "saved_bytes": self.saved, "files": [f.as_dict() for f in self.files],
                "problems": list(self.problems)}

    def text_lines(self) -> list[str]:
        lines = [f"GPU code for {', '.join(self.targets)} in {self.source} (a plan only: no "
                 "file is changed)"]
        for plan in self.files:
            lines.append(f"{plan.path}: keeps {plural(plan.kept_bytes, 'byte')} of "
                         f"{plural(plan.gpu_bytes, 'byte')} of GPU code, saves "
                         f"{plural(plan.saved, 'byte')}")
            lines.append(f"  keep: {_short(plan.kept) or '-'}")
            lines.append(f"  drop: {_short(plan.dropped) or '-'}")
            lines += _both_lines(plan, self.targets)
            lines += [f"  no code for {t} in {plural(n, 'container')} (kernels built for "
                      "other GPUs only)" for t, n in plan.uncovered.items()]
        lines.append(f"saved in all: {plural(self.saved, 'byte')}")
        return lines + [f"problem: {p}" for p in self.problems]


def _both_lines(plan: FilePlan, targets: Sequence[str]) -> list[str]:
    """Why one architecture can be under both keep and drop: the choice is made per container
    (``--gpu-archs 8.9`` keeps ``sm_80`` where a container has no ``sm_86``, drops it where it
    has), so the file-wide lists overlap; say so with the counts, instead of leaving the two
    lists to contradict each other."""
    lines = []
    for key in sorted(plan.kept.keys() & plan.dropped.keys(),
                      key=lambda k: (k[0], arch_key(k[1]))):
        kind, arch = key
        gpus = "each listed GPU has" if len(targets) > 1 else "that GPU has"
        lines.append(f"  both: {kind} {arch}, {plan.kept[key]:,} kept and "
                     f"{plan.dropped[key]:,} dropped (chosen per container: kept where it is "
                     f"the best code for {' or '.join(targets)}, dropped where {gpus} better)")
    return lines


def _short(table: dict[tuple[str, str], int]) -> str:
    kinds: dict[str, list[str]] = {}
    for row in _rows(table):
        kinds.setdefault(row["kind"], []).append(row["arch"].removeprefix("sm_"))
    return " ".join(f"{k}:{','.join(a)}" for k, a in kinds.items())


def plan_file(path: str, file: str | Path, targets: tuple[tuple[int, int], ...],
              problems: list[str]) -> FilePlan | None:
    """The plan of one file (``path`` names it in the plan); None without GPU code."""
    plan = FilePlan(path)
    for entries in _containers(fatbin_entries(file, problems)):
        keep = _keep(entries, targets, plan)
        for entry in entries:
            plan.gpu_bytes += entry.stored
            table = plan.kept if id(entry) in keep else plan.dropped
            table[(entry.kind, entry.arch)] = table.get((entry.kind, entry.arch), 0) + 1
            plan.kept_bytes += entry.stored if id(entry) in keep else 0
    return plan if plan.gpu_bytes else None


def _keep(entries: list[FatbinEntry], targets: tuple[tuple[int, int], ...],
          plan: FilePlan) -> set[int]:
    keep: set[int] = set()
    for target in targets:
        chosen = _best(entries, target)
        if not chosen and any(e.kind in ("sass", "ptx") for e in entries):
            name = f"{target[0]}.{target[1]}"
            plan.uncovered[name] = plan.uncovered.get(name, 0) + 1
        keep.update(id(e) for e in chosen)
        keep.update(id(e) for e in entries
                    if e.kind not in ("sass", "ptx") and runs_on(e.kind, e.arch, target))
    return keep


def _containers(entries: Iterable[tuple[str, FatbinEntry]]) -> Iterator[list[FatbinEntry]]:
    """Entries grouped by container (consecutive entries of one object, section, container)."""
    group: list[FatbinEntry] = []
    key: tuple[str, str, int] | None = None
    for obj, entry in entries:
        here = (obj, entry.section, entry.container)
        if here != key and group:
            yield group
            group = []
        key = here
        group.append(entry)
    if group:
        yield group


def prune_plan(source: str | os.PathLike[str], gpu_archs: str | Sequence[str], *,
               jobs: int = 1, progress: ProgressCallback | None = None) -> PrunePlan:
    """What each library of ``source`` (a tarball, an unpacked tree or a split directory, or
    one file) would keep for the GPUs ``gpu_archs`` names, and the bytes it would save;
    ``progress`` hears of the bytes read (a tarball) or of every file (a directory).

    Raises:
        OptionsError: ``gpu_archs`` names no compute capability.
        SourceError: the source cannot be read (SourceNotFoundError: it does not exist).
    """
    targets = parse_capabilities(gpu_archs)
    plan = PrunePlan(str(source), tuple(f"{a}.{b}" for a, b in targets))
    root = Path(source)
    try:
        if not root.exists():
            raise SourceNotFoundError("no such file or directory", source=str(root))
        if root.is_dir():
            _plan_files(_tree(root), targets, plan, Tally(str(root), progress, unit="file"))
        elif _readable(root):
            _plan_files(_file(root), targets, plan, Tally(str(root), progress, unit="file"))
        else:
            _stream(root, targets, plan, jobs, Tally(str(root), progress))
    except CudasplitError:
        raise  # SourceNotFoundError is an OSError too: not to be wrapped again
    except OSError as exc:  # a file that vanished or cannot be read, while walking
        raise source_os_error(exc, str(getattr(exc, "filename", None) or root)) from exc
    return plan


def _plan_files(files: list[tuple[str, Path]], targets: tuple[tuple[int, int], ...],
                plan: PrunePlan, tally: Tally) -> None:
    for rel, full in files:
        found = plan_file(rel, full, targets, plan.problems)
        if found is not None:
            plan.files.append(found)
        tally.add(rel, full.stat().st_size)
    tally.done()


def _readable(path: Path) -> bool:
    """One ELF file or static archive given directly (not an archive to stream)."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    return head[:4] == b"\x7fELF" or head == AR_MAGIC


def _file(path: Path) -> list[tuple[str, Path]]:
    return [(path.name, path)]


def _tree(root: Path) -> list[tuple[str, Path]]:
    found = []
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            full = Path(dirpath) / name
            if not full.is_symlink() and full.is_file() and _readable(full):
                found.append((str(full.relative_to(root)), full))
    return found


def _stream(source: Path, targets: tuple[tuple[int, int], ...], plan: PrunePlan,
            jobs: int, tally: Tally) -> None:
    """A tarball: each ELF or static archive member spooled to one reused temporary file.
    The status line moves with the tar bytes read (every few MiB, within a large member too)
    and with every member."""
    opened = open_source(source, jobs=jobs)
    current = [""]
    meter = getattr(opened, "meter", None)
    if tally.progress is not None and callable(meter):
        meter(lambda total: tally.reach(current[0], total))
    with tempfile.NamedTemporaryFile(prefix="cudasplit-prune-") as spool:
        for member, stream in opened.members():
            current[0] = member.path
            head = member.head[:8] if member.head else b""
            if member.type is MemberType.FILE and stream is not None and (
                    head[:4] == b"\x7fELF" or head == AR_MAGIC):
                spool.seek(0)
                spool.truncate()
                shutil.copyfileobj(stream, spool, 1 << 20)
                spool.flush()
                found = plan_file(member.path, spool.name, targets, plan.problems)
                if found is not None:
                    plan.files.append(found)
            tally.add(member.path)
    tally.done()
