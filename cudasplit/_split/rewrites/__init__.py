"""Text rewrites behind one registry: ``transform = "<name>"`` in a rule -> a pure function.

Each rewrite gets the member's text and a frozen :class:`RewriteContext` (rule set, gates, the
layout) and returns a :class:`Rewritten` value: the new text, the warnings it has for the
report, and an unversioned alias link to plan (``cuda.pc -> cuda-12.9.pc``). Nothing here
writes or reports; the split loop does both, so a dry run gets the same warnings.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from cudasplit._layout import Layout
from cudasplit._model import Kind
from cudasplit._report import Problem
from cudasplit._rulebook import RuleSet, TextEdit, Where, aliases
from cudasplit._split.classify import fallback_output
from cudasplit._split.rewrites.nvccprofile import (
    PREFIX_PROFILE,
    ProfileExtras,
    rewrite_nvcc_profile,
)
from cudasplit._split.rewrites.pkgconfig import (
    MAX_PC_SIZE,
    PcExtras,
    PcRoots,
    apply_extras,
    major_minor,
    rewrite_pc,
    unversioned_alias,
)
from cudasplit._split.rewrites.textedits import apply_text_edits
from cudasplit.errors import SourceError

__all__ = [
    "PREFIX_PROFILE",
    "REWRITES",
    "ProfileExtras",
    "Rewrite",
    "RewriteContext",
    "package_root",
    "read_small_text",
    "rewrite_nvcc_profile",
    "rewrite_text_edits",
    "text_edits_for",
]


@dataclass(frozen=True, slots=True)
class RewriteContext:
    ruleset: RuleSet
    where: Where
    allowed: frozenset[str] | None
    layout: Layout
    package_roots: tuple[tuple[str, str], ...]   # --package-root
    driver_lib_dir: str | None
    dest_of: Callable[[str], str | None]         # archive path -> output path (normalised)

    def root(self, output: str) -> str:
        """Final root of ``output``, after the fallback a missing output takes."""
        return self.layout.root(fallback_output(output, self.allowed))


@dataclass(frozen=True, slots=True)
class Rewritten:
    text: str
    warnings: tuple[Problem, ...] = ()
    alias: str | None = None
    problems: tuple[Problem, ...] = ()


# ctx, archive path, output, dest, text
Rewrite = Callable[[RewriteContext, str, str, str, str], Rewritten]


def read_small_text(stream: BinaryIO, source: str, member: str) -> str:
    """Text members we rewrite are small; refuse a huge one rather than buffer it."""
    data = stream.read(MAX_PC_SIZE + 1)
    if len(data) > MAX_PC_SIZE:
        raise SourceError("text file to rewrite is larger than 1 MiB", source=source,
                          member=member)
    return data.decode("utf-8", "surrogateescape")


def package_root(roots: Mapping[str, str], pname: str, output: str) -> str | None:
    """``--package-root PNAME.OUTPUT=DIR`` for a split package, else ``PNAME=DIR``; a renamed
    package answers to either name (cuda_cccl / cccl, :mod:`cudasplit._rulebook.renames`)."""
    for name in aliases(pname):
        root = roots.get(f"{name}.{output}") or roots.get(name)
        if root is not None:
            return root
    return None


# -- pkg-config ------------------------------------------------------------------------------


def rewrite_pkgconfig(ctx: RewriteContext, path: str, output: str, dest: str,
                      text: str) -> Rewritten:
    name = posixpath.basename(dest)
    extras, warnings = _pc_extras(ctx, name, text)
    text = apply_extras(rewrite_pc(text, _pc_roots(ctx, name, text)), extras)
    return Rewritten(text, warnings, unversioned_alias(name))


def _pc_roots(ctx: RewriteContext, name: str, text: str) -> PcRoots:
    package = ctx.ruleset.package
    edits = [e for e in package.pkgconfig_edits if e.matches(name, ctx.where, text)]
    libdir = ctx.root("lib") + "/lib"
    if any(glob.matches(name) for glob in package.pkgconfig_stubs_libdir):
        libdir = ctx.root("stubs") + "/lib/stubs"
    for edit in edits:
        if edit.libdir_output is not None:
            # nvml: libdir=<stubs>/lib; its Libs line appends /stubs itself.
            libdir = ctx.root(edit.libdir_output) + "/lib"
    driver = ctx.driver_lib_dir
    wants_rpath = package.pkgconfig_driver_rpath or any(e.driver_rpath for e in edits)
    return PcRoots(
        cudaroot=ctx.root("dev"), libdir=libdir, includedir=ctx.root("include") + "/include",
        extra_libs=f"-Wl,-rpath,{driver}" if wants_rpath and driver else "")


def _pc_extras(ctx: RewriteContext, name: str, text: str
               ) -> tuple[PcExtras, tuple[Problem, ...]]:
    """Requires:, replacements, cudaroot removal and extra Cflags from pkgconfig_edits."""
    edits = [e for e in ctx.ruleset.package.pkgconfig_edits if e.matches(name, ctx.where, text)]
    release = major_minor(name) or ctx.where.cuda_version
    requires = tuple(f"{r}-{release}" if release else r for e in edits for r in e.requires) \
        + tuple(m for e in edits for m in e.requires_modules)
    roots = dict(ctx.package_roots)
    cflags, warnings = [], []
    for pname in (p for e in edits for p in e.cflags_packages):
        root = package_root(roots, pname, "include")
        if root is not None:
            cflags.append(f"-I{root}/include")
        else:
            warnings.append(Problem("package-root-missing", name, f"Cflags wants {pname}'s "
                                    f"include dir: give its root (package_roots {pname}=DIR)"))
    extras = PcExtras(requires=requires, replace=tuple(pair for e in edits for pair in e.replace),
                      drop_cudaroot=any(e.drop_cudaroot for e in edits), cflags=" ".join(cflags))
    return extras, tuple(warnings)


# -- nvcc.profile ----------------------------------------------------------------------------


def rewrite_profile(ctx: RewriteContext, path: str, output: str, dest: str,
                    text: str) -> Rewritten:
    """nvcc finds headers, libraries and NVVM through ``$(TOP)``: point each at its output."""
    nvvm = ctx.ruleset.classify(ctx.dest_of("nvvm/bin/cicc") or "nvvm/bin/cicc",
                                Kind.ELF_EXEC, ctx.allowed).output or "out"
    roots = {"include": ctx.root("include"), "lib": ctx.root("lib"),
             "stubs": ctx.root("stubs"), "nvvm": ctx.root(nvvm), "bin": ctx.root(output)}
    package = ctx.ruleset.package
    given = dict(ctx.package_roots)
    cccl = package_root(given, "cuda_cccl", "include") if package.nvcc_includes else None
    warnings: list[Problem] = []
    if cccl is not None and not Path(cccl).is_dir():
        warnings.append(Problem("package-root-missing", path, f"nvcc.profile: the cccl root "
                                f"{cccl} does not exist; nvcc's own include/cccl stays"))
    elif cccl is not None:
        roots["cccl"] = cccl

    def dirs(pnames: tuple[str, ...], out: str, subdirs: tuple[str, ...]) -> tuple[str, ...]:
        found: list[str] = []
        for pname in pnames:
            root = package_root(given, pname, out)
            if root is None or not Path(root).is_dir():
                what = (f"no root for {pname} (package_roots)" if root is None else
                        f"the root of {pname} ({root}, package_roots) does not exist")
                warnings.append(Problem("package-root-missing", path, f"nvcc.profile: {what}; "
                                        f"its {out} directory is not searched"))
                continue
            for sub in subdirs:
                if Path(root, sub).is_dir():
                    found.append(f"{root}/{sub}")
                else:  # a split package's other output may hold it (lib/stubs): not fatal
                    warnings.append(Problem("package-root-incomplete", path,
                                            f"nvcc.profile: {root}/{sub} ({pname}'s {out}) "
                                            "does not exist; not searched"))
        return tuple(found)

    extras = ProfileExtras(
        includes=dirs(package.nvcc_includes, "include", ("include",)),
        libraries=dirs(package.nvcc_libraries, "lib", ("lib",))
        + dirs(package.nvcc_libraries, "static", ("lib",))
        + dirs(package.nvcc_libraries, "stubs", ("lib/stubs",)))
    extras = replace(extras, libraries=tuple(dict.fromkeys(extras.libraries)))
    return Rewritten(rewrite_nvcc_profile(text, roots, extras), tuple(warnings))


# -- the package table's text_edits (libcudss's CMake configs; textedits.py) ------------------


def text_edits_for(ctx: RewriteContext, dest: str) -> list[TextEdit]:
    return [e for e in ctx.ruleset.package.text_edits if e.matches(dest, ctx.where)]


def rewrite_text_edits(ctx: RewriteContext, path: str, output: str, dest: str,
                       text: str) -> Rewritten:
    done = apply_text_edits(text, text_edits_for(ctx, dest), ctx.root, dict(ctx.package_roots))
    problems = [Problem("text-edit-unmatched", path, f"{old!r} not found (the package "
                        "table's text_edits; Nixpkgs' --replace-fail fails here)")
                for old in done.unmatched]
    problems += [Problem("package-root-missing", path, f"a text edit names @{name}@: give "
                         f"its root (package_roots {name.split('.')[0]}=DIR); edit left undone")
                 for name in done.missing]
    problems += [Problem("text-edit-leftover", path, f"{text!r} is still there after the "
                         "package table's text_edits (an unexpected use; Nixpkgs fails here)")
                 for text in done.leftover]
    return Rewritten(done.text, problems=tuple(problems))


# -- profiles whose outputs share one install prefix (conda-forge) ----------------------------


def rewrite_pkgconfig_prefix(ctx: RewriteContext, path: str, output: str, dest: str,
                             text: str) -> Rewritten:
    """``cudaroot=`` names the one prefix every output is installed into (conda's placeholder,
    replaced at install time); ``libdir``/``includedir`` stay NVIDIA's, relative to it
    (``${cudaroot}/targets/x86_64-linux/lib``)."""
    prefix = ctx.ruleset.profile.install_prefix or ctx.layout.root(output)
    lines = [f"cudaroot={prefix}" if line.partition("=")[0].strip() == "cudaroot"
             and "=" in line else line for line in text.splitlines()]
    return Rewritten("\n".join(lines) + "\n")


def rewrite_prefix_profile(ctx: RewriteContext, path: str, output: str, dest: str,
                           text: str) -> Rewritten:
    """NVIDIA's own profile (``TOP = $(_HERE_)/..``, ``$(TOP)/$(_TARGET_DIR_)``), as `cudasplit
    toolkit` writes it: nvcc in a prefix that holds ``nvvm/`` and ``targets/<dir>/`` picks the
    target's directory itself (``-ccbin aarch64-linux-gnu-g++`` -> ``targets/sbsa-linux``)."""
    return Rewritten(PREFIX_PROFILE)


# Rule transforms by name; text_edits apply by the member's path (see the split loop).
REWRITES: Mapping[str, Rewrite] = {"pkgconfig": rewrite_pkgconfig,
                                   "nvcc-profile": rewrite_profile,
                                   "pkgconfig-prefix": rewrite_pkgconfig_prefix,
                                   "nvcc-profile-prefix": rewrite_prefix_profile}
