"""One CUDA toolkit prefix in NVIDIA's layout, made of symlinks into split outputs.

Split outputs scatter a toolkit over many roots; CMake (``CUDAToolkit_ROOT`` is one path),
meson, TVM and cc-rs want NVIDIA's own layout::

    bin/  nvvm/  include -> targets/<host>/include  lib64 -> targets/<host>/lib
    targets/<x86_64-linux|sbsa-linux|aarch64-linux>/{include,lib,lib/stubs}

:func:`toolkit_view` lays that out. Where a package's files go follows from what it holds:
``lib/`` ELF files name its target (x86-64 -> ``x86_64-linux``, AArch64 -> ``sbsa-linux``, or
``aarch64-linux`` for Jetson); packages without any (headers: cuda_crt, cuda_cccl; nvcc's own
headers) serve every target; libnvvm (``libdevice/``) goes to ``nvvm/``. A directory only one
output provides is one symlink; shared directories become real ones, merged entry by entry.
Two outputs that provide one path with different bytes are an error naming both.

``bin/nvcc.profile`` is written as NVIDIA's (``TOP = $(_HERE_)/..``, ``$(_TARGET_DIR_)``
kept): nvcc takes ``_HERE_`` from the path it was run by, so the prefix's nvcc reads this
profile and picks ``targets/sbsa-linux`` when ``-ccbin`` is an aarch64 compiler and
``targets/x86_64-linux`` otherwise, as NVIDIA's own installation does.
"""

from __future__ import annotations

import filecmp
import os
import platform as _platform
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudasplit._argcheck import checked
from cudasplit._elf.read import EM_AARCH64, EM_PPC64, EM_X86_64, elf_machine, machine_of_tree
from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.toolkit.write import write_view
from cudasplit._run import refuse_overlap
from cudasplit.errors import ToolkitError

__all__ = ["ToolkitView", "toolkit_view"]

ARM_DIRS = ("sbsa-linux", "aarch64-linux")
_SKIP_TOP = frozenset({"nix-support", "pkg-config"})


TOOLKIT_SCHEMA = 1  # the "schema" of as_dict: toolkit --json (cudasplit/schemas/toolkit.json)

@dataclass(frozen=True, slots=True)
class ToolkitView:
    """What :func:`toolkit_view` laid out (or, with ``dry_run``, would lay out).

    Attributes:
        root: the prefix.
        host: the ``targets/<dir>`` of the machine nvcc runs on.
        targets: every ``targets/<dir>`` in the prefix.
        links: (path in the prefix, absolute target) of every symlink.
        written: files the view itself wrote (``bin/nvcc.profile``).
        skipped: (source path, why it is not in the prefix).

    Raises:
        Nothing: a value.
    """

    root: str
    host: str                                # targets/<dir> of the machine nvcc runs on
    targets: tuple[str, ...]                 # every targets/<dir> in the prefix
    links: tuple[tuple[str, str], ...]       # (path in the prefix, absolute target)
    written: tuple[str, ...] = ()            # files the view itself wrote (bin/nvcc.profile)
    skipped: tuple[tuple[str, str], ...] = ()  # (source path, why it is not in the prefix)

    def as_dict(self) -> dict[str, object]:
        return {"schema": TOOLKIT_SCHEMA, "root": self.root, "host": self.host,
                "targets": list(self.targets),
                "links": [list(pair) for pair in self.links], "written": list(self.written),
                "skipped": [list(pair) for pair in self.skipped]}


@dataclass(slots=True)
class _Split:
    """One split's outputs and what its files say about the machines it serves."""

    directory: Path
    outputs: list[Path]
    lib_machine: int | None = None    # ELF machine of lib/ files: the package's target
    nvvm: bool = False                # libnvvm: every output goes under nvvm/


@dataclass(slots=True)
class _Plan:
    entries: dict[str, Path | None] = field(default_factory=dict)  # None: a merged real dir
    skipped: list[tuple[str, str]] = field(default_factory=list)


@checked
def toolkit_view(split_dirs: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str],
                 *, packages: Sequence[Sequence[str | os.PathLike[str]]] = (),
                 arm_target: str = "sbsa-linux", overwrite: bool = False,
                 dry_run: bool = False) -> ToolkitView:
    """Lay out ``dest`` as one toolkit prefix over the split outputs in ``split_dirs`` (each
    what ``split -o`` wrote: ``DIR/<output>/...``, or a batch: ``DIR/<pname>-.../<output>``)
    and ``packages`` (each one package's output roots, as Nix has them: one store path each).

    ``dest`` is written only when the whole plan holds (staged, then renamed into place).

    Args:
        split_dirs: what ``split -o`` wrote, each ``DIR/<output>/...`` or a batch of them.
        dest: the prefix to lay out.
        packages: each one package's output roots, as Nix has them (one store path each).
        arm_target: the ``targets/`` dir of AArch64 packages (``sbsa-linux``;
            ``aarch64-linux`` for Jetson's L4T builds).
        overwrite: replace an existing ``dest``.
        dry_run: plan only; write nothing.

    Returns:
        The :class:`ToolkitView`: the prefix, its targets and every link.

    Raises:
        ToolkitError: a directory that is no split output, two outputs providing one path
            with different bytes, an unknown ``arm_target``, or ``dest`` exists without
            ``overwrite``.
    """
    if arm_target not in ARM_DIRS:
        raise ToolkitError(f"arm_target must be one of {', '.join(ARM_DIRS)}, "
                           f"not {arm_target!r}")
    if not dry_run:
        _refuse_overlap(Path(dest), split_dirs, packages)
    splits = [s for d in split_dirs for s in _splits(Path(d).absolute())]
    splits += [_package(group) for group in packages if group]
    if not splits:
        raise ToolkitError("no split outputs given")
    for split in splits:
        _classify(split)
    host = _target_dir(_host_machine(splits), arm_target)
    targets = sorted({host} | {_target_dir(s.lib_machine, arm_target) for s in splits
                               if s.lib_machine is not None})
    plan = _Plan()
    for split in splits:
        _place_split(plan, split, host, targets, arm_target)
    _explode(plan, "bin")  # a real bin/: the prefix writes its own nvcc.profile there
    written = ("bin/nvcc.profile",) if "bin/nvcc" in plan.entries else ()
    links = tuple((path, str(src)) for path, src in sorted(plan.entries.items())
                  if src is not None and path not in written)
    view = ToolkitView(str(Path(dest).absolute()), f"targets/{host}",
                       tuple(f"targets/{t}" for t in targets), links, written,
                       tuple(plan.skipped))
    if not dry_run:
        write_view(Path(dest), plan.entries, view.written, view.host, overwrite=overwrite)
    return view


def _refuse_overlap(dest: Path, split_dirs: Sequence[str | os.PathLike[str]],
                    packages: Sequence[Sequence[str | os.PathLike[str]]]) -> None:
    """``dest`` (replaced whole by ``overwrite``) and its stage beside it may not be, be
    inside, or contain a split directory or an output root it links to."""
    refuse_overlap([dest, dest.with_name(f".{dest.name}.cudasplit-*")],
                   [*split_dirs, *(root for group in packages for root in group)])


# -- reading the splits ------------------------------------------------------------------------


def _splits(directory: Path) -> Iterator[_Split]:
    """The split(s) in ``directory``: its outputs, or (a batch) each child's."""
    if not directory.is_dir():
        raise ToolkitError(f"{directory}: not a directory (want what split -o wrote)")
    children = sorted(p for p in directory.iterdir() if p.is_dir() and p.name[0] != ".")
    outputs = [p for p in children if p.name in OUTPUT_NAMES]
    if outputs:
        yield _Split(directory, outputs)
        return
    nested = [c for c in children if any((c / name).is_dir() for name in OUTPUT_NAMES)]
    if not nested:
        raise ToolkitError(f"{directory}: no split outputs in it (want DIR/<output>/..., "
                           f"outputs: {', '.join(OUTPUT_NAMES)})")
    for child in nested:
        yield from _splits(child)


def _package(roots: Sequence[str | os.PathLike[str]]) -> _Split:
    """One package's outputs given one by one (Nix store paths)."""
    outputs = [Path(r).absolute() for r in roots]
    for output in outputs:
        if not output.is_dir():
            raise ToolkitError(f"{output}: not a directory (want an output root)")
    return _Split(outputs[0], outputs)


def _classify(split: _Split) -> None:
    split.nvvm = any((o / "libdevice").is_dir() for o in split.outputs)
    if split.nvvm:
        return
    for output in split.outputs:
        for _path, machine in machine_of_tree(output / "lib"):
            split.lib_machine = machine
            return


def _host_machine(splits: Iterable[_Split]) -> int:
    """The machine of ``bin/nvcc`` when a split has one, else this machine's."""
    for split in splits:
        for output in split.outputs:
            nvcc = output / "bin" / "nvcc"
            if nvcc.is_file():
                machine = elf_machine(nvcc)
                if machine is not None:
                    return machine
    return {"x86_64": EM_X86_64, "aarch64": EM_AARCH64,
            "ppc64le": EM_PPC64}.get(_platform.machine(), EM_X86_64)


def _target_dir(machine: int | None, arm_target: str) -> str:
    if machine == EM_AARCH64:
        return arm_target
    if machine == EM_PPC64:
        return "ppc64le-linux"
    return "x86_64-linux"


# -- the plan ----------------------------------------------------------------------------------


def _place_split(plan: _Plan, split: _Split, host: str, targets: Sequence[str],
                 arm_target: str) -> None:
    own = [] if split.lib_machine is None else [_target_dir(split.lib_machine, arm_target)]
    for output in split.outputs:
        for entry in sorted(output.iterdir()):
            name = entry.name
            if name in _SKIP_TOP or not entry.is_dir():
                plan.skipped.append((str(entry), "not part of a toolkit prefix"))
            elif split.nvvm:
                _add(plan, f"nvvm/{name}", entry)
            elif name == "bin" and own and own[0] != host:
                plan.skipped.append((str(entry), f"tools of a {own[0]} package: they do not "
                                     f"run on the build machine ({host})"))
            elif name in ("bin", "nvvm"):
                _add(plan, name, entry)
            elif name in ("include", "lib"):
                for target in own or (targets if name == "include" else [host]):
                    _add(plan, f"targets/{target}/{name}", entry)
            else:
                _add(plan, name, entry)


def _add(plan: _Plan, path: str, src: Path) -> None:
    """``path`` in the prefix comes from ``src``; directories merge, equal files agree."""
    parts = path.split("/")
    for i in range(1, len(parts)):  # an ancestor laid out as one link becomes a real dir
        ancestor = "/".join(parts[:i])
        above = plan.entries.get(ancestor)
        if above is not None:
            if not above.is_dir():
                raise _conflict(ancestor, above, src)
            _explode(plan, ancestor)
    current = plan.entries.get(path, _MISSING)
    if current is _MISSING and not any(k.startswith(path + "/") for k in plan.entries):
        plan.entries[path] = src
        return
    if current is _MISSING or current is None:  # a real directory already
        if not src.is_dir():
            raise _conflict(path, _first_source(plan, path), src)
        plan.entries[path] = None
        _add_children(plan, path, src)
        return
    assert isinstance(current, Path)
    if os.path.realpath(current) == os.path.realpath(src):
        return
    if current.is_dir() and src.is_dir():
        plan.entries[path] = None
        _add_children(plan, path, current)
        _add_children(plan, path, src)
        return
    if current.is_file() and src.is_file() and filecmp.cmp(current, src, shallow=False):
        return
    raise _conflict(path, current, src)


_MISSING = Path("\0missing")


def _add_children(plan: _Plan, path: str, src: Path) -> None:
    _refuse_loop(src)
    try:
        children = sorted(src.iterdir())
    except OSError as exc:
        raise ToolkitError(f"{src}: cannot read ({exc.strerror})") from exc
    for child in children:
        _add(plan, f"{path}/{child.name}", child)


def _refuse_loop(src: Path) -> None:
    """A directory merged entry by entry must not be one of the directories it sits in
    (``include/cccl -> .``): walking it would go round until the kernel's ELOOP, and the
    error then read as two outputs disagreeing. Named by its first link on the way."""
    real = os.path.realpath(src)
    for above in src.parents:
        if os.path.realpath(above) == real:
            link = next((p for p in (src, *src.parents) if p.is_symlink()), src)
            raise ToolkitError(f"{link}: a symlink loop ({link} -> {os.readlink(link)} leads "
                               f"back to {above}); refused")


def _explode(plan: _Plan, path: str) -> None:
    """Make ``path`` a real directory of per-entry links (it was one directory link)."""
    src = plan.entries.get(path)
    if src is not None and src.is_dir():
        plan.entries[path] = None
        _add_children(plan, path, src)


def _first_source(plan: _Plan, path: str) -> Path:
    prefix = path + "/"
    for key, value in sorted(plan.entries.items()):
        if key.startswith(prefix) and value is not None:
            return value
    return Path(path)


def _conflict(path: str, first: Path, second: Path) -> ToolkitError:
    return ToolkitError(f"toolkit view: {path} is provided by both {first} and {second}, "
                        "with different contents")
