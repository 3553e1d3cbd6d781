"""The split loop: source -> classify -> place -> (links, pkg-config, RUNPATH) -> sink -> report.

One direction only: the loop pulls members from the source, asks the rule set (pure) where each
goes, hands bytes to the sink and records what happened. Work that needs the whole archive
(symlinks whose targets come later, RUNPATH resolution against every library of the package)
runs once the stream has ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from .elf import kind_from_head
from .errors import OutputError, ProblemsFound, SourceError
from .libmajor import LibMajor
from .model import Kind, Member, MemberType, PackageId
from .nixsupport import NixSupport, find_fhs_refs, write_nix_support
from .nvccprofile import ProfileExtras, rewrite_nvcc_profile
from .options import available_cpus, check_options, check_package_known
from .patchstage import ElfJob, PatchSettings, PatchStage
from .pkgconfig import (
    MAX_PC_SIZE,
    PcExtras,
    PcRoots,
    apply_extras,
    major_minor,
    rewrite_pc,
    unversioned_alias,
)
from .pkgtable import TextEdit, Where
from .report import MemberRecord, OutputRecord, Problem, Report
from .rules import Decision, Rename, RuleSet, load_ruleset
from .runpath import RunpathPolicy
from .sinks.base import Sink
from .sources import (
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_TOTAL_BYTES,
    Limits,
    Source,
    member_parent,
    open_source,
)
from .textedits import apply_text_edits

log = logging.getLogger(__name__)

AR_MAGIC = b"!<arch>\n"
BUILTIN = "<builtin>"
# Warnings that --strict treats as problems: a RUNPATH entry the package rules want is
# missing, or a DT_NEEDED library will not be found at run time.
STRICT_WARNINGS = frozenset({"package-root-missing", "needed-unresolved"})
_PACKAGE_DROP = "dropped by the package table"


def _cuda_version(options: SplitOptions, package: PackageId) -> str | None:
    """The CUDA major.minor for gates: given, else a ``cuda_*`` package's own version."""
    if options.cuda_version:
        return options.cuda_version
    if package.name.startswith("cuda_") and package.version:
        return ".".join(package.version.split(".")[:2])
    return None


@dataclass(frozen=True, slots=True)
class Progress:
    """Handed to ``SplitOptions.progress`` after each member (the API itself never prints)."""

    source: str
    members: int          # members taken so far
    bytes: int            # member bytes written so far (uncompressed)
    current: str          # the member just taken
    done: bool = False    # the last call of a run


@dataclass(frozen=True, slots=True)
class SplitOptions:
    """Everything that changes what a split does. Frozen: one value serves a whole run."""

    outputs: tuple[str, ...] | None = None      # limit the outputs (others fall back)
    patch: bool = True                          # rewrite RUNPATHs
    runpath: RunpathPolicy = field(default_factory=RunpathPolicy)
    patcher: str = "auto"                       # auto | lief
    strict: bool = False                        # problems fail the run
    dry_run: bool = False                       # plan, write nothing
    package: PackageId | None = None            # override the parsed identity
    rules_files: tuple[str, ...] = ()           # extra rule files, highest precedence
    rules_dir: Path | None = None               # replaces the shipped rules/
    jobs: int = 0                               # 0: the CPUs available to the process
    overwrite: bool = False
    cuda_major: str | None = None               # lift lib/<major>/; default: the _cudaNN suffix
    progress: Callable[[Progress], None] | None = None  # called after every member
    # Where other packages live, for ``@pname@`` in package rules' runpath_append
    # (libcublas and cuDNN dlopen NVRTC: ``runpath_append = ["@cuda_nvrtc@/lib"]``).
    package_roots: tuple[tuple[str, str], ...] = ()
    nix_markers: bool = False                   # write nix-support/ files (see nixsupport.py)
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES  # bomb guard: expanded bytes (--max-size)
    max_ratio: float = DEFAULT_MAX_RATIO        # bomb guard: expanded/compressed (--max-ratio)
    max_members: int = DEFAULT_MAX_MEMBERS      # member count guard (--max-members)
    # The CUDA release (major.minor) for the package table's cuda_since/cuda_before gates and
    # nix-support/cuda-component; default: the version of a cuda_* package.
    cuda_version: str | None = None
    check_fhs_refs: bool = False                # fail on /usr/ references (checkCudaFhsRefs)
    platform: str | None = None                 # for gates; default: the tarball's platform
    python_version: str | None = None           # X.Y: cuda_gdb keeps that Python's TUI only
    cuda_component_hook: str | None = None      # cudaComponentHook's root: source line (nixsupport)
    # Issue 14: archives without an NVIDIA top directory need an explicit strip count;
    # a --package without rules file needs default_rules; fsync before the final renames.
    strip_components: int | None = None
    default_rules: bool = False
    fsync: bool = True

    def __post_init__(self) -> None:
        check_options(self)

    def effective_jobs(self) -> int:
        if self.jobs > 0:
            return self.jobs
        return available_cpus()


def member_kind(member: Member) -> Kind:
    """Content-aware kind: ELF files and ``ar`` archives are recognised by magic bytes."""
    if member.type is MemberType.DIR:
        return Kind.DIR
    if member.type is MemberType.SYMLINK:
        return Kind.SYMLINK
    if member.type is MemberType.HARDLINK:
        return Kind.HARDLINK
    elf_kind = kind_from_head(member.head)
    if elf_kind is not None:
        return elf_kind
    if member.head.startswith(AR_MAGIC) or member.path.endswith(".a"):
        return Kind.STATIC
    return Kind.FILE


def fallback_output(output: str, allowed: frozenset[str] | None) -> str:
    """Nixpkgs' fallback when an output does not exist: include -> dev -> out, others -> out."""
    if allowed is None or output in allowed:
        return output
    if output == "include" and "dev" in allowed:
        return "dev"
    return "out"


@dataclass(slots=True)
class _Placed:
    output: str
    dest: str
    kind: Kind
    local: Path | None


class SplitRun:
    """State of one split. Use :func:`split`; this class is the loop's working memory."""

    def __init__(self, source: Source, sink: Sink | None, options: SplitOptions,
                 plan_roots: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.sink = sink
        self.options = options
        # Without a sink (dry run, inspect) RUNPATHs and .pc files are planned against these
        # roots; unknown outputs show as ``/${output}`` (absolute, as RUNPATH entries must be).
        self.plan_roots = plan_roots or {}  # not copied: repack's roots are computed lazily
        self.ruleset: RuleSet | None = None
        self.where = Where()
        self.declared: tuple[str, ...] | None = None
        self.allowed: frozenset[str] | None = None
        self.report = Report(source=source.description, package={}, dry_run=sink is None)
        self.placed: dict[str, _Placed] = {}           # archive path -> where it went
        self.dir_outputs: dict[str, set[str]] = {}     # archive dir -> outputs with content
        self.occupied: dict[tuple[str, str], str] = {}  # (output, dest) -> archive path
        self.output_dirs: set[tuple[str, str]] = set()  # (output, dir) holding placed files
        self.symlinks: list[tuple[Member, MemberRecord]] = []
        self.hardlinks: list[tuple[Member, MemberRecord]] = []
        self.link_backs: set[tuple[str, Rename]] = set()
        self.pc_aliases: list[tuple[str, str]] = []
        self.symlink_index: dict[str, str] = {}  # archive path -> link text, once streamed
        self.cuda_major: str | None = options.cuda_major
        self.lib_major = LibMajor()  # D9, set up with the rules (libmajor.py)
        # Regular files per (output, directory), as they are written: lets a file whose
        # DT_NEEDED all live beside it be patched while later members are still decoding.
        self.own_names: dict[tuple[str, str], set[str]] = {}
        self.eager_pool: ThreadPoolExecutor | None = None
        self.patches: PatchStage | None = None  # created with the rules (first member)
        self.members_seen = 0
        self.bytes_seen = 0

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> Report:
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cudasplit-patch") as pool:
                self.eager_pool = pool
                for member, stream in self.source.members():
                    with self._naming(member.path):
                        self._take(member, stream)
                    self._tick(member)
                self._release_held()
                patches = self._patch_stage()
                patches.wait_early()
            self._finish_links()
            patches.finish(self.occupied)
            if self.sink is not None:
                self._copy_packages()
            self._check()
            if self.options.nix_markers and self.sink is not None:
                write_nix_support(self.sink, self._nix_support())
            self._check_fhs_refs()
        except BaseException:
            if self.sink is not None:
                self.sink.abort()
            raise
        self._complete()
        return self.report

    @contextlib.contextmanager
    def _naming(self, path: str) -> Iterator[None]:
        """Sink errors name the archive and the member, not only the file being written."""
        try:
            yield
        except OutputError as exc:
            if f"member {path!r}" in str(exc):
                raise
            raise OutputError(f"{self.source.description}: member {path!r}: {exc}") from exc

    def _public_messages(self) -> None:
        """Problem texts name final paths, never the staging dir (gone when they are read)."""
        public_text = getattr(self.sink, "public_text", None)
        if public_text is not None:
            for issue in (*self.report.problems, *self.report.warnings):
                issue.message = public_text(issue.message)

    def _patch_stage(self) -> PatchStage:
        if self.patches is None:
            ruleset = self._ensure_rules()
            settings = PatchSettings(
                policy=self.options.runpath, patcher=self.options.patcher,
                jobs=self.options.effective_jobs(), package_roots=dict(self.options.package_roots),
                enabled=self.options.patch, writing=self.sink is not None,
                strict=self.options.strict, package_version=self.report.package.get("version"))
            self.patches = PatchStage(
                settings, ruleset.package, self._final_root,
                has_stubs_output=self.allowed is None or "stubs" in self.allowed,
                own_names=self.own_names, report=self.report, early_pool=self.eager_pool)
        return self.patches

    def _tick(self, member: Member) -> None:
        self.members_seen += 1
        self.bytes_seen += member.size
        if self.options.progress is not None:
            self.options.progress(Progress(self.source.description, self.members_seen,
                                           self.bytes_seen, member.path))

    def _ensure_rules(self) -> RuleSet:
        if self.ruleset is None:
            package = self.options.package or self.source.package
            self.report.package = package.as_dict()
            ruleset = load_ruleset(package.name, self.options.rules_files,
                                   self.options.rules_dir)
            self.where = Where(package.version, _cuda_version(self.options, package),
                               self.options.platform or package.platform,
                               self.options.python_version)
            if self.options.python_version is None and any(
                    d.needs_python() for d in ruleset.package.drops):
                self._warn("python-version-unknown", None, "the package table keeps only the "
                           "build Python's files here; pass --python-version X.Y (kept all)")
            self.ruleset = ruleset
            self.report.rules_files = list(self.ruleset.files)
            # D9: lib/<cudaMajor>/ replaces lib/ whenever the CUDA major is known.
            self.cuda_major = (self.options.cuda_major or package.cuda_variant
                               or (self.where.cuda_version or "").split(".")[0] or None)
            # Only multi-CUDA redists without a _cudaNN archive suffix may mix lib/ and
            # lib/<major>/: their lib/ members wait for the verdict (libmajor.py).
            major = self.cuda_major.split(".")[0] if self.cuda_major else None
            self.lib_major = LibMajor(major, hold=ruleset.package.redist != "cuda"
                                      and not package.cuda_variant)
            declared = self.options.outputs or self.ruleset.package.outputs_for(self.where)
            self.declared = declared
            self.allowed = None if declared is None else frozenset(declared) | {"out"}
            self._create_declared_outputs(declared)
        return self.ruleset

    def _create_declared_outputs(self, declared: tuple[str, ...] | None) -> None:
        if self.sink is None or declared is None:
            return
        for name in ("out", *declared):
            self.sink.ensure_output(name)
            self._output_record(name)

    def _take(self, member: Member, stream: BinaryIO | None) -> None:
        ruleset = self._ensure_rules()
        if self._held(member, stream, ruleset.package.lift_path(member.path)):
            return
        kind = member_kind(member)
        dest, rename, dropped = self._normalise(member.path)
        decision = ruleset.classify(dest or member.path, kind, self.allowed)
        record = MemberRecord(member.path, kind.value, None, dest, str(decision.rule),
                              member.size, member.link)
        self.report.members.append(record)
        if dropped is not None:
            rule = "package-drop" if dropped.startswith(_PACKAGE_DROP) else "cuda-major"
            record.dest, record.rule, record.note = None, f"{BUILTIN}:{rule}", dropped
        elif member.type is MemberType.DIR or dest is None:
            record.rule, record.dest = f"{BUILTIN}:directory", None
            record.note = "directories are created where their content lands"
        elif decision.output is None and decision.rule_obj is not None:
            # An explicit drop rule wins over link placement too (tensorrt's bin -> targets/…).
            record.dest, record.note = None, "dropped by rule"
        elif member.type is MemberType.SYMLINK:
            self.symlinks.append((member, record))
        elif member.type is MemberType.HARDLINK:
            self._defer_hardlink(member, record)
        elif decision.output is None:
            record.dest, record.note = None, "dropped by rule"
        else:
            assert stream is not None
            self._place_file(member, stream, kind, decision, record, rename)

    def _normalise(self, path: str) -> tuple[str | None, Rename | None, str | None]:
        """Archive path -> (dest, rename used, reason to drop). ``dest`` None: a lifted directory.

        Order: package lift (``nsight-systems/<ver>/``), then ``lib/<cudaMajor>/`` lifting
        (multi-CUDA packages; other majors are dropped, as Nixpkgs does), then renames.
        """
        assert self.ruleset is not None
        lifted = self.ruleset.package.lift_path(path)
        if lifted is None:
            return None, None, None
        lifted, lib_drop = self.lib_major.route(lifted)
        if lib_drop is not None:
            return None, None, lib_drop
        # Drops name archive paths before renames: cuda_cccl 13 deletes the stale top-level
        # include/nv/ *before* include/cccl/nv/ is un-nested into its place.
        if self.ruleset.package.dropped(lifted, self.where):
            return None, None, _PACKAGE_DROP + " (drop)"
        dest, rename = self.ruleset.normalise(lifted)
        if dest.endswith(".pc") and any(
                e.drop and e.matches(posixpath.basename(dest), self.where)
                for e in self.ruleset.package.pkgconfig_edits):
            return None, None, _PACKAGE_DROP + " (pkgconfig_edits)"
        return dest, rename, None

    def _release_held(self) -> None:
        """D9: members held until the stream ended go through the loop now (placed, or dropped
        when a lib/<major>/ arrived meanwhile)."""
        for held in self.lib_major.release():
            with self._naming(held.member.path):
                self._take(held.member, held.spool)
            if held.spool is not None:
                held.spool.close()

    def _held(self, member: Member, stream: BinaryIO | None, lifted: str | None) -> bool:
        """D9: hold ``member`` until the stream ends, or note its arrival (libmajor.py)."""
        if lifted is not None and self.lib_major.should_hold(member, lifted):
            self.lib_major.keep(member, stream)
            return True
        self.lib_major.arrive(member, lifted or "")
        late = self.lib_major.late()
        if late:
            self._problem("cuda-major-late", late[0], (
                f"lib/{self.lib_major.major}/ arrived after {len(late)} member(s) directly in "
                "lib/ were written; Nixpkgs deletes them (D9), a stream cannot (libmajor.py)"))
        return False

    def _place_file(self, member: Member, stream: BinaryIO, kind: Kind, decision: Decision,
                    record: MemberRecord, rename: Rename | None) -> None:
        assert decision.output is not None and record.dest is not None
        output = fallback_output(decision.output, self.allowed)
        record.output = output
        rule = decision.rule_obj
        local: Path | None = None
        if self.patches is not None:  # a duplicate path: never patch a file being rewritten
            self.patches.supersede(output, record.dest)
        if self.sink is not None:
            if rule is not None and rule.transform == "pkgconfig":
                local = self._write_pkgconfig(member, stream, output, record.dest)
            elif rule is not None and rule.transform == "nvcc-profile":
                local = self._write_nvcc_profile(member, stream, output, record.dest)
            elif self._text_edits(record.dest):
                local = self._write_text_edited(member, stream, output, record.dest)
            else:
                local = self.sink.write_file(output, record.dest, stream, member.mode)
        self._remember(member.path, _Placed(output, record.dest, kind, local))
        self._count(output, member.size)
        if rename is not None and rename.link_back:
            self.link_backs.add((output, rename))
        if kind.value.startswith("elf-") and local is not None:
            self._patch_stage().add(ElfJob(record, output, record.dest, local, rule))
        elif kind.value.startswith("elf-") and self.sink is None and self.options.patch:
            info = self._patch_stage().spool_info(member.path, stream)
            self._patch_stage().add(ElfJob(record, output, record.dest, None, rule, info=info))


    def _remember(self, path: str, placed: _Placed) -> None:
        self.placed[path] = placed
        self.occupied[(placed.output, placed.dest)] = path
        parent = member_parent(placed.dest)
        while parent and (placed.output, parent) not in self.output_dirs:
            self.output_dirs.add((placed.output, parent))
            parent = member_parent(parent)
        if placed.kind is not Kind.SYMLINK:
            key = (placed.output, member_parent(placed.dest))
            self.own_names.setdefault(key, set()).add(posixpath.basename(placed.dest))
        parent = member_parent(path)
        while parent:
            self.dir_outputs.setdefault(parent, set()).add(placed.output)
            parent = member_parent(parent)
        self.dir_outputs.setdefault("", set()).add(placed.output)

    def _count(self, output: str, size: int) -> None:
        record = self._output_record(output)
        record.files += 1
        record.bytes += size

    def _output_record(self, output: str) -> OutputRecord:
        if output not in self.report.outputs:
            self.report.outputs[output] = OutputRecord(self._final_root(output))
        return self.report.outputs[output]

    # -- pkg-config -------------------------------------------------------------------------

    def _write_pkgconfig(self, member: Member, stream: BinaryIO, output: str,
                         dest: str) -> Path | None:
        assert self.sink is not None
        text = rewrite_pc(self._small_text(member, stream), self._pc_roots(dest))
        text = apply_extras(text, self._pc_extras(posixpath.basename(dest)))
        alias = unversioned_alias(posixpath.basename(dest))
        if alias is not None:
            self.pc_aliases.append((output, dest))
        return self.sink.write_bytes(output, dest, text.encode("utf-8", "surrogateescape"),
                                     member.mode)

    def _text_edits(self, dest: str) -> list[TextEdit]:
        assert self.ruleset is not None
        return [e for e in self.ruleset.package.text_edits if e.matches(dest, self.where)]

    def _write_text_edited(self, member: Member, stream: BinaryIO, output: str,
                           dest: str) -> Path | None:
        """The package table's text edits (libcudss's CMake configs; textedits.py)."""
        assert self.sink is not None
        done = apply_text_edits(self._small_text(member, stream), self._text_edits(dest),
                                self._root, dict(self.options.package_roots))
        for old in done.unmatched:
            self._problem("text-edit-unmatched", member.path, f"{old!r} not found (the "
                          "package table's text_edits; Nixpkgs' --replace-fail fails here)")
        for name in done.missing:
            self._problem("package-root-missing", member.path, f"a text edit names @{name}@: "
                          f"pass --package-root {name.split('.')[0]}=DIR; edit left undone")
        return self.sink.write_bytes(output, dest, done.text.encode("utf-8", "surrogateescape"),
                                     member.mode)

    def _small_text(self, member: Member, stream: BinaryIO) -> str:
        """Text members we rewrite are small; refuse a huge one rather than buffer it."""
        data = stream.read(MAX_PC_SIZE + 1)
        if len(data) > MAX_PC_SIZE:
            raise SourceError("text file to rewrite is larger than 1 MiB",
                              source=self.source.description, member=member.path)
        return data.decode("utf-8", "surrogateescape")

    def _final_root(self, output: str) -> str:
        """Where ``output`` lives once the run is over (what links, .pc and RUNPATH name)."""
        if self.sink is not None:
            return self.sink.output_root(output)
        return self.plan_roots.get(output, "/${" + output + "}")

    def _root(self, output: str) -> str:
        return self._final_root(fallback_output(output, self.allowed))

    def _pc_roots(self, dest: str) -> PcRoots:
        assert self.ruleset is not None
        package = self.ruleset.package
        name = posixpath.basename(dest)
        edits = [e for e in package.pkgconfig_edits if e.matches(name, self.where)]
        stubs_libdir = any(glob.matches(name) for glob in package.pkgconfig_stubs_libdir)
        libdir = self._root("lib") + "/lib"
        if stubs_libdir:
            libdir = self._root("stubs") + "/lib/stubs"
        for edit in edits:
            if edit.libdir_output is not None:
                # nvml: libdir=<stubs>/lib; its Libs line appends /stubs itself.
                libdir = self._root(edit.libdir_output) + "/lib"
        driver = self.options.runpath.driver_lib_dir()
        wants_rpath = package.pkgconfig_driver_rpath or any(e.driver_rpath for e in edits)
        return PcRoots(
            cudaroot=self._root("dev"), libdir=libdir,
            includedir=self._root("include") + "/include",
            extra_libs=f"-Wl,-rpath,{driver}" if wants_rpath and driver else "")

    def _pc_extras(self, name: str) -> PcExtras:
        """Requires:, replacements, cudaroot removal and extra Cflags from pkgconfig_edits."""
        assert self.ruleset is not None
        edits = [e for e in self.ruleset.package.pkgconfig_edits if e.matches(name, self.where)]
        release = major_minor(name) or self.where.cuda_version
        requires = tuple(f"{r}-{release}" if release else r for e in edits for r in e.requires)
        roots = dict(self.options.package_roots)
        cflags = []
        for pname in (p for e in edits for p in e.cflags_packages):
            if pname in roots:
                cflags.append(f"-I{roots[pname]}/include")
            else:
                self._warn("package-root-missing", name,
                           f"Cflags wants {pname}'s include dir: pass --package-root {pname}=DIR")
        return PcExtras(requires=requires,
                        replace=tuple(pair for e in edits for pair in e.replace),
                        drop_cudaroot=any(e.drop_cudaroot for e in edits),
                        cflags=" ".join(cflags))

    def _write_nvcc_profile(self, member: Member, stream: BinaryIO, output: str,
                            dest: str) -> Path | None:
        """nvcc finds headers, libraries and NVVM through ``$(TOP)``: point each at its output."""
        assert self.sink is not None and self.ruleset is not None
        nvvm = self.ruleset.classify(self._normalise("nvvm/bin/cicc")[0] or "nvvm/bin/cicc",
                                     Kind.ELF_EXEC, self.allowed).output or "out"
        roots = {"include": self._root("include"), "lib": self._root("lib"),
                 "stubs": self._root("stubs"), "nvvm": self._root(nvvm),
                 "bin": self._root(output)}
        package = self.ruleset.package
        cccl = self._package_root("cuda_cccl", "include") if package.nvcc_includes else None
        if cccl is not None:
            roots["cccl"] = cccl
        extras = ProfileExtras(
            includes=self._package_dirs(package.nvcc_includes, "include", ("include",)),
            libraries=self._package_dirs(package.nvcc_libraries, "lib", ("lib",))
            + self._package_dirs(package.nvcc_libraries, "static", ("lib",))
            + self._package_dirs(package.nvcc_libraries, "stubs", ("lib/stubs",)))
        extras = replace(extras, libraries=tuple(dict.fromkeys(extras.libraries)))
        text = rewrite_nvcc_profile(self._small_text(member, stream), roots, extras)
        return self.sink.write_bytes(output, dest, text.encode("utf-8", "surrogateescape"),
                                     member.mode)

    def _package_root(self, pname: str, output: str) -> str | None:
        """``--package-root PNAME.OUTPUT=DIR`` for a split package, else ``PNAME=DIR``."""
        roots = dict(self.options.package_roots)
        return roots.get(f"{pname}.{output}") or roots.get(pname)

    def _package_dirs(self, pnames: tuple[str, ...], output: str,
                      subdirs: tuple[str, ...]) -> tuple[str, ...]:
        dirs: list[str] = []
        for pname in pnames:
            root = self._package_root(pname, output)
            if root is None:
                self._warn("package-root-missing", None,
                           f"nvcc.profile: no --package-root for {pname}; its {output} "
                           "directory is not searched")
                continue
            dirs.extend(f"{root}/{sub}" for sub in subdirs if Path(root, sub).is_dir())
        return tuple(dirs)

    def _copy_packages(self) -> None:
        """Package ``copy_packages`` (cuda_nvcc 13: libnvvm's tree into nvvm/), by root."""
        assert self.ruleset is not None
        for entry in self.ruleset.package.copy_packages:
            if not entry.gate.applies(self.where):
                continue
            root = self._package_root(entry.package, "out")
            if root is None or not Path(root).is_dir():
                self._warn("package-root-missing", None, f"{entry.package} is copied into "
                           f"{entry.subdir}/: pass --package-root {entry.package}=DIR")
                continue
            self._copy_tree(Path(root), entry.subdir)

    def _copy_tree(self, root: Path, subdir: str) -> None:
        """Files and links of another package's output (its nix-support/ stays behind)."""
        assert self.ruleset is not None and self.sink is not None
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix()
            real_dir = path.is_dir() and not path.is_symlink()
            if real_dir or rel.split("/", 1)[0] == "nix-support":
                continue
            dest = f"{subdir}/{rel}"
            output = self.ruleset.classify(dest, Kind.FILE, self.allowed).output or "out"
            if path.is_symlink():
                self._add_link(output, dest, os.readlink(path), f"{BUILTIN}:copy-package")
                continue
            with open(path, "rb") as fh:
                self.sink.write_file(output, dest, fh, path.stat().st_mode & 0o777)
            self.occupied[(output, dest)] = f"{BUILTIN}:copy-package"
            self._count(output, path.stat().st_size)

    # -- links ------------------------------------------------------------------------------

    def _finish_links(self) -> None:
        self.symlink_index = {m.path: m.link for m, _ in self.symlinks if m.link is not None}
        for member, record in self.hardlinks:
            self._place_hardlink(member, record)
        for member, record in self.symlinks:
            self._place_symlink(member, record)
        self._place_link_backs()
        self._place_pc_aliases()
        self._place_extra_links()

    def _defer_hardlink(self, member: Member, record: MemberRecord) -> None:
        """Tar semantics: a hard link names an *earlier* file. Links are placed at the end, so
        without this check a link to itself, to a later member or to a symlink could resolve."""
        if member.link in self.placed:
            self.hardlinks.append((member, record))
            return
        record.dest = None
        self._warn("dangling-hardlink", member.path,
                   f"hard link to {member.link!r}, which is not an earlier placed file; skipped")

    def _place_hardlink(self, member: Member, record: MemberRecord) -> None:
        assert self.ruleset is not None and member.link is not None
        source = self.placed.get(member.link)
        if source is None:
            record.dest = None
            self._warn("dangling-hardlink", member.path,
                       f"hard link to {member.link!r}, which was not placed")
            return
        decision = self.ruleset.classify(record.dest or member.path, source.kind, self.allowed)
        if decision.output is None:
            record.dest, record.note, record.rule = None, "dropped by rule", str(decision.rule)
            return
        output = fallback_output(decision.output, self.allowed)
        record.output, record.rule = output, str(decision.rule)
        assert record.dest is not None
        if self.sink is not None:
            self.sink.make_hardlink(output, record.dest, source.output, source.dest)
        local = self._local(output, record.dest)
        self._remember(member.path, _Placed(output, record.dest, source.kind, local))
        if output != source.output and source.kind.value.startswith("elf-") and local is not None:
            self._patch_stage().add(ElfJob(record, output, record.dest, local, decision.rule_obj))

    def _local(self, output: str, dest: str) -> Path | None:
        local_path = getattr(self.sink, "local_path", None)
        return local_path(output, dest) if local_path is not None else None

    def _place_symlink(self, member: Member, record: MemberRecord) -> None:
        assert member.link is not None and record.dest is not None
        if _join_link(member.path, member.link) is None:
            # Like tarfile's "data" filter: a link that leaves the package root is refused
            # whatever else the archive does with its name.
            record.dest = None
            self._problem("unsafe-symlink", member.path,
                          f"symlink target {member.link!r} leaves the package root; refused")
            return
        clash = self._symlink_clash(member.path)
        if clash is not None:
            record.dest = None
            self._problem(clash[0], member.path, clash[1])
            return
        target = self._resolve(member.path, set())
        if target is None:
            record.dest = None
            self._problem("dangling-symlink", member.path,
                          f"symlink target {member.link!r} is not in the archive "
                          "(or was dropped); link skipped")
            return
        immediate = _join_link(member.path, member.link)
        assert immediate is not None
        outputs = [target.output] if isinstance(target, _Placed) else sorted(target)
        text = self._link_text(member.link, record.dest, immediate)
        record.output, record.link = outputs[0], text
        own = record.rule
        record.rule = f"{BUILTIN}:follow-target"
        record.note = f"placed with its target (own rule {own})" + (
            f"; also in {', '.join(outputs[1:])}" if len(outputs) > 1 else "")
        for output in outputs:
            self._add_link(output, record.dest, text, member.path)
        if isinstance(target, _Placed):
            self.placed[member.path] = _Placed(target.output, record.dest, Kind.SYMLINK, None)

    def _symlink_clash(self, path: str) -> tuple[str, str] | None:
        """Files win over symlinks of the same name, and no symlink is placed below another:
        creating it would replace earlier members or be written through the other link."""
        placed = self.placed.get(path)
        if (placed is not None and placed.kind is not Kind.SYMLINK) or path in self.dir_outputs:
            return ("duplicate-member",
                    "a file or directory of the same name came first; symlink skipped")
        parent = member_parent(path)
        while parent:
            if self._symlink_target(parent) is not None:
                return "under-symlink", f"lies below the symlink {parent!r}; skipped"
            parent = member_parent(parent)
        return None

    def _link_text(self, original: str, link_dest: str, immediate: str) -> str:
        """Keep the archive's relative text unless normalisation moved one side.

        Only canonical text is kept: the kernel resolves ``a/../b`` through ``a``'s target
        when ``a`` is a symlink, so ``up/../..`` can climb further than ``normpath`` says.
        """
        assert self.ruleset is not None
        immediate_dest = self._normalise(immediate)[0] or immediate
        link_dir = member_parent(link_dest)
        if (_canonical_link(original)
                and posixpath.normpath(posixpath.join(link_dir, original)) == immediate_dest):
            return original
        return posixpath.relpath(immediate_dest or ".", link_dir or ".")

    def _resolve(self, path: str, seen: set[str]) -> _Placed | set[str] | None:
        """Follow symlinks inside the archive namespace: a placed file, a dir's outputs, or None."""
        if path in seen or len(seen) > 40:
            return None
        seen.add(path)
        if path in self.placed and self.placed[path].kind is not Kind.SYMLINK:
            return self.placed[path]
        link = self._symlink_target(path)
        if link is not None:
            joined = _join_link(path, link)
            return None if joined is None else self._resolve(joined, seen)
        if path in self.dir_outputs:
            return set(self.dir_outputs[path])
        return self._resolve_through_parent(path, seen)

    def _resolve_through_parent(self, path: str, seen: set[str]) -> _Placed | set[str] | None:
        """``a/b/c`` where ``a/b`` is itself a symlink: substitute the parent's target."""
        parent = member_parent(path)
        while parent:
            link = self._symlink_target(parent)
            if link is not None:
                joined = _join_link(parent, link)
                if joined is None:
                    return None
                rest = path[len(parent) + 1:]
                return self._resolve(posixpath.join(joined, rest) if joined else rest, seen)
            parent = member_parent(parent)
        return None

    def _symlink_target(self, path: str) -> str | None:
        return self.symlink_index.get(path)

    def _add_link(self, output: str, dest: str, text: str, origin: str) -> None:
        """Create a symlink unless the name is taken: by a member, an earlier link, or a real
        directory holding files (the link would replace it)."""
        if (output, dest) in self.occupied:
            return
        if (output, dest) in self.output_dirs:
            self._warn("link-over-directory", origin,
                       f"not placed in {output}: a directory of that name holds files")
            return
        if self.sink is not None:
            self.sink.make_symlink(output, dest, text)
        self.occupied[(output, dest)] = origin

    def _place_link_backs(self) -> None:
        """``lib64 -> lib`` in each output that received files from a real ``lib64/``."""
        for output, rename in sorted(self.link_backs, key=lambda x: (x[0], x[1].source)):
            dest = rename.source.rstrip("/")
            text = posixpath.relpath(rename.target.rstrip("/"), member_parent(dest) or ".")
            self._add_link(output, dest, text, f"{BUILTIN}:{rename.ref}")

    def _place_pc_aliases(self) -> None:
        """``cuda.pc -> cuda-12.9.pc``: pkg-config users ask for the unversioned name."""
        for output, dest in self.pc_aliases:
            name = posixpath.basename(dest)
            alias = unversioned_alias(name)
            assert alias is not None
            self._add_link(output, posixpath.join(member_parent(dest), alias), name,
                           f"{BUILTIN}:pkgconfig-alias")

    def _place_extra_links(self) -> None:
        """Package ``stub_links``: created in every output holding the target, if still free."""
        assert self.ruleset is not None
        for dest, target in sorted(self.ruleset.package.stub_links.items()):
            target_dest = posixpath.normpath(posixpath.join(member_parent(dest), target))
            holders = {o for (o, d) in self.occupied if d == target_dest}
            # A link to a directory (cuda_cccl's include/cccl -> .) goes where it has content.
            holders |= {o for (o, d) in self.output_dirs if d == target_dest}
            for output in sorted(holders):
                self._add_link(output, dest, target, f"{BUILTIN}:stub-link")
        for entry in self.ruleset.package.link_into:  # tensorrt's include/onnx
            for output, dest, target in entry.links(list(self.occupied), self.where):
                self._add_link(output, dest, target, f"{BUILTIN}:link-into")

    # -- nix-support and checks -------------------------------------------------------------

    def _nix_support(self) -> NixSupport:
        assert self.ruleset is not None
        package = self.ruleset.package
        ident = self.options.package or self.source.package
        outputs = self.sink.outputs() if self.sink is not None else []
        compiler = package.compiler
        compiler_output = next((o for (o, d) in self.occupied if d == compiler), None)
        stubs = sorted({o for (o, d) in self.output_dirs if d in ("lib/stubs", "stubs")})
        driver = self.options.runpath.driver_lib_dir() or "/run/opengl-driver/lib"
        return NixSupport(
            pname=ident.name, version=ident.version, cuda_version=self.where.cuda_version,
            propagated=package.propagated(outputs),
            compiler=compiler, compiler_output=compiler_output,
            stubs_outputs=tuple(stubs), driver_lib=driver,
            component_hook=self.options.cuda_component_hook)

    def _check_fhs_refs(self) -> None:
        """checkCudaFhsRefs: ``/usr/`` in any output fails the run unless the package allows it."""
        assert self.ruleset is not None
        if not self.options.check_fhs_refs or self.ruleset.package.allow_fhs_references:
            return
        local_path = getattr(self.sink, "local_path", None)
        if self.sink is None or local_path is None:
            return
        # The sink's working directory of each output (staged until the run finishes).
        roots = {o: Path(local_path(o, "nix-support")).parent for o in self.sink.outputs()}
        hits = find_fhs_refs({o: r for o, r in roots.items() if r.is_dir()})
        for output, path in hits:
            self._problem("fhs-reference", path, f"{output}: mentions /usr/ (the package table "
                          "does not set allow_fhs_references; checkCudaFhsRefs)")
        if hits:
            raise ProblemsFound(
                f"{self.source.description}: /usr/ references under --check-fhs-refs; first: "
                f"{hits[0][0]}:{hits[0][1]}", self.report)

    # -- checks and completion --------------------------------------------------------------

    def _check(self) -> None:
        assert self.ruleset is not None
        self._public_messages()
        package = self.ruleset.package
        declared = self.declared or ()
        # Like Nixpkgs, out and dev may stay empty (they carry nix-support files anyway).
        exempt = {"out", "dev", *package.optional_outputs}
        for name in declared:
            if name not in exempt:
                rec = self.report.outputs.get(name)
                if rec is None or rec.files == 0:
                    self._problem("empty-output", None,
                                  f"declared output {name!r} received no files")
        for record in self.report.members:
            if record.rule == f"{BUILTIN}:unclaimed":
                self._problem("unclaimed", record.path,
                              "no rule claimed this member (it went to out)")
        failing = [*self.report.problems,
                   *(w for w in self.report.warnings if w.code in STRICT_WARNINGS)]
        if self.options.strict and failing:
            raise ProblemsFound(
                f"{self.source.description}: {len(failing)} problem(s) under "
                f"--strict; first: {failing[0]}", self.report)

    def _complete(self) -> None:
        if self.options.progress is not None:
            self.options.progress(Progress(self.source.description, self.members_seen,
                                           self.bytes_seen, "", done=True))
        if self.sink is not None:
            for name in self.sink.outputs():
                self._output_record(name)
            self.sink.finish()

    def _problem(self, code: str, path: str | None, message: str) -> None:
        self.report.problems.append(Problem(code, path, message))

    def _warn(self, code: str, path: str | None, message: str) -> None:
        self.report.warnings.append(Problem(code, path, message))


def _join_link(link_path: str, target: str) -> str | None:
    """Archive path a relative link points at; None when it is absolute or climbs out."""
    if target.startswith("/") or not target:
        return None
    joined = posixpath.normpath(posixpath.join(member_parent(link_path), target))
    if joined == ".":
        return ""
    if joined.startswith("../") or joined == "..":
        return None
    return joined


def _canonical_link(text: str) -> bool:
    """``../../a/b``: every ``..`` leads, no ``.`` or empty component follows."""
    parts = text.split("/")
    while parts and parts[0] == "..":
        parts.pop(0)
    return all(p not in ("", ".", "..") for p in parts)


# -- public entry points ---------------------------------------------------------------------


def open_for(source: str | os.PathLike[str] | Source, options: SplitOptions) -> Source:
    """A path opened the way ``options`` asks (identity override, jobs, bomb limits)."""
    check_package_known(options)
    if not isinstance(source, (str, os.PathLike)):
        return source
    return open_source(source, package=options.package, jobs=options.effective_jobs(),
                       limits=Limits(options.max_total_bytes, options.max_ratio,
                                     options.max_members),
                       strip_components=options.strip_components)


def split(source: str | os.PathLike[str] | Source, sink: Sink | None, *,
          options: SplitOptions | None = None,
          plan_roots: Mapping[str, str] | None = None) -> Report:
    """Split ``source`` into ``sink`` (``None``: plan only, write nothing; RUNPATHs and links
    are then planned against ``plan_roots``, output name -> final directory)."""
    opts = options or SplitOptions()
    source = open_for(source, opts)
    if opts.dry_run:
        sink = None
    return SplitRun(source, sink, opts, plan_roots).run()


__all__ = ["Progress", "SplitOptions", "SplitRun", "fallback_output", "member_kind", "open_for",
           "split"]
