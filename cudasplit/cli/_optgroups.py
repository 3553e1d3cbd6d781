"""Option groups several commands share, and :class:`SplitOptions` built from their values.

A command has a group by decorating itself with it (``@COMMON``) and builds its options with
``split_options(kw, COMMON, ...)`` naming the same groups. Nothing is guessed: a group named
there whose options the command lacks, or a group option the command has but nobody reads, is
an :class:`OptionGroupError` (a bug in the command, caught by its tests), never a silent default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

# Only what the options' help shows is imported here: ``cudasplit split --help`` loads no
# more than this. What the values become (SplitOptions and friends) loads when a command runs.
from .. import DEFAULT_DRIVER_LINK, DEFAULT_MAX_MEMBERS, OUTPUT_NAMES, CudasplitError
from ._terminal import warn
from ._text import flag_named

if TYPE_CHECKING:
    from .. import SplitOptions

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Any], Any]


class OptionGroupError(Exception):
    """A command builds options from a group it does not have, or ignores one it has: a
    programming error, deliberately not a :class:`CudasplitError` (no user can cause it)."""


@dataclass(frozen=True)
class OptionGroup:
    """Options that travel together; ``convert`` turns their values into SplitOptions fields."""

    name: str
    options: Sequence[Decorator]
    convert: Callable[[Mapping[str, Any]], dict[str, Any]]
    names: frozenset[str] = field(init=False)
    params: tuple[click.Parameter, ...] = field(init=False)

    def __post_init__(self) -> None:
        # The parameters, from click itself: the options applied to a throwaway function.
        def probe() -> None:
            """Never called."""

        for decorator in self.options:
            decorator(probe)
        params: list[click.Parameter] = getattr(probe, "__click_params__", [])
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "names", frozenset(str(p.name) for p in params))

    def found_in(self, command: click.Command) -> set[str]:
        """The names of this group's options that ``command`` has (same name, flags, help:
        ``ldd --driver-link`` is another option than the patch group's)."""
        mine = {_signature(p) for p in self.params}
        return {str(p.name) for p in command.params if _signature(p) in mine}

    def __call__(self, func: F) -> F:
        for decorator in reversed(self.options):
            func = decorator(func)
        return func


def _signature(param: click.Parameter) -> tuple[str, tuple[str, ...], str]:
    return str(param.name), tuple(param.opts), str(getattr(param, "help", ""))


def split_options(kw: dict[str, Any], *groups: OptionGroup, **fields: Any) -> SplitOptions:
    """SplitOptions from the values of ``groups`` in ``kw`` (every one of the command's group
    options, nothing else) plus the ``fields`` the command sets from its own options."""
    from .. import OptionsError, SplitOptions

    values: dict[str, Any] = {}
    for group in groups:
        missing = group.names - kw.keys()
        if missing:
            raise OptionGroupError(f"options of group {group.name!r} asked for, but the command "
                                   f"does not declare {', '.join(sorted(missing))}")
    unread = kw.keys() - {name for group in groups for name in group.names}
    if unread:
        raise OptionGroupError(f"the command's options {', '.join(sorted(unread))} are in no "
                               "group it builds options from")
    try:
        for group in groups:
            values.update(group.convert({name: kw[name] for name in group.names}))
        return SplitOptions(**values, **fields)
    except OptionsError as exc:
        raise type(exc)(flag_named(str(exc))) from exc


def _outputs(value: str | None, profile: str = "default") -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    if profile != "default":  # another profile's packages name their outputs: checked then
        return names
    unknown = [n for n in names if n not in OUTPUT_NAMES]
    if unknown:
        raise click.BadParameter(f"unknown output(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(OUTPUT_NAMES)}", param_hint="--outputs")
    return names


_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(value: str, hint: str = "--max-size") -> int:
    """``--max-size``, ``--memory-limit``: ``123``, ``64G``, ``512MiB`` -> bytes."""
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = (text[:-1], text[-1]) if text[-1:].isalpha() else (text, "")
    if suffix not in _SIZE_SUFFIXES or not number.isdigit():
        raise click.BadParameter(f"{value!r} is not a size (e.g. 8589934592, 512M, 64G)",
                                 param_hint=hint)
    return int(number) * _SIZE_SUFFIXES[suffix]


size_option = _size
"""A SIZE option's value in bytes (``size_option("512M", "--memory-limit")``)."""


def _platform(word: str | None, cuda_version: str | None) -> str | None:
    """An unknown word is the library's one-line OptionsError (exit 2)."""
    from .. import platform_name

    return None if word is None else platform_name(word, cuda_version)


def _classification(v: Mapping[str, Any]) -> dict[str, Any]:
    from .. import package_id

    fields = {
        "rules_files": tuple(v["rules_files"]),
        "package": None if v["package"] is None else package_id(v["package"]),
        "default_rules": v["default_rules"],
        "cuda_major": v["cuda_major"],
        "strip_components": v["strip_components"],
        "outputs": _outputs(v["outputs"], v["profile"]),
        "profile": v["profile"],
        "cuda_version": v["cuda_version"],
        "platform": _platform(v["split_platform"], v["cuda_version"]),
        "python_version": v["python_version"],
        "glibc_version": v["glibc_version"],
        "skip_unsafe_members": v["skip_unsafe_members"],
        "inside": not v["no_inside"],
        "max_glibc": v["max_glibc"],
    }
    # Guards left unset keep SplitOptions' defaults (the documented 64G, 200, ...).
    if v["max_size"] is not None:
        fields["max_total_bytes"] = _size(v["max_size"])
    if v["max_ratio"] is not None:  # 0 is refused by SplitOptions, not taken as unset
        fields["max_ratio"] = v["max_ratio"]
    if v["max_members"] is not None:
        fields["max_members"] = v["max_members"]
    return fields


COMMON = OptionGroup("common", [
    click.option("--profile", default="default", show_default=True, metavar="NAME",
                 help="Whose layout the rules describe: default (Nixpkgs' outputs) or "
                 "conda-forge (one output per conda package, all in one prefix)."),
    click.option("--rules", "rules_files", multiple=True, type=click.Path(dir_okay=False),
                 help="Extra rule file; takes precedence over the shipped rules (repeatable)."),
    click.option("--package", metavar="NAME", help="Override the package identity (name, or "
                 "<pname>-<platform>-<version>); must have rules/packages/<NAME>.toml "
                 "unless --default-rules."),
    click.option("--default-rules", is_flag=True, help="Allow a --package that cudasplit "
                 "has no package rules for (split with the default rules)."),
    click.option("--cuda-major", metavar="N", help="CUDA major whose lib/<N>/ is kept "
                 "in multi-CUDA packages (default: the archive's _cudaNN suffix)."),
    click.option("--strip-components", type=click.IntRange(min=0), metavar="N",
                 help="Drop N leading directories of every member (for archives without "
                 "an NVIDIA <pname>-<platform>-<version>-archive top dir; needs --package)."),
    click.option("--outputs", metavar="LIST", help="Comma-separated outputs to produce; the "
                 "others fall back "
                 "(include -> dev -> out, others -> out)."),
    click.option("--max-size", metavar="SIZE", help="Refuse an archive whose members expand "
                 "beyond SIZE (bytes, or K/M/G/T; default 64G): decompression bomb guard."),
    click.option("--max-ratio", type=float, metavar="N", help="Refuse an archive that expands "
                 "more than N times its file size (default 200; counted past 16 MiB)."),
    click.option("--max-members", type=click.IntRange(min=1), metavar="N",
                 help=f"Refuse a source with more than N members (default "
                 f"{DEFAULT_MAX_MEMBERS}): member count guard."),
    click.option("--cuda-version", metavar="X.Y", help="The CUDA release (gates in the "
                 "package table; lib/<major>/ lifting). Default: a cuda_* package's version."),
    click.option("--platform", "split_platform", metavar="NAME", help="Platform for the "
                 "package table's gates: linux-x86_64, linux-sbsa, ..., or "
                 "aarch64-linux:CAP (Jetson capabilities pick linux-aarch64)."),
    click.option("--python-version", metavar="X.Y", help="The build's Python: cuda_gdb "
                 "keeps only its cuda-gdb-pythonX.Y-tui (as Nixpkgs)."),
    click.option("--glibc-version", metavar="X.Y", help="The glibc the files will be used "
                 "with: cuda_crt's noexcept edits for glibc >= 2.42 (as Nixpkgs) are made only "
                 "when it is given and new enough."),
    click.option("--skip-unsafe-members", is_flag=True, help="Skip (with a problem) a "
                 "symlink whose target is absolute or leaves the package root, instead of "
                 "failing the run (exit 2): such an archive is hostile."),
    click.option("--max-glibc", metavar="X.Y", help="Fail the run (exit 1, nothing written) "
                 "when a file needs a newer GLIBC_ version; the message names the file and "
                 "the symbol."),
    click.option("--no-inside", is_flag=True, help="Do not read the GPU code and glibc floor "
                 "of ELF files and static archives (a dry run then spools fewer members)."),
], _classification)
"""Options that decide classification (split, inspect, explain, repack)."""


def _tag(v: Mapping[str, Any]) -> str:
    if v["rpath_alias"]:
        warn("--rpath is deprecated; use --tag rpath", "deprecated-option")
        return "rpath"
    return str(v["tag"])


def _package_roots(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    roots = []
    for value in values:
        name, sep, directory = value.partition("=")
        if not sep or not name or not directory.startswith("/"):
            raise click.BadParameter(f"{value!r}: expected PNAME=/absolute/dir",
                                     param_hint="--package-root")
        roots.append((name, directory.rstrip("/")))
    return tuple(roots)


def _patching(v: Mapping[str, Any]) -> dict[str, Any]:
    from .. import runpath_policy

    policy = runpath_policy(
        driver_link=None if v["no_driver_link"] else v["driver_link"],
        cuda_compat=v["cuda_compat"], library_paths=v["library_path"],
        append=v["append_runpath"], keep_absolute=v["keep_runpath"], tag=_tag(v),
        interpreters=v["interpreter"], ignore_missing=v["ignore_missing"])
    return {"patch": not v["no_patch"], "runpath": policy, "patcher": v["patcher"],
            "package_roots": _package_roots(v["package_root"]),
            "target_platform": _target_platform(v["target_platform"])}


def _target_platform(word: str | None) -> str | None:
    if word is None:
        return None
    from .. import platform_name

    try:
        return platform_name(word)
    except CudasplitError as exc:
        raise click.BadParameter(str(exc), param_hint="--target-platform") from exc


PATCH = OptionGroup("patch", [
    click.option("--no-patch", is_flag=True, help="Do not rewrite RUNPATHs."),
    click.option("--driver-link", default=DEFAULT_DRIVER_LINK, show_default=True, metavar="DIR",
                 help="Driver link directory; <DIR>/lib is added to every RUNPATH."),
    click.option("--no-driver-link", is_flag=True, help="Do not add the driver link."),
    click.option("--cuda-compat", metavar="DIR", help="cuda_compat's libcuda directory; "
                 "goes first in every RUNPATH (not for cuda_compat itself)."),
    click.option("--library-path", multiple=True, metavar="DIR",
                 help="Where to resolve DT_NEEDED names the package does not provide."),
    click.option("--append-runpath", multiple=True, metavar="DIR",
                 help="Extra RUNPATH entry at the end (repeatable)."),
    click.option("--package-root", multiple=True, metavar="PNAME=DIR",
                 help="Where another package lives, for @PNAME@ in package rules "
                 "(libcublas and cudnn append @cuda_nvrtc@/lib). Repeatable."),
    click.option("--target-platform", metavar="NAME", help="Compiler packages (nvcc): the "
                 "platform it builds for (linux-x86_64, linux-sbsa, linux-aarch64); every "
                 "cuda_cudart --package-root must hold its ELF machine. Default: the "
                 "archive's platform."),
    click.option("--keep-runpath", is_flag=True,
                 help="Keep existing absolute RUNPATH entries (stubs entries still go)."),
    click.option("--tag", type=click.Choice(["runpath", "rpath"], case_sensitive=False),
                 default="runpath", show_default=True,
                 help="Write DT_RUNPATH, or DT_RPATH (conda-forge convention)."),
    click.option("--rpath", "rpath_alias", is_flag=True, hidden=True,
                 help="Deprecated spelling of --tag rpath."),
    click.option("--patcher", type=click.Choice(["auto", "native", "lief"]), default="auto",
                 show_default=True, help="ELF writer: fast tiers with LIEF fallback, or LIEF."),
    click.option("--interpreter", multiple=True, metavar="[ARCH=]PATH",
                 help="New PT_INTERP of dynamic executables of ARCH (default: the loader's "
                 "own arch); --nix: $NIX_CC/nix-support/dynamic-linker. Repeatable."),
    click.option("--ignore-missing", multiple=True, metavar="NAME-GLOB",
                 help="DT_NEEDED names that may stay unresolved (--nix and --strict fail "
                 "on the others). Repeatable; '*' accepts all."),
], _patching)
"""Options that decide how ELF files are rewritten (split, explain, repack)."""

GROUPS = (COMMON, PATCH)


JOBS_HELP = ("0 or unset: every CPU this process may use (its affinity mask, the cgroup CPU "
             "quota, NIX_BUILD_CORES in a Nix build).")
BESIDE = "The thread that reads the tar stream and writes runs beside them, as tar beside xz -TN. "


def jobs_option(what: str, *, beside: bool = True) -> Decorator:
    """``-j/--jobs N``, one meaning for every command: at most N workers at once; ``what``
    says which workers this command runs (``beside``: a tar stream is read besides)."""
    return click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, metavar="N",
                        help=f"At most N workers at once: {what}. "
                        f"{BESIDE if beside else ''}{JOBS_HELP}")


# Where each option of the commands that split (split, repack, inspect, explain) is listed
# in their --help: under one heading, 48 options were a wall (issue 43). By parameter name; an
# option named in none (a command's own --json) is listed under "Other options".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Source and rules", (
        "profile", "rules_files", "package", "default_rules", "strip_components", "cuda_major",
        "cuda_version", "split_platform", "python_version", "glibc_version",
        "skip_unsafe_members")),
    ("Outputs", (
        "output_dir", "outputs", "overwrite", "dry_run", "no_fsync", "prefix", "fmt", "level",
        "threads")),
    ("RUNPATH and ELF edits", (
        "no_patch", "driver_link", "no_driver_link", "cuda_compat", "library_path",
        "append_runpath", "package_root", "target_platform", "keep_runpath", "tag",
        "rpath_alias", "patcher", "interpreter", "ignore_missing")),
    ("Nix", ("nix", "nix_support", "cuda_component_hook", "consumer_guards")),
    ("Limits and resources", ("max_size", "max_ratio", "max_members", "jobs", "memory_limit")),
    ("Report and checks", (
        "report_file", "report_relative", "strict", "check_fhs_refs", "max_glibc", "no_inside",
        "closure", "as_json", "quiet", "verbose")),
)


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options under the headings of :data:`SECTIONS`
    (source and rules, outputs, RUNPATH, Nix, limits, report), in that order; the generated
    references (``scripts/gen_reference.py``, ``scripts/gen_manpage.py``) use the same
    sections through :meth:`option_sections`."""

    def option_sections(self, ctx: click.Context) -> list[tuple[str, list[click.Parameter]]]:
        """``(heading, options)`` in the order of :data:`SECTIONS`, each heading's options in
        the command's own order; options of no section last, as "Other options"; ``--help``
        closes the last heading."""
        options: list[click.Parameter] = [p for p in self.get_params(ctx)
                                          if isinstance(p, click.Option)]
        placed = {name: title for title, names in SECTIONS for name in names}
        help_option = self.get_help_option(ctx)
        if help_option is not None:
            placed[str(help_option.name)] = SECTIONS[-1][0]
        sections: list[tuple[str, list[click.Parameter]]] = []
        for title in [t for t, _ in SECTIONS] + ["Other options"]:
            mine = [p for p in options if placed.get(str(p.name), "Other options") == title]
            if mine:
                sections.append((title, mine))
        return sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, params in self.option_sections(ctx):
            rows = [row for p in params if (row := p.get_help_record(ctx)) is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def manifest_options(func: F) -> F:
    """Options shared by ``verify`` and ``features``: where the tarballs are and which."""
    for decorator in reversed([
        click.option("--tarballs", "tarball_dir", required=True,
                     type=click.Path(file_okay=False, exists=True),
                     help="Directory holding the tarballs (flat, or NVIDIA's relative paths)."),
        click.option("--platform", "platforms", multiple=True, metavar="NAME",
                     help="linux-x86_64, linux-sbsa, linux-aarch64, linux-ppc64le, "
                     "windows-x86_64, linux-all (NVIDIA's arch-independent tarballs), source; "
                     "or all, linux (every linux-*), host. Repeatable; default: all."),
        click.option("--cuda-variant", "cuda_variants", multiple=True, metavar="N",
                     help="Keep only these CUDA majors of cuda_variant packages (12 or cuda12; "
                     "repeatable; default: all)."),
        click.option("--package", "package_names", multiple=True, metavar="PNAME",
                     help="Only these packages (repeatable; default: all)."),
        jobs_option("tarballs hashed (verify) or scanned (features) at once", beside=False),
    ]):
        func = decorator(func)
    return func


# closure and diff: text for a person, json for a program, dot (Graphviz) and mermaid to draw.
graph_format = click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "dot", "mermaid"]), default="text",
    show_default=True, help="Output format: dot (Graphviz) or mermaid draw the outputs as a graph.")
