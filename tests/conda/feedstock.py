"""An independent model of what conda-forge's recipes package, to check the profile against.

Two steps, each our own expression of the facts learnt from the feedstocks (the commits are in
``rules/profiles/conda-forge/recipes/*.toml``; no recipe text is here):

1. :func:`install_prefix` lays an archive's members out in a ``$PREFIX`` on disk the way the
   feedstock's ``build.sh`` does (empty files and real symlinks are enough);
2. :func:`select` applies an output's ``files:`` entries the way conda-build does: a path that
   exists is taken (a directory: everything below it, links to directories included), anything
   else is a Python ``glob(recursive=True)``, whose directory matches take nothing (conda-build's
   ``expand_globs`` returns the directory itself; its files are then "already in the prefix"
   and stay out: the recipe's ``bin/*`` takes ``bin/crt`` from nobody);
3. :func:`packaged` says what each selected path is in the package: a file, or a link with the
   text conda-build's ``check_symlinks`` leaves (a link whose text does not start with ``.`` is
   rewritten to the relative path of its fully resolved target; ``ln -s $PREFIX/...`` links
   become relative the same way).

The tests compare these with the paths and link texts of the packages the rules make.
"""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TARGETS = {"linux-x86_64": "x86_64-linux", "linux-sbsa": "sbsa-linux",
           "linux-aarch64": "aarch64-linux"}


@dataclass(frozen=True)
class Member:
    """An archive member below the top directory: a file, or a symlink with its text."""

    path: str
    link: str | None = None


@dataclass(frozen=True)
class Layout:
    """How one feedstock's build.sh lays out an archive (see :data:`LAYOUTS`)."""

    style: str                        # "targets" | "nvcc-impl" | "cccl" | "compat"
    lib_links: tuple[str, ...] = ()   # lib/ globs linked from $PREFIX/lib (targets style)
    others: str | None = None         # targets style: other top-level entries go here
    pkgconfig: bool = False           # pkg-config/ -> $PREFIX/lib/pkgconfig


# Per redist archive: cuda-cudart links archives, libraries and stubs, the others libraries
# only; every other top-level entry goes below targets/<triple>/<its recipe's name>/.
LAYOUTS = {
    "cuda_cudart": Layout("targets", ("*.a*", "*.so*", "stubs/*.so*"), "cuda-cudart-split",
                          True),
    "cuda_nvrtc": Layout("targets", ("*.so*",), "cuda-nvrtc-split", True),
    "libcublas": Layout("targets", ("*.so*",), "libcublas", True),
    "cuda_cupti": Layout("targets", ("*.so*",), "cuda-cupti"),
    "cuda_nvcc": Layout("nvcc-impl"), "cuda_crt": Layout("nvcc-impl"),
    "libnvvm": Layout("nvcc-impl"), "libnvptxcompiler": Layout("nvcc-impl"),
    "cuda_cccl": Layout("cccl"), "cccl": Layout("cccl"),
    "cuda_compat": Layout("compat"), "nvidia_driver": Layout("compat"),
}


def install_prefix(pname: str, members: Iterable[Member], platform: str, prefix: Path) -> None:
    """``members`` laid out in ``prefix`` as the feedstock of ``pname`` does."""
    layout, triple = LAYOUTS[pname], TARGETS[platform]
    tree = {m.path: m for m in members}
    if layout.style != "nvcc-impl" or pname != "libnvvm":
        tree = {_moved(p, "lib64/", "lib/"): Member(_moved(p, "lib64/", "lib/"), m.link)
                for p, m in tree.items()}
    if layout.style == "targets":
        _targets(tree, layout, triple, prefix)
    elif layout.style == "nvcc-impl":
        _nvcc_impl(tree, triple, prefix)
    elif layout.style == "cccl":
        _copy(tree, ("lib/", "include/"), f"targets/{triple}/", prefix)
    else:
        _compat(tree, prefix)


def _moved(path: str, old: str, new: str) -> str:
    return new + path[len(old):] if path.startswith(old) else path


def _place(prefix: Path, path: str, link: str | None) -> None:
    where = prefix / path
    where.parent.mkdir(parents=True, exist_ok=True)
    if link is None:
        where.touch()
    else:
        os.symlink(link, where)


def _link_to(prefix: Path, path: str, target: str) -> None:
    """``ln -s $PREFIX/target $PREFIX/path`` made relative the way conda-build makes it: to
    the fully resolved target."""
    real = os.path.realpath(prefix / target)
    _place(prefix, path, os.path.relpath(real, (prefix / path).parent))


def _copy(tree: dict[str, Member], dirs: tuple[str, ...], to: str, prefix: Path) -> None:
    for path, member in tree.items():
        if path.startswith(dirs):
            _place(prefix, to + path, member.link)


def _targets(tree: dict[str, Member], layout: Layout, triple: str, prefix: Path) -> None:
    """cuda-cudart, cuda-nvrtc, libcublas, cuda-cupti: lib/ and include/ below targets/,
    $PREFIX/lib links, pkg-config moved, everything else below targets/<triple>/<name>/."""
    target = f"targets/{triple}/"
    for path, member in tree.items():
        if layout.pkgconfig and path.startswith("pkg-config/"):
            _place(prefix, "lib/pkgconfig/" + path[len("pkg-config/"):], member.link)
        elif path.startswith(("lib/", "include/")):
            _place(prefix, target + path, member.link)
        elif layout.others is not None:
            _place(prefix, f"{target}{layout.others}/{path}", member.link)
    for path in sorted(tree):
        rest = path[len("lib/"):]
        if path.startswith("lib/") and any(glob.fnmatch.fnmatchcase(rest, g) and
                                           rest.count("/") == g.count("/")
                                           for g in layout.lib_links):
            _link_to(prefix, path, target + path)


def _nvcc_impl(tree: dict[str, Member], triple: str, prefix: Path) -> None:
    """The nvcc-impl recipe, per archive: bin/ stays (targets/<triple>/bin/nvcc links to it),
    lib/ and include/ below targets/ (lib/ archives linked from $PREFIX/lib, lib64 -> lib),
    nvvm/ stays (targets/<triple>/nvvm links to it), the rest below targets/; no LICENSE."""
    target = f"targets/{triple}/"
    tops = {path.split("/")[0] for path in tree}
    for path, member in tree.items():
        if path == "LICENSE":
            continue
        if path.startswith(("bin/", "nvvm/")):
            _place(prefix, path, member.link)
        else:
            _place(prefix, target + path, member.link)
    if "bin" in tops:
        _link_to(prefix, f"{target}bin/nvcc", "bin/nvcc")
    if "lib" in tops:
        for path in sorted(tree):
            if path.startswith("lib/") and "/" not in path[4:] and ".a" in path[4:]:
                _link_to(prefix, path, target + path)
        _link_to(prefix, f"{target}lib64", f"{target}lib")
    if "nvvm" in tops:
        _link_to(prefix, f"{target}nvvm", "nvvm")


def _compat(tree: dict[str, Member], prefix: Path) -> None:
    """cuda-compat: four driver libraries copied to cuda-compat/, with the links it makes."""
    source = "compat/" if any(p.startswith("compat/") for p in tree) else "lib/"
    links = {"libcuda": ("1", ""), "libnvidia-nvvm": ("4", ""),
             "libnvidia-ptxjitcompiler": ("1",), "libcudadebugger": ("1",)}
    for path, member in tree.items():
        name = posixpath.basename(path)
        stem, _, version = name.partition(".so.")
        if not path.startswith(source) or stem not in links or member.link is not None \
                or version.count(".") < 1:
            continue
        _place(prefix, f"cuda-compat/{name}", None)
        previous = name
        for short in links[stem]:
            alias = f"{stem}.so.{short}" if short else f"{stem}.so"
            _place(prefix, f"cuda-compat/{alias}", previous)
            previous = alias


def select(prefix: Path, entries: Iterable[str]) -> set[str]:
    """What an output's ``files:`` entries take from ``prefix`` (conda-build's rules)."""
    taken: set[str] = set()
    for entry in entries:
        path = prefix / entry
        if path.is_file() or path.is_symlink():
            taken.add(entry)
        elif path.is_dir():
            taken |= _walk(prefix, path)
        else:
            for hit in sorted(glob.glob(str(path), recursive=True)):
                if os.path.isfile(hit) or os.path.islink(hit):
                    taken.add(os.path.relpath(hit, prefix))
    return taken


def _walk(prefix: Path, directory: Path) -> set[str]:
    found = set()
    for root, dirs, files in os.walk(directory):
        for name in files:
            found.add(os.path.relpath(os.path.join(root, name), prefix))
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                found.add(os.path.relpath(os.path.join(root, name), prefix))
    return found


def packaged(prefix: Path, paths: Iterable[str]) -> dict[str, str | None]:
    """path -> the link text conda-build packs (``None``: a file), for ``paths`` of ``prefix``."""
    real_prefix = os.path.realpath(prefix)
    found: dict[str, str | None] = {}
    for path in paths:
        full = os.path.join(real_prefix, path)
        if not os.path.islink(full):
            found[path] = None
            continue
        text = os.readlink(full)
        real = os.path.realpath(full)
        if real.startswith(real_prefix + os.sep):
            relative = os.path.relpath(real, os.path.dirname(full))
            if not text.startswith(".") and text != relative:
                text = relative
        found[path] = text
    return found
