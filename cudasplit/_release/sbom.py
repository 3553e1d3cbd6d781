"""``cudasplit sbom``: what a bill of materials says, read from tarballs, a release or a split.

This module reads; :mod:`cudasplit._release.sbomcdx` writes the facts as CycloneDX 1.6 and
:mod:`cudasplit._release.sbomspdx` as SPDX 2.3. One read serves both documents.

* A tarball (or unpacked tree): one pass. The plan of a dry-run split says where each member
  goes and what it carries; the member bytes are hashed as they stream past (a member the
  plan does not read is read to its end for the hash), so the hashes are of NVIDIA's bytes.
  ELF members are spooled as they pass, for their SONAME, ``DT_NEEDED`` and ``dlopen`` names
  (:mod:`cudasplit._release.sonames`, what ``nixify`` reads).
* A release: a manifest and the directory of its tarballs. Each tarball found is checked
  against the manifest (size, then sha256) before it is read; one the manifest does not vouch
  for stops the run (``tarball-mismatch``). Tarballs the manifest names but the directory
  lacks are left out, each with a ``tarball-missing`` warning, unless ``packages`` names them.
* A split directory (``DIR/<output>/`` or a batch's ``DIR/<package>/<output>/``): the files
  as written (RUNPATHs rewritten), hashed where they lie. Which package it holds comes from
  the batch directory's name, the split's own report (a ``*.json`` beside or in the outputs),
  or ``nix-support/cuda-component`` with the platform of its ELF files; never guessed.

Every package is known by name, version, platform and CUDA variant, each checked against the
manifest schema's patterns (they become refs, purls and SPDX ids), so one package for two
platforms is two components with two refs. The dependency edges are ``nixify``'s
``buildInputs`` among the packages of the same platform: the providers of each package's
``DT_NEEDED`` and ``dlopen`` names (:func:`cudasplit._release.sonames.dependencies`) and the
packages its package table names (:func:`cudasplit._release.nixify.table_needs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, BinaryIO
from urllib.parse import quote

from cudasplit._elf.plan import is_driver_name, is_glibc_name
from cudasplit._elf.read import kind_from_head, read_inside
from cudasplit._model import OUTPUT_NAMES, Member, MemberType, PackageId
from cudasplit._release.manifest import (
    PLATFORM_WORD,
    PNAME,
    VERSION_WORD,
    Artifact,
    VerifyStatus,
    load_manifest,
    select_artifacts,
    sha256_file,
    verify,
)
from cudasplit._release.nixify import DEFAULT_BASE_URL, cuda_version_of, table_needs
from cudasplit._release.sonames import (
    ElfNames,
    PackageLinks,
    dependencies,
    elf_names,
    provider_index,
    scan_elf_dir,
)
from cudasplit._report import Report
from cudasplit._rulebook import Where, load_ruleset
from cudasplit._run import ProgressCallback, Tally
from cudasplit._source import Source, open_source, parse_top_dir
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import ManifestError, OptionsError, SourceError

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_LICENCE", "SUPPLIER", "SUPPLIER_URL", "Archive",
           "SbomContent", "SbomFile", "SbomPackage", "is_split_dir", "read_report_identity",
           "sbom_of", "source_date", "split_identity", "tool_version"]

log = logging.getLogger("cudasplit")

DEFAULT_LICENCE = "NVIDIA proprietary (see the package's LICENSE file)"
SUPPLIER = "NVIDIA Corporation"
SUPPLIER_URL = "https://www.nvidia.com"
# A split's report of a whole libcublas is a few MB; anything far larger is not one.
MAX_REPORT_BYTES = 16 << 20
MAX_COMPONENT_BYTES = 4096   # nix-support/cuda-component is one short line
MAX_EPOCH = 253402300799     # SOURCE_DATE_EPOCH up to 9999-12-31
_VARIANT = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3})?")
_FIELD = re.compile(r'\[([A-Za-z]{1,40})\]="((?:[^"\\]|\\.){0,256})"')
# e_machine -> NVIDIA platform. AArch64 is linux-sbsa or (CUDA 12 and older) linux-aarch64.
_MACHINES = {62: "linux-x86_64", 21: "linux-ppc64le", 183: "linux-sbsa"}


@dataclass(frozen=True, slots=True)
class Archive:
    """The tarball a package came from.

    Attributes:
        sha256: of the tarball's bytes (checked against the manifest where one vouches).
        size: its size in bytes.
        relative_path: the manifest's ``relative_path`` (None without a manifest).
        url: where it is downloaded from (the base URL + ``relative_path``).
        manifest: the manifest that vouches for it (its file name), None without one.
    """

    sha256: str
    size: int
    relative_path: str | None = None
    url: str | None = None
    manifest: str | None = None


@dataclass(frozen=True, slots=True)
class SbomFile:
    """One file of a package: where it is in its output, its hashes and what it carries."""

    path: str               # inside the output (after renames)
    output: str
    sha256: str
    sha1: str | None        # for SPDX, whose files need one; None when not asked for
    size: int
    member: str | None = None   # the archive path it came from
    gpu: tuple[dict[str, Any], ...] = ()
    glibc: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class SbomPackage:
    """One package: its identity, its archive, its files and the packages it needs."""

    name: str
    version: str
    platform: str
    cuda_variant: str | None
    licence: str
    licence_url: str | None = None
    archive: Archive | None = None
    files: list[SbomFile] = field(default_factory=list)
    depends: tuple[str, ...] = ()       # keys of the packages providing what it needs
    resolves: dict[str, tuple[str, ...]] = field(default_factory=dict)  # key -> why
    outside: tuple[str, ...] = ()       # names it needs that no package here provides
    split: bool = False                 # files as a split wrote them (not NVIDIA's bytes)

    @property
    def key(self) -> str:
        """``name@version/platform[/cudaNN]``: unique within a document, the CycloneDX ref."""
        variant = f"/cuda{self.cuda_variant}" if self.cuda_variant else ""
        return f"{self.name}@{self.version}/{self.platform}{variant}"

    @property
    def purl(self) -> str:
        """``pkg:generic/nvidia/<name>@<version>?platform=<platform>[&cuda_variant=N]``.

        ``generic``: NVIDIA's redistributables belong to no package ecosystem purl has a type
        for (they are neither conda nor PyPI packages, whose purls name other artifacts);
        ``nvidia`` is the namespace of the vendor, the name and version the manifest's. The
        platform and the CUDA variant tell apart the tarballs of one version.
        """
        qualifiers = {"platform": self.platform}
        if self.cuda_variant:
            qualifiers["cuda_variant"] = self.cuda_variant
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in sorted(qualifiers.items()))
        return (f"pkg:generic/nvidia/{quote(self.name, safe='')}@"
                f"{quote(self.version, safe='')}?{query}")


@dataclass(frozen=True, slots=True)
class SbomContent:
    """What a document describes: its subject, the packages, what was left out."""

    name: str
    version: str | None
    packages: tuple[SbomPackage, ...]   # sorted by key
    left_out: tuple[str, ...] = ()      # manifest labels without a tarball here
    manifest: str | None = None

    def digest(self) -> str:
        """A sha256 of everything the document says: the seed of its serial number and
        namespace, so the same content gives the same document."""
        digest = hashlib.sha256(f"{self.name}\0{self.version}\n".encode())
        for package in self.packages:
            digest.update(f"{package.key}\0{package.archive}\0{package.depends}\n".encode())
            for f in package.files:
                digest.update(f"{f.output}\0{f.path}\0{f.sha256}\n".encode())
        return digest.hexdigest()


# -- checks -----------------------------------------------------------------------------------

def _checked_identity(ident: PackageId, where: str) -> tuple[str, str, str, str | None]:
    """(name, version, platform, variant), each of the manifest schema's shape: they become
    refs, purls and SPDX ids. A missing or odd one is an error that says how to name it."""
    how = "name the package (package <pname>-<platform>-<version>)"
    if not ident.version or not ident.platform:
        missing = " and ".join(w for w, v in (("version", ident.version),
                                                ("platform", ident.platform)) if not v)
        raise SourceError(f"the package's {missing} cannot be told; {how}", source=where)
    for what, value, pattern in (("name", ident.name, PNAME),
                                 ("version", ident.version, VERSION_WORD),
                                 ("platform", ident.platform, PLATFORM_WORD)):
        if not pattern.fullmatch(value):
            raise SourceError(f"package {what} {value[:80]!r} is not of the manifest's shape "
                              f"(it would go into the SBOM's refs and purls); {how}",
                              source=where)
    variant = ident.cuda_variant
    if variant is not None and not _VARIANT.fullmatch(variant):
        raise SourceError(f"CUDA variant {variant[:20]!r} is not a CUDA major", source=where)
    return ident.name, ident.version, ident.platform, variant


def source_date() -> int:
    """``SOURCE_DATE_EPOCH`` (reproducible builds' convention), else 0; an unreadable or
    out-of-range value is an :class:`OptionsError`, never a silent other date."""
    text = os.environ.get("SOURCE_DATE_EPOCH", "")
    if not text:
        return 0
    if not text.isascii() or not text.isdigit() or len(text) > 12 or int(text) > MAX_EPOCH:
        raise OptionsError(f"SOURCE_DATE_EPOCH={text[:20]!r} is not a number of seconds "
                           f"from 0 to {MAX_EPOCH}")
    return int(text)


def tool_version() -> str:
    """cudasplit's version, as the documents name their tool."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("cudasplit")
    except PackageNotFoundError:
        return "unknown"


# -- reading a tarball or an unpacked tree ----------------------------------------------------

class _Tee:
    """A member's stream that hashes what passes through it (and the rest, on :meth:`drain`),
    and copies it to ``spool`` when given (an ELF member, for its names)."""

    def __init__(self, stream: BinaryIO, sha1: bool, spool: IO[bytes] | None) -> None:
        self._stream, self._spool = stream, spool
        self.sha256 = hashlib.sha256()
        self.sha1 = hashlib.sha1(usedforsecurity=False) if sha1 else None
        self.size = 0

    def _saw(self, data: bytes | memoryview) -> None:
        self.sha256.update(data)
        if self.sha1 is not None:
            self.sha1.update(data)
        if self._spool is not None:
            self._spool.write(data)
        self.size += len(data)

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._saw(data)
        return data

    def read1(self, size: int = -1) -> bytes | memoryview:
        read1 = getattr(self._stream, "read1", None)
        data: bytes | memoryview = read1(size) if read1 is not None else self._stream.read(size)
        self._saw(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def drain(self) -> None:
        while self.read(1 << 20):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@dataclass(slots=True)
class _Seen:
    """One member as it passed: its hashes and size."""

    sha256: str
    sha1: str | None
    size: int


class _TeeSource:
    """The members of ``inner``, each hashed whole (and an ELF member's names read from its
    spooled copy) before the next one is read; anything else is ``inner``'s."""

    def __init__(self, inner: Source, sha1: bool, spool: IO[bytes]) -> None:
        self.inner, self.description = inner, inner.description
        self._sha1, self._spool = sha1, spool
        self.seen: dict[str, _Seen] = {}
        self.names: dict[str, ElfNames] = {}

    @property
    def package(self) -> PackageId:
        return self.inner.package

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        """A member's rest is hashed before the next is asked for (a tar stream skips it)."""
        pending: tuple[Member, _Tee] | None = None
        members = self.inner.members()
        while True:
            self._finish(pending)
            pending = None
            step = next(members, None)
            if step is None:
                return
            member, stream = step
            if stream is not None and member.type is MemberType.FILE:
                elf = kind_from_head(member.head) is not None
                if elf:
                    self._spool.seek(0)
                    self._spool.truncate()
                tee = _Tee(stream, self._sha1, self._spool if elf else None)
                pending = (member, tee)
                yield member, tee  # type: ignore[misc]
            else:
                yield member, stream

    def _finish(self, pending: tuple[Member, _Tee] | None) -> None:
        if pending is None:
            return
        member, tee = pending
        tee.drain()
        self.seen[member.path] = _Seen(tee.sha256.hexdigest(),
                                       None if tee.sha1 is None else tee.sha1.hexdigest(),
                                       tee.size)
        if kind_from_head(member.head) is not None:
            self._spool.flush()
            found = elf_names(member.path, self._spool.name)
            if found is not None:
                self.names[member.path] = found


@dataclass(frozen=True, slots=True)
class _Read:
    """One tarball or tree read: its identity, files and ELF names."""

    ident: PackageId
    files: list[SbomFile]
    names: tuple[ElfNames, ...]


def _read_source(path: str | os.PathLike[str], *, package: PackageId | None,
                 strip_components: int | None, jobs: int, sha1: bool,
                 progress: ProgressCallback | None) -> _Read:
    inner = open_source(path, package=package, jobs=jobs, strip_components=strip_components)
    with tempfile.NamedTemporaryFile(prefix="cudasplit-sbom-") as spool:
        source = _TeeSource(inner, sha1, spool)
        options = SplitOptions(dry_run=True, patch=False, jobs=jobs, package=package,
                               strip_components=strip_components, default_rules=True,
                               progress=progress)
        report = _split(source, None, options=options)
    ident = PackageId(str(report.package.get("name") or ""), report.package.get("platform"),
                      report.package.get("version"), report.package.get("cuda_variant"))
    return _Read(ident, _files_of(report, source.seen), tuple(sorted(source.names.values())))


def _files_of(report: Report, seen: dict[str, _Seen]) -> list[SbomFile]:
    """The placed files of a dry run with their hashes; a hard link has its target's bytes;
    a name placed twice (tar: the later member wins) once."""
    files: dict[tuple[str, str], SbomFile] = {}
    for m in report.members:
        if m.output is None or m.dest is None:
            continue
        got = seen.get(m.path)
        if got is None and m.kind == "hardlink" and m.link is not None:
            got = seen.get(m.link)
        if got is None:
            continue
        files[(m.output, m.dest)] = SbomFile(
            m.dest, m.output, got.sha256, got.sha1, got.size, m.path,
            tuple(m.gpu or ()), tuple(m.glibc or ()))
    return [files[k] for k in sorted(files)]


# -- a release: manifest and tarballs ---------------------------------------------------------

def _from_manifest(manifest: Path, tarballs: Path, *, platforms: Sequence[str],
                   packages: Sequence[str] | None, base_url: str, jobs: int, sha1: bool,
                   tally: Tally) -> SbomContent:
    loaded = load_manifest(manifest)
    name = Path(loaded.source).name
    if packages:
        known = {p.pname for p in loaded.packages}
        unknown = sorted(set(packages) - known)
        if unknown:
            raise ManifestError(f"{name}: no package {', '.join(map(repr, unknown))} "
                                "[package-not-in-manifest]")
    chosen = select_artifacts(loaded, platforms=platforms, packages=packages or None)
    if not chosen:
        raise ManifestError(f"{name}: no tarball for platform {', '.join(platforms)}"
                            + (f" and package {', '.join(packages)}" if packages else ""))
    checked = verify(loaded, tarballs, platforms=platforms, packages=packages or None,
                     jobs=jobs, progress=_hashing(tally))
    for result in checked.results:
        if result.status in (VerifyStatus.SIZE_MISMATCH, VerifyStatus.HASH_MISMATCH):
            what = (f"{result.actual_size} bytes, the manifest {name} says "
                    f"{result.artifact.size}" if result.status is VerifyStatus.SIZE_MISMATCH
                    else f"sha256 {result.actual_sha256}, the manifest {name} says "
                    f"{result.artifact.sha256}")
            raise SourceError(f"{what}: not the tarball the manifest vouches for "
                              "[tarball-mismatch]", source=str(result.path))
        if result.status is VerifyStatus.UNREADABLE:
            raise SourceError(f"cannot read ({result.detail}) [tarball-unreadable]",
                              source=str(result.path))
    missing = [r.artifact for r in checked.results if r.status is VerifyStatus.MISSING]
    if missing and packages:
        raise SourceError(f"no tarball {missing[0].filename} for {missing[0].label} "
                          f"(packages names it) [tarball-missing]", source=str(tarballs))
    for artifact in missing:
        log.warning("%s: no tarball %s in %s; left out of the SBOM [tarball-missing]",
                    artifact.label, artifact.filename, tarballs)
    found = [r for r in checked.results if r.status is VerifyStatus.OK]
    if not found:
        raise SourceError(f"none of the {len(chosen)} tarballs {name} names for this "
                          "selection is here [tarball-missing]", source=str(tarballs))
    read: list[tuple[SbomPackage, tuple[ElfNames, ...]]] = []
    for result in found:
        artifact, path = result.artifact, Path(str(result.path))
        entry = loaded.package(artifact.package)
        meter = tally.meter(artifact.filename)
        got = _read_source(path, package=None, strip_components=None, jobs=jobs, sha1=sha1,
                           progress=meter.progress() if tally.progress else None)
        meter.finish()
        _check_agrees(got.ident, artifact, entry.version, str(path))
        ident = PackageId(artifact.package, artifact.platform, entry.version,
                          artifact.cuda_variant)
        pname, version, platform, variant = _checked_identity(ident, str(path))
        read.append((SbomPackage(
            pname, version, platform, variant, entry.license or DEFAULT_LICENCE,
            base_url + entry.license_path if entry.license_path else None,
            Archive(artifact.sha256, artifact.size, artifact.relative_path,
                    base_url + artifact.relative_path, name),
            got.files), got.names))
    return SbomContent(loaded.release_product or name, loaded.release_label,
                       _linked(read, cuda_version_of(loaded)), tuple(a.label for a in missing),
                       name)


def _hashing(tally: Tally) -> ProgressCallback | None:
    """``verify``'s progress (bytes hashed) as this run's: one count of bytes throughout."""
    if tally.progress is None:
        return None
    return lambda update: tally.reach(f"checking {update.current}", update.bytes)


def _check_agrees(found: PackageId, artifact: Artifact, version: str, where: str) -> None:
    """A tarball the manifest vouches for by its bytes names the same package inside: a
    manifest entry pointing at another package's tarball is refused, not described wrongly."""
    for what, inside, listed in (("package", found.name, artifact.package),
                                 ("platform", found.platform, artifact.platform),
                                 ("version", found.version, version)):
        if inside and inside != listed:
            raise SourceError(f"its top directory names {what} {inside!r}, the manifest "
                              f"{listed!r} [tarball-mismatch]", source=where)


# -- a split directory ------------------------------------------------------------------------

def is_split_dir(path: Path) -> bool:
    """``DIR/<output>/...`` or a batch's ``DIR/<package>/<output>/...``. An unpacked
    redistributable is not one, although its ``bin``, ``include`` and ``lib`` have the names
    of outputs: it is named ``*-archive`` (or holds only such a directory), or it has files
    at its top (NVIDIA's ``LICENSE``), where a split has only its outputs (and its report)."""
    if parse_top_dir(path.name) is not None:
        return False
    entries = list(path.iterdir())
    if any(not p.is_dir() and p.suffix != ".json" for p in entries):
        return False
    subdirs = [p for p in entries if p.is_dir() and not p.is_symlink()]
    if len(subdirs) == 1 and parse_top_dir(subdirs[0].name) is not None:
        return False
    if subdirs and all(p.name in OUTPUT_NAMES for p in subdirs):
        return True
    return bool(subdirs) and all(
        any(q.is_dir() and q.name in OUTPUT_NAMES for q in p.iterdir()) for p in subdirs)


def _split_roots(root: Path) -> list[Path]:
    """The package directories of a split directory: itself, or a batch's packages."""
    if any(p.is_dir() and p.name in OUTPUT_NAMES for p in root.iterdir()):
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def _outputs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and not p.is_symlink() and p.name in OUTPUT_NAMES)


def _read_split(root: Path, package: PackageId | None, licence: str, sha1: bool,
                tally: Tally) -> tuple[SbomPackage, tuple[ElfNames, ...]]:
    ident, members = split_identity(root, package)
    name, version, platform, variant = _checked_identity(ident, str(root))
    meter = tally.meter(root.name)
    result = SbomPackage(name, version, platform, variant, licence, split=True)
    names: list[ElfNames] = []
    done = 0
    for output in _outputs(root):
        for full in sorted(_files(output)):
            rel = full.relative_to(output).as_posix()
            sha256, sha1_hex, size = _hash_file(full, sha1)
            done += size
            meter(done)
            inside = read_inside(full)
            result.files.append(SbomFile(
                rel, output.name, sha256, sha1_hex, size, members.get((output.name, rel)),
                tuple(g.as_dict() for g in inside.gpu) if inside else (),
                tuple({"prefix": n.prefix, "version": n.version, "library": n.library,
                       "symbol": n.symbol} for n in inside.floors) if inside else ()))
        names += [replace(n, path=f"{output.name}/{n.path}")
                  for n in scan_elf_dir(output, exports=False)]
    meter.finish()
    return result, tuple(sorted(names))


def split_identity(root: Path, package: PackageId | None
                   ) -> tuple[PackageId, dict[tuple[str, str], str]]:
    """Which package a split directory holds, and (from its report) the archive path of
    each file: ``package`` where given, else the split's report, else a batch directory's
    name, else ``nix-support/cuda-component`` with the platform its ELF files are for."""
    if package is not None:
        return package, {}
    found = _from_report(root)
    if found is not None:
        return found
    named = parse_top_dir(root.name + "-archive")
    if named is not None:
        return named, {}
    component = _from_component(root)
    if component is not None:
        return component, {}
    raise SourceError("cannot tell which package this split directory holds (no report of "
                      "the split beside or in its outputs, no nix-support/cuda-component, "
                      "not named <pname>-<platform>-<version>); name it (package "
                      "<pname>-<platform>-<version>)", source=str(root))


def _from_report(root: Path) -> tuple[PackageId, dict[tuple[str, str], str]] | None:
    """The split's JSON report (``--report``), beside the outputs or at an output's top."""
    candidates = sorted(root.glob("*.json")) + [
        p for output in _outputs(root) for p in sorted(output.glob("*.json"))]
    found: list[tuple[PackageId, dict[tuple[str, str], str], Path]] = []
    for path in candidates:
        read = read_report_identity(path)
        if read is not None:
            found.append((*read, path))
    idents = {f[0] for f in found}
    if len(idents) > 1:
        raise SourceError(f"reports of different packages: {found[0][2].name} and "
                          f"{next(f[2].name for f in found if f[0] != found[0][0])}; name it "
                          "(package <pname>-<platform>-<version>)", source=str(root))
    return (found[0][0], found[0][1]) if found else None


def read_report_identity(path: Path) -> tuple[PackageId, dict[tuple[str, str], str]] | None:
    """(identity, (output, dest) -> archive path) from a split's report; None for a file that
    is no report (any other JSON, too large, unreadable). The file is the split's output, so
    read as untrusted: at most :data:`MAX_REPORT_BYTES`, values type-checked."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_REPORT_BYTES:
            return None
        with open(path, "rb") as fh:
            data = json.loads(fh.read(MAX_REPORT_BYTES + 1))
    except (OSError, ValueError, RecursionError):  # ValueError: JSON, UTF-8, 4,300+ digits
        return None
    if not isinstance(data, dict) or not isinstance(data.get("schema"), int) \
            or not isinstance(data.get("outputs"), dict):
        return None
    package = data.get("package")
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        return None
    fields = [package.get(k) for k in ("platform", "version", "cuda_variant")]
    if not all(v is None or isinstance(v, str) for v in fields):
        return None
    members: dict[tuple[str, str], str] = {}
    for m in data.get("members") or ():
        if isinstance(m, dict) and all(isinstance(m.get(k), str)
                                       for k in ("path", "output", "dest")):
            members[(m["output"], m["dest"])] = m["path"]
    return PackageId(package["name"], *fields), members


def _from_component(root: Path) -> PackageId | None:
    """``nix-support/cuda-component`` (cudaComponentHook's metadata) names the package and
    version; the platform is the one the ELF files are for (AArch64: linux-sbsa from CUDA
    13, which has no linux-aarch64; before it, not told)."""
    fields: dict[str, str] = {}
    for output in _outputs(root):
        text = _small_text(output / "nix-support" / "cuda-component")
        if text is not None:
            fields = dict(_FIELD.findall(text))
            break
    name, version = fields.get("component"), fields.get("cudaComponentVersion")
    if not name or not version:
        return None
    platform = _machine_platform(root)
    major = fields.get("cudaMajorMinorVersion", "").split(".")[0]
    if platform == "linux-sbsa" and not (major.isdigit() and len(major) <= 3
                                         and int(major) >= 13):
        platform = None   # CUDA 12 had linux-aarch64 (Jetson) beside linux-sbsa
    return PackageId(name, platform, version)


def _small_text(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, "rb") as fh:
            return fh.read(MAX_COMPONENT_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def _machine_platform(root: Path) -> str | None:
    """The platform every ELF file of the split is for; None when none is ELF or they
    disagree (e_machine: 2 bytes at offset 18, in the byte order at offset 5)."""
    found: set[str | None] = set()
    for output in _outputs(root):
        for full in _files(output):
            try:
                with open(full, "rb") as fh:
                    head = fh.read(20)
            except OSError:
                continue
            if len(head) < 20 or head[:4] != b"\x7fELF":
                continue
            machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
            found.add(_MACHINES.get(machine))
            if len(found) > 1:
                return None
    return found.pop() if found else None


def _files(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                yield full


def _hash_file(path: Path, sha1: bool) -> tuple[str, str | None, int]:
    sha256, sha1_digest, size = hashlib.sha256(), hashlib.sha1(usedforsecurity=False), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            sha256.update(chunk)
            if sha1:
                sha1_digest.update(chunk)
            size += len(chunk)
    return sha256.hexdigest(), sha1_digest.hexdigest() if sha1 else None, size


# -- the graph --------------------------------------------------------------------------------

def _linked(read: Sequence[tuple[SbomPackage, tuple[ElfNames, ...]]],
            cuda: str | None = None) -> tuple[SbomPackage, ...]:
    """The packages, sorted, each with the packages of its platform it depends on, as
    ``nixify`` decides ``buildInputs``: the providers of its ``DT_NEEDED`` and ``dlopen``
    names, and the packages its package table names (libcublas dlopens cuda_nvrtc, nvcc
    copies libnvvm in); and the names no package here provides (glibc's and the driver's
    left out). ``cuda``: the release's X.Y (the table's gates). Two packages of one
    identity are an error."""
    keys: dict[str, SbomPackage] = {}
    for package, _names in read:
        if package.key in keys:
            raise SourceError(f"package {package.key} is described twice; give each "
                              "package once")
        keys[package.key] = package
    for platform in sorted({p.platform for p, _ in read}):
        group = [(p, PackageLinks(p.key, names)) for p, names in read if p.platform == platform]
        index = provider_index(links for _, links in group)
        for package, links in group:
            deps, unresolved = dependencies(links, index)
            why = {k: list(v) for k, v in deps.items()}
            for pname, key in _table_needs(package, cuda).items():
                for other, _ in group:
                    if other.name == pname and other.key != package.key and \
                            other.cuda_variant in (None, package.cuda_variant):
                        why.setdefault(other.key, []).append(f"package table: {key}")
            package.resolves = {k: tuple(v) for k, v in sorted(why.items())}
            package.depends = tuple(package.resolves)
            package.outside = tuple(sorted(n for n in unresolved if not is_glibc_name(n)
                                           and not is_driver_name(n)))
    return tuple(keys[k] for k in sorted(keys))


def _table_needs(package: SbomPackage, cuda: str | None) -> dict[str, str]:
    """pname -> the package-table key naming it, gated as for this package and release
    (a ``cuda_*`` package's own version says the release where no manifest does)."""
    if cuda is None and package.name.startswith("cuda_"):
        cuda = ".".join(package.version.split(".")[:2])
    table = load_ruleset(package.name).package
    return table_needs(table, Where(package.version, cuda, package.platform))


# -- the entry point --------------------------------------------------------------------------

def sbom_of(sources: Sequence[str | os.PathLike[str]], *, manifest: str | None = None,
            platforms: Sequence[str] = ("linux-x86_64",),
            packages: Sequence[str] | None = None, package: PackageId | None = None,
            strip_components: int | None = None, name: str | None = None,
            licence: str | None = None, base_url: str = DEFAULT_BASE_URL, jobs: int = 1,
            sha1: bool = False, progress: ProgressCallback | None = None) -> SbomContent:
    """The packages and files of tarballs, unpacked trees or split directories
    (``sources``), or of a release (``manifest``, ``sources`` = its tarball directory).

    ``packages`` chooses from the manifest; ``package`` names the one source's package where
    its name does not (a renamed tree, a split without a report). ``sha1``: also each file's
    SHA-1 (SPDX needs it). ``progress`` hears the bytes hashed and read."""
    if not sources:
        raise OptionsError("sources: name at least one tarball, tree or split directory "
                           "(with a manifest: its tarball directory)")
    tally = Tally(os.fspath(manifest or sources[0]), progress, unit="package")
    if manifest is not None:
        if len(sources) != 1:
            raise OptionsError("a manifest needs exactly one directory of tarballs, not "
                               f"{len(sources)} sources")
        if package is not None or strip_components is not None:
            raise OptionsError("package and strip_components name one source's package; "
                               "with a manifest, choose packages with packages")
        content = _from_manifest(Path(manifest), Path(sources[0]), platforms=platforms,
                                 packages=packages, base_url=base_url, jobs=jobs, sha1=sha1,
                                 tally=tally)
        tally.done()
        return content if name is None else replace(content, name=name)
    if packages:
        raise OptionsError("packages chooses from a manifest; name one source's package "
                           "with package")
    if (package is not None or strip_components is not None) and len(sources) != 1:
        raise OptionsError("package and strip_components name the package of one source, "
                           f"not of {len(sources)}")
    read = [item for source in sources for item in _read_one(
        Path(source), package=package, strip_components=strip_components,
        licence=licence or DEFAULT_LICENCE, jobs=jobs, sha1=sha1, tally=tally)]
    tally.done()
    described = _linked(read)
    return SbomContent(name or _subject(described), None, described)


def _subject(packages: Sequence[SbomPackage]) -> str:
    """What a document of sources describes, whatever their order: the packages' names."""
    names = sorted({p.name for p in packages})
    return ", ".join(names) if len(names) <= 3 else \
        f"{', '.join(names[:3])} and {len(names) - 3} more"


def _read_one(path: Path, *, package: PackageId | None, strip_components: int | None,
              licence: str, jobs: int, sha1: bool, tally: Tally
              ) -> list[tuple[SbomPackage, tuple[ElfNames, ...]]]:
    if path.is_dir() and strip_components is None and is_split_dir(path):
        return [_read_split(root, package, licence, sha1, tally) for root in _split_roots(path)]
    meter = tally.meter(path.name)
    got = _read_source(path, package=package, strip_components=strip_components, jobs=jobs,
                       sha1=sha1, progress=meter.progress() if tally.progress else None)
    ident = got.ident
    if package is not None:   # a name alone keeps what the archive says of the rest
        ident = PackageId(package.name, package.platform or ident.platform,
                          package.version or ident.version,
                          package.cuda_variant or ident.cuda_variant)
    pname, version, platform, variant = _checked_identity(ident, str(path))
    archive = None
    if path.is_file():
        archive = Archive(sha256_file(path, meter.again() if tally.progress else None),
                          path.stat().st_size)
    meter.finish()
    return [(SbomPackage(pname, version, platform, variant, licence, None, archive,
                         got.files), got.names)]

