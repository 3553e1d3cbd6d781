"""The ``cudasplit`` command: a thin click layer over the public API.

All decisions live in the library; this module parses options, renders reports and turns
:class:`CudasplitError` into one-line messages and stable exit codes (see README).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from . import _api as api
from ._cli_ldd import ldd_command
from ._model import OUTPUT_NAMES, PackageId
from ._options import check_package_known
from ._pipeline import SplitOptions
from ._relreport import relative_report
from ._report import Report
from ._resolve import parse_interpreters
from ._rules import build_ruleset, describe_package, load_ruleset, read_rule_file
from ._runpath import DEFAULT_DRIVER_LINK, RunpathPolicy
from ._sources import (
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_TOTAL_BYTES,
    parse_top_dir,
)
from ._terminal import ProgressLine, err, print_issues, setup_logging
from .errors import CudasplitError, OutputError, ProblemsFound

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that left


def _fail(exc: CudasplitError) -> NoReturn:
    message = str(exc).replace("\n", " ")
    err(f"cudasplit: error: {message}")
    sys.exit(exc.exit_code)


def _package(value: str | None) -> PackageId | None:
    if value is None:
        return None
    return parse_top_dir(value) or parse_top_dir(value + "-archive") or PackageId(value)


def _outputs(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in OUTPUT_NAMES]
    if unknown:
        raise click.BadParameter(f"unknown output(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(OUTPUT_NAMES)}", param_hint="--outputs")
    return names


_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(value: str | None) -> int:
    """``--max-size``: ``123``, ``64G``, ``512MiB`` -> bytes."""
    if value is None:
        return DEFAULT_MAX_TOTAL_BYTES
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = (text[:-1], text[-1]) if text[-1:].isalpha() else (text, "")
    if suffix not in _SIZE_SUFFIXES or not number.isdigit():
        raise click.BadParameter(f"{value!r} is not a size (e.g. 8589934592, 512M, 64G)",
                                 param_hint="--max-size")
    return int(number) * _SIZE_SUFFIXES[suffix]


def common_options(func: F) -> F:
    """Options that decide classification (shared by split, inspect and explain)."""
    for decorator in reversed([
        click.option("--rules", "rules_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Extra rule file; takes precedence over the shipped rules (repeatable)."),
        click.option("--package", help="Override the package identity (name, or "
                     "<pname>-<platform>-<version>); must have rules/packages/<NAME>.toml "
                     "unless --default-rules."),
        click.option("--default-rules", is_flag=True, help="Allow a --package that cudasplit "
                     "has no package rules for (split with the default rules)."),
        click.option("--cuda-major", metavar="N", help="CUDA major whose lib/<N>/ is kept "
                     "in multi-CUDA packages (default: the archive's _cudaNN suffix)."),
        click.option("--strip-components", type=click.IntRange(min=0), metavar="N",
                     help="Drop N leading directories of every member (for archives without "
                     "an NVIDIA <pname>-<platform>-<version>-archive top dir; needs --package)."),
        click.option("--outputs", help="Comma-separated outputs to produce; the others fall back "
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
    ]):
        func = decorator(func)
    return func


def patch_options(func: F) -> F:
    for decorator in reversed([
        click.option("--no-patch", is_flag=True, help="Do not rewrite RUNPATHs."),
        click.option("--driver-link", default=DEFAULT_DRIVER_LINK, show_default=True,
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
    ]):
        func = decorator(func)
    return func


def _options(kw: dict[str, Any], *, dry_run: bool = False) -> SplitOptions:
    policy = RunpathPolicy(
        driver_link=None if kw.get("no_driver_link")
        else kw.get("driver_link", DEFAULT_DRIVER_LINK),
        cuda_compat=kw.get("cuda_compat"),
        library_paths=tuple(kw.get("library_path", ())),
        append=tuple(kw.get("append_runpath", ())),
        keep_absolute=bool(kw.get("keep_runpath")),
        tag=_tag(kw),
        interpreters=parse_interpreters(kw.get("interpreter", ())),
        ignore_missing=tuple(kw.get("ignore_missing", ())),
    ) if "driver_link" in kw else RunpathPolicy()
    return SplitOptions(
        outputs=_outputs(kw.get("outputs")),
        patch=not kw.get("no_patch", False),
        runpath=policy,
        patcher=kw.get("patcher", "auto"),
        strict=bool(kw.get("strict")),
        dry_run=dry_run or bool(kw.get("dry_run")),
        package=_package(kw.get("package")),
        rules_files=tuple(kw.get("rules_files", ())),
        jobs=int(kw.get("jobs") or 0),
        overwrite=bool(kw.get("overwrite")),
        max_total_bytes=_size(kw.get("max_size")),
        max_ratio=kw.get("max_ratio") or DEFAULT_MAX_RATIO,
        max_members=kw.get("max_members") or DEFAULT_MAX_MEMBERS,
        nix_markers=bool(kw.get("nix_support")),
        cuda_major=kw.get("cuda_major"),
        package_roots=_package_roots(kw.get("package_root", ())),
        cuda_version=kw.get("cuda_version"),
        platform=_split_platform(kw.get("split_platform"), kw.get("cuda_version")),
        check_fhs_refs=bool(kw.get("check_fhs_refs")),
        python_version=kw.get("python_version"),
        cuda_component_hook=kw.get("cuda_component_hook"),
        strip_components=kw.get("strip_components"),
        default_rules=bool(kw.get("default_rules")),
        fsync=not kw.get("no_fsync", False),
    )


def _split_platform(word: str | None, cuda_version: str | None) -> str | None:
    from ._manifest import resolve_platform_word

    if word is None:
        return None
    try:
        return resolve_platform_word(word, cuda_version) or word
    except CudasplitError as exc:
        raise click.BadParameter(str(exc), param_hint="--platform") from exc


def _tag(kw: dict[str, Any]) -> str:
    if kw.get("rpath_alias"):
        err("cudasplit: warning: --rpath is deprecated; use --tag rpath")
        return "RPATH"
    return "RPATH" if str(kw.get("tag", "runpath")).lower() == "rpath" else "RUNPATH"


def _package_roots(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    roots = []
    for value in values:
        name, sep, directory = value.partition("=")
        if not sep or not name or not directory.startswith("/"):
            raise click.BadParameter(f"{value!r}: expected PNAME=/absolute/dir",
                                     param_hint="--package-root")
        roots.append((name, directory.rstrip("/")))
    return tuple(roots)


class _StdoutClosed(BaseException):
    """The reader of standard output left (``| head``): passes click's own EPIPE handling,
    which would exit 1, our "problems found" code."""


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _StdoutClosed() from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cudasplit")
def main() -> None:
    """Split NVIDIA CUDA redistributable tarballs into outputs and rewrite RUNPATHs."""


main.add_command(ldd_command)  # cudasplit ldd: the loader view (_cli_ldd.py)


@main.command("split")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=False))
@click.option("-o", "--output-dir", type=click.Path(file_okay=False),
              help="Write DIR/<output>/... (staged, moved into place at the end).")
@click.option("--nix", is_flag=True, help="Take the outputs from the Nix builder environment.")
@click.option("--nix-support", is_flag=True, help="Write nix-support/include-in-cudatoolkit-root "
              "in every output and nix-support/propagated-build-inputs (the others) in out.")
@click.option("--cuda-component-hook", metavar="DIR", help="With --nix-support: Nixpkgs' "
              "cudaComponentHook (store path); each component output's nix-support/setup-hook "
              "sources its collector.")
@common_options
@patch_options
@click.option("--report", "report_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the JSON report here ('-': standard output).")
@click.option("--report-relative", is_flag=True, help="Report without absolute store paths "
              "(outputs as $<output>, source and rule files by name): safe to keep in $out.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on empty requested outputs, "
              "unclaimed members, dangling links, failed patches, missing package roots and "
              "unresolved DT_NEEDED.")
@click.option("--dry-run", is_flag=True, help="Plan and report; write nothing.")
@click.option("--overwrite", is_flag=True, help="Replace the previous split in DIR (all of "
              "its outputs, also those this run does not produce).")
@click.option("--check-fhs-refs", is_flag=True, help="Fail on /usr/ in any output unless the "
              "package table allows it (Nixpkgs' checkCudaFhsRefs).")
@click.option("--no-fsync", is_flag=True, help="Do not fsync before the final renames "
              "(faster on slow disks; a power loss may then leave truncated files).")
@click.option("-j", "--jobs", type=int, default=0, help="Parallelism (default: available CPUs; "
              "NIX_BUILD_CORES in a Nix builder).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens.")
def split_command(sources: tuple[str, ...], output_dir: str | None, nix: bool,
                  report_file: str | None, report_relative: bool, quiet: bool, verbose: bool,
                  **kw: Any) -> None:
    """Split SOURCES (tarballs, unpacked directories, or - for standard input) into outputs.

    One source: DIR/<output>/... . Several sources, or a directory of tarballs: each goes to
    DIR/<pname>-<platform>-<version>/<output>/..., processed concurrently within --jobs.
    """
    _logging(quiet, verbose)
    if bool(output_dir) == nix:
        raise click.UsageError("give exactly one of --output-dir DIR or --nix")
    progress = ProgressLine.for_terminal(quiet)
    writer = ReportWriter(report_file, report_relative)
    try:
        options = replace(_options(kw), progress=progress)
        if len(sources) > 1 or _is_batch(sources[0], nix, quiet):
            if nix:
                raise click.UsageError("--nix takes exactly one source")
            assert output_dir is not None
            _run_batch(sources, output_dir, options, writer, quiet)
            return
        report = _run_split(sources[0], output_dir, nix, options, writer)
    except CudasplitError as exc:
        _fail(exc)
    finally:
        if progress is not None:
            progress.clear()
    if not quiet:
        _print_summary(report, to_stderr=writer.to_stdout)
    print_issues(report, warnings=not quiet)


def _print_summary(report: Report, *, to_stderr: bool = False) -> None:
    lines = report.summary_lines()
    if report.dry_run:
        lines = ["plan (--dry-run): nothing was written; outputs would go to these directories",
                 *lines]
    dropped = sum(1 for m in report.members if m.output is None and m.kind != "dir"
                  and m.note != "directories are created where their content lands")
    if dropped:
        lines.append(f"dropped  {dropped:6} members (rules or CUDA major; see the report)")
    for line in lines:
        click.echo(line, err=to_stderr)


def _is_batch(source: str, nix: bool, quiet: bool) -> bool:
    path = Path(source)
    if nix or source == "-" or not path.is_dir():
        return False
    kind = api.directory_kind(path)
    if not quiet:
        what = ("a directory of tarballs: splitting each into its own directory (batch)"
                if kind == "batch" else "an unpacked redistributable tree")
        err(f"cudasplit: {source}: {what}")
    return kind == "batch"


class ReportWriter:
    """``--report FILE`` or ``--report -`` (standard output), plain or ``--report-relative``."""

    def __init__(self, target: str | None, relative: bool) -> None:
        self.target = target
        self.relative = relative
        self.to_stdout = target == "-"

    def render(self, report: Report) -> dict[str, Any]:
        return relative_report(report) if self.relative else report.as_dict()

    def write(self, data: dict[str, Any]) -> None:
        if self.target is None:
            return
        text = json.dumps(data, indent=2) + "\n"
        if self.to_stdout:
            click.echo(text, nl=False)
            return
        try:
            Path(self.target).write_text(text)
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write the report ({exc.strerror})") from exc


def _run_batch(sources: Sequence[str], output_dir: str, options: SplitOptions,
               writer: ReportWriter, quiet: bool) -> None:
    results = api.split_many(sources, output_dir, options)
    runs = [{"source": r.source, "output_dir": r.output_dir,
             "error": None if r.error is None else str(r.error),
             "report": None if r.report is None else writer.render(r.report)} for r in results]
    writer.write({"schema": 1, "runs": runs})
    failed = [r for r in results if r.error is not None]
    for result in results:
        if result.error is not None:
            err(f"cudasplit: error: {result.error}")
        elif not quiet and result.report is not None:
            click.echo(f"{result.source} -> {result.output_dir}", err=writer.to_stdout)
            _print_summary(result.report, to_stderr=writer.to_stdout)
        if result.report is not None:
            print_issues(result.report, warnings=not quiet)
    if failed:
        sys.exit(max(r.error.exit_code for r in failed if r.error is not None))


def _run_split(source: str, output_dir: str | None, nix: bool, options: SplitOptions,
               writer: ReportWriter) -> Report:
    try:
        if nix:
            report = api.split_nix(source, options=options)
        else:
            assert output_dir is not None
            report = api.split_to_dir(source, output_dir, options)
    except ProblemsFound as exc:
        if isinstance(exc.report, Report):
            writer.write(writer.render(exc.report))
            print_issues(exc.report)
        raise
    writer.write(writer.render(report))
    return report


def _write_report(report: Report, path: str) -> None:
    ReportWriter(path, False).write(report.as_dict())


def _logging(quiet: bool, verbose: bool) -> None:
    setup_logging(quiet, verbose)


@main.command("inspect")
@click.argument("source", type=click.Path(exists=False))
@common_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
def inspect_command(source: str, as_json: bool, **kw: Any) -> None:
    """List every member with kind, size, output and rule; write nothing."""
    try:
        report = api.inspect(source, _options(kw, dry_run=True))
    except CudasplitError as exc:
        _fail(exc)
    if as_json:
        click.echo(report.to_json(), nl=False)
        return
    for m in report.members:
        where = f"{m.output}:{m.dest}" if m.output else "-"
        link = f" -> {m.link}" if m.link else ""
        click.echo(f"{m.kind:10} {m.size:>12} {where:50} {m.rule}  {m.path}{link}")


@main.command("explain")
@click.argument("source", type=click.Path(exists=False))
@click.argument("path")
@common_options
@patch_options
@click.option("--json", "as_json", is_flag=True)
def explain_command(source: str, path: str, as_json: bool, **kw: Any) -> None:
    """Say which rule placed PATH and which rules it passed over.

    PATH: an archive path (with or without the top directory, as `tar tf` prints it, `./`
    allowed) or an output path (lib/libfoo.so); near matches are suggested.
    """
    try:
        result = api.explain(source, path, _options(kw, dry_run=True))
    except CudasplitError as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(asdict(result), indent=2))
        return
    click.echo(f"{result.path} ({result.kind})")
    if result.rename:
        click.echo(f"  renamed by {result.rename} -> {result.dest}")
    for trial in result.tried:
        mark = "MATCH" if trial.matched else "pass "
        click.echo(f"  {mark} {trial.rule:40} {', '.join(trial.globs)}"
                   + (f" kind={','.join(trial.kinds)}" if trial.kinds else ""))
    click.echo(f"  => output: {result.output or '(not placed)'}"
               + (f"  ({result.note})" if result.note else ""))
    for key, value in (result.elf or {}).items():
        if value not in (None, []):
            click.echo(f"  => {key}: {value}")


@main.group("rules")
def rules_group() -> None:
    """Show or check rule files."""


@rules_group.command("show")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--package", help="Include rules/packages/<NAME>.toml.")
def rules_show(files: Sequence[str], package: str | None) -> None:
    """Print the effective rules in precedence order (FILES first, then the shipped ones)."""
    try:
        if package is not None:
            check_package_known(SplitOptions(package=PackageId(package)))
        ruleset = load_ruleset(package, files)
    except CudasplitError as exc:
        _fail(exc)
    click.echo("# files, highest precedence first: " + ", ".join(ruleset.files))
    if package:
        # The whole package-table entry, every key (defaults too), gates spelled out.
        click.echo(f"[package]  # {package}")
        for line in describe_package(ruleset.package):
            click.echo(line)
    for rename in ruleset.renames:
        click.echo(f"rename {rename.ref}: {rename.source} -> {rename.target}")
    for index, rule in enumerate(ruleset.rules, 1):
        target = "DROP" if rule.action == "drop" else rule.output
        kinds = f" kind={','.join(sorted(rule.kinds))}" if rule.kinds else ""
        click.echo(f"{index:3}. {rule.ref!s:40} -> {target:8} "
                   f"{', '.join(g.pattern for g in rule.globs)}{kinds}")


@rules_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def rules_check(files: Sequence[str]) -> None:
    """Validate rule files (each on its own); exit 2 with file:rule on the first error."""
    try:
        for name in files:
            build_ruleset([(name, read_rule_file(Path(name)))])
            click.echo(f"{name}: ok")
    except CudasplitError as exc:
        _fail(exc)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so every ``finally``/abort runs (staging
    removed) exactly as for Ctrl-C. Not an ``Exception``: nothing may swallow it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def run() -> None:
    """Console entry point: click's standalone mode, but Ctrl-C exits 130, SIGTERM 143 and
    SIGHUP 129 (128 + signal, documented), each after removing the staging directory."""
    # The decoder thread hands over a chunk every few ms; with the default 5 ms switch
    # interval it can sit waiting for the GIL while the writer runs Python code. A shorter
    # interval measured ~2-3% faster end to end on single-block xz (the decode-bound case).
    sys.setswitchinterval(0.0005)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    try:
        main.main(prog_name="cudasplit", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err("cudasplit: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Terminated as exc:
        err(f"cudasplit: terminated by {exc}")
        sys.exit(128 + exc.signum)
    except (BrokenPipeError, _StdoutClosed):
        _quiet_broken_pipe()
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)


def _quiet_broken_pipe() -> NoReturn:
    """``cudasplit inspect X | head``: the reader left; exit without a traceback. stdout is
    pointed at /dev/null so the interpreter's final flush does not fail once more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_BROKEN_PIPE)


# -- repack and nix (issue 7) ------------------------------------------------------------------


@main.command("repack")
@click.argument("source", type=click.Path(exists=False))
@click.option("-o", "--output-dir", required=True, type=click.Path(file_okay=False),
              help="Write DIR/<pname>-<platform>-<version>-<output>.tar.zst per output.")
@click.option("--prefix", metavar="DIR", help="Where the outputs will be unpacked (output "
              "<o> at DIR/<o>); RUNPATHs and .pc files name it. Default: /<pname>-<platform>-"
              "<version>.")
@click.option("--format", "fmt", type=click.Choice(["zst", "xz", "gz"]), default="zst",
              show_default=True, help="Compression of the archives.")
@click.option("--level", type=int, default=10, show_default=True, help="Compression level.")
@click.option("--threads", type=int, default=0, show_default=True,
              help="zstd worker threads (0: single-threaded, -1: all CPUs); the bytes are "
              "the same for any value >= 1.")
@common_options
@patch_options
@click.option("--nix-support", is_flag=True, help="Also write the nix-support/ files.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Write the JSON report here.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on problems, as in split.")
@click.option("--overwrite", is_flag=True, help="Replace existing archives.")
@click.option("-j", "--jobs", type=int, default=0, help="Parallelism (default: available CPUs).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("-v", "--verbose", is_flag=True, help="Log what happens.")
def repack_command(source: str, output_dir: str, prefix: str | None, fmt: str, level: int,
                   threads: int, report_file: str | None, quiet: bool, verbose: bool,
                   **kw: Any) -> None:
    """Split SOURCE and write one reproducible tarball per output (mtime: SOURCE_DATE_EPOCH)."""
    from ._repack import RepackOptions, repack_to_dir

    _logging(quiet, verbose)
    try:
        options = _options(kw)
        packing = RepackOptions(prefix=prefix, fmt=fmt, level=level, threads=threads)
        try:
            result = repack_to_dir(source, output_dir, options, packing)
        except ProblemsFound as exc:
            if report_file and isinstance(exc.report, Report):
                _write_report(exc.report, report_file)
            raise
        if report_file:
            _write_report(result.report, report_file)
    except CudasplitError as exc:
        _fail(exc)
    if not quiet:
        for path in result.archives:
            click.echo(str(path))
    print_issues(result.report, warnings=not quiet)


@main.group("nix")
def nix_group() -> None:
    """Helpers for Nix builds."""


@nix_group.command("setup-hook")
def nix_setup_hook() -> None:
    """Print the path of the setup hook (defines cudasplitInstallPhase)."""
    from importlib.resources import as_file, files

    # The package is installed as files (wheel or editable), so the path is stable.
    with as_file(files("cudasplit") / "nix" / "setup-hook.sh") as path:
        click.echo(str(path))


# ---------------------------------------------------------------------------------------------
# Manifests: verify downloads, compute feature manifests (see docs-manifests.md)


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
        click.option("-j", "--jobs", type=int, default=0,
                     help="Tarballs processed at once (default: available CPUs)."),
    ]):
        func = decorator(func)
    return func


@main.command("verify")
@click.argument("manifest", type=click.Path(dir_okay=False))
@manifest_options
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the files that are not ok.")
def verify_command(manifest: str, tarball_dir: str, platforms: tuple[str, ...],
                   cuda_variants: tuple[str, ...], package_names: tuple[str, ...], jobs: int,
                   as_json: bool, quiet: bool) -> None:
    """Check size and sha256 of the tarballs MANIFEST (redistrib_*.json) names.

    Exit 0 when every selected tarball is present and intact, 1 when one is missing or
    differs, 2 when the manifest or an option is bad.
    """
    from ._manifest import load_manifest, verify

    try:
        report = verify(load_manifest(manifest), tarball_dir, platforms=platforms,
                        cuda_variants=cuda_variants or None, packages=package_names or None,
                        jobs=jobs)
    except CudasplitError as exc:
        _fail(exc)
    if as_json:
        click.echo(report.to_json(), nl=False)
    else:
        for result in report.results:
            if not (quiet and result.status == "ok"):
                click.echo(result.line())
        counts = ", ".join(f"{n} {status}" for status, n in report.counts().items() if n)
        click.echo(f"{len(report.results)} tarball(s): {counts or 'none selected'}", err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_PROBLEMS)


@main.command("features")
@click.argument("manifest", type=click.Path(dir_okay=False))
@manifest_options
@click.option("-o", "--output", "output_file", type=click.Path(dir_okay=False),
              help="Write the JSON here (default: standard output).")
@click.option("--extended", is_flag=True, help="Also include, python, stubs flags and the "
              "SONAMEs provided and needed (reads every ELF member's dynamic section).")
def features_command(manifest: str, tarball_dir: str, platforms: tuple[str, ...],
                     cuda_variants: tuple[str, ...], package_names: tuple[str, ...], jobs: int,
                     output_file: str | None, extended: bool) -> None:
    """Write the feature manifest (feature_*.json schema) of the tarballs MANIFEST names.

    Each tarball is streamed once. Missing or unreadable tarballs are listed on standard error
    and left out of the JSON (never guessed); the exit status is then 1.
    """
    from ._features import FeatureStatus, features_for_manifest
    from ._manifest import load_manifest
    from .errors import OutputError

    try:
        report = features_for_manifest(
            load_manifest(manifest), tarball_dir, platforms=platforms,
            cuda_variants=cuda_variants or None, packages=package_names or None, jobs=jobs,
            extended=extended)
        text = report.to_feature_json()
        if output_file:
            try:
                Path(output_file).write_text(text)
            except OSError as exc:
                raise OutputError(f"{output_file}: cannot write ({exc.strerror})") from exc
        else:
            click.echo(text, nl=False)
    except CudasplitError as exc:
        _fail(exc)
    for result in report.results:
        if result.status is FeatureStatus.MISSING:
            click.echo(f"missing: {result.artifact.label}  {result.artifact.filename}", err=True)
        elif result.status is FeatureStatus.ERROR:
            click.echo(f"error: {result.artifact.label}  {result.detail}", err=True)
        elif result.features is not None:
            for problem in result.features.problems:
                click.echo(f"problem: {problem}", err=True)
    sys.exit(EXIT_OK if report.complete else EXIT_PROBLEMS)


# -- release-level tools (issue 16): _cli_release.py -----------------------------------------
from . import _cli_release as cli_release  # noqa: E402  (registered last; the module holds the commands)

main.add_command(cli_release.closure_command)
main.add_command(cli_release.nixify_command)
main.add_command(cli_release.diff_command)
cli_release.add_closure_option(split_command)  # split --closure
