"""``cudasplit sbom``: a CycloneDX 1.6 bill of materials of a tarball, a release or a split.

Every file becomes a ``file`` component nested in its package's ``library`` component (the
CycloneDX way to say "the package contains the file"), with its sha256, size, output, path in
the archive and licence; ELF files and static archives carry their GPU architectures and glibc
floor as ``cudasplit:*`` properties, packages the sums of theirs.

* A tarball (or unpacked tree): one pass. The plan of a dry-run split says where each member
  goes and what it carries; the member bytes are hashed as they stream past (a member the
  plan does not read is read to its end for the hash), so the hashes are of NVIDIA's bytes.
* A release: a manifest and the directory of its tarballs, each tarball as above, the
  manifest's licence names per package.
* A split directory (``DIR/<output>/`` or a batch's ``DIR/<package>/<output>/``): the files
  as written (RUNPATHs rewritten), hashed where they lie.

Reproducible: components sorted, the serial number derived from the content (a UUID5 of every
file's hash), the timestamp from ``SOURCE_DATE_EPOCH`` or, without it, the Unix epoch. The
document is written and checked against the 1.6 schema by ``cyclonedx-python-lib``.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from cudasplit._elf.read import read_inside
from cudasplit._model import OUTPUT_NAMES, Member, MemberType, PackageId
from cudasplit._release.manifest import find_tarball, load_manifest, select_artifacts
from cudasplit._report import Report, arch_order
from cudasplit._source import Source, open_source, parse_top_dir
from cudasplit._split.pipeline import SplitOptions
from cudasplit._split.pipeline import split as _split
from cudasplit.errors import CudasplitError, SourceError

__all__ = ["SbomFile", "SbomPackage", "sbom_json", "sbom_of"]

DEFAULT_LICENCE = "NVIDIA proprietary (see the package's LICENSE file)"


@dataclass
class SbomFile:
    path: str               # inside the output (after renames)
    output: str
    sha256: str
    size: int
    member: str | None = None   # the archive path it came from
    gpu: list[dict[str, Any]] = field(default_factory=list)
    glibc: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SbomPackage:
    name: str
    version: str
    platform: str
    licence: str
    files: list[SbomFile] = field(default_factory=list)


# -- reading ----------------------------------------------------------------------------------

class _HashingStream:
    """A member's stream that hashes what passes through it (and the rest, on :meth:`drain`)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream, self.digest, self.size = stream, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.digest.update(data)
        self.size += len(data)
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


class _HashingSource:
    """The members of ``inner``, each hashed whole before the next one is read."""

    def __init__(self, inner: Source) -> None:
        self.inner, self.description = inner, inner.description
        self.digests: dict[str, str] = {}

    @property
    def package(self) -> PackageId:
        return self.inner.package

    @property
    def warnings(self) -> Any:
        return getattr(self.inner, "warnings", ())

    def members(self) -> Iterator[tuple[Member, BinaryIO | None]]:
        """A member's rest is hashed before the next is asked for (a tar stream skips it)."""
        pending: tuple[str, _HashingStream] | None = None
        members = self.inner.members()
        while True:
            self._finish(pending)
            pending = None
            step = next(members, None)
            if step is None:
                return
            member, stream = step
            if stream is not None and member.type is MemberType.FILE:
                hashing = _HashingStream(stream)
                pending = (member.path, hashing)
                yield member, hashing  # type: ignore[misc]
            else:
                yield member, stream

    def _finish(self, pending: tuple[str, _HashingStream] | None) -> None:
        if pending is not None:
            pending[1].drain()
            self.digests[pending[0]] = pending[1].digest.hexdigest()


def _from_source(path: str | os.PathLike[str], licence: str, jobs: int,
                 package: str | None = None) -> SbomPackage:
    source = _HashingSource(open_source(path, jobs=jobs))
    report = _split(source, None, options=SplitOptions(dry_run=True, jobs=jobs))
    return _package_of(report, source.digests, licence, package)


def _package_of(report: Report, digests: dict[str, str], licence: str,
                name: str | None) -> SbomPackage:
    ident = report.package
    package = SbomPackage(name or str(ident.get("name") or "unknown"),
                          str(ident.get("version") or ""), str(ident.get("platform") or ""),
                          licence)
    for m in report.members:
        if m.output is None or m.dest is None or m.path not in digests:
            continue
        package.files.append(SbomFile(m.dest, m.output, digests[m.path], m.size, m.path,
                                      list(m.gpu or []), list(m.glibc or [])))
    return package


def _from_manifest(manifest: Path, tarballs: Path, platform: str, jobs: int
                   ) -> list[SbomPackage]:
    loaded = load_manifest(manifest)
    packages = []
    for artifact in select_artifacts(loaded, platforms=(platform,)):
        found = find_tarball(artifact, tarballs)
        if found is None:
            raise SourceError(f"no tarball for {artifact.label} ({artifact.filename})",
                              source=str(tarballs))
        entry = loaded.package(artifact.package)
        licence = str(getattr(entry, "license", "") or "") or DEFAULT_LICENCE
        packages.append(_from_source(found, licence, jobs, artifact.package))
    return packages


def _from_split(root: Path, licence: str) -> list[SbomPackage]:
    outputs = [p for p in root.iterdir() if p.is_dir() and p.name in OUTPUT_NAMES]
    if outputs:
        return [_split_package(root, licence)]
    return [_split_package(sub, licence) for sub in sorted(root.iterdir()) if sub.is_dir()]


def _split_package(root: Path, licence: str) -> SbomPackage:
    ident = parse_top_dir(root.name + "-archive")
    package = SbomPackage(ident.name if ident else root.name,
                          (ident.version or "") if ident else "",
                          (ident.platform or "") if ident else "", licence)
    for output in sorted(p for p in root.iterdir() if p.is_dir() and p.name in OUTPUT_NAMES):
        for full in sorted(_files(output)):
            inside = read_inside(full)
            package.files.append(SbomFile(
                str(full.relative_to(output)), output.name, _sha256(full), full.stat().st_size,
                None, [g.as_dict() for g in inside.gpu] if inside else [],
                [{"prefix": n.prefix, "version": n.version, "library": n.library,
                  "symbol": n.symbol} for n in inside.floors] if inside else []))
    return package


def _files(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                yield full


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sbom_of(sources: Sequence[str | os.PathLike[str]], *, manifest: str | None = None,
            platform: str = "linux-x86_64", licence: str | None = None,
            jobs: int = 1) -> list[SbomPackage]:
    """The packages and files of tarballs, unpacked trees or split directories (``sources``),
    or of a release (``manifest`` with ``sources`` = its tarball directory)."""
    if manifest is not None:
        if len(sources) != 1:
            raise SourceError("a manifest needs exactly one directory of tarballs")
        return _from_manifest(Path(manifest), Path(sources[0]), platform, jobs)
    packages = []
    for source in sources:
        path = Path(source)
        if path.is_dir() and _is_split(path):
            packages += _from_split(path, licence or DEFAULT_LICENCE)
        else:
            packages.append(_from_source(path, licence or DEFAULT_LICENCE, jobs))
    return packages


def _is_split(path: Path) -> bool:
    subdirs = [p for p in path.iterdir() if p.is_dir()]
    if subdirs and all(p.name in OUTPUT_NAMES for p in subdirs):
        return True
    return bool(subdirs) and all(
        any(q.is_dir() and q.name in OUTPUT_NAMES for q in p.iterdir()) for p in subdirs)


# -- writing ----------------------------------------------------------------------------------

def sbom_json(packages: Sequence[SbomPackage], name: str) -> str:
    """The CycloneDX 1.6 JSON document (validated against the schema), the same bytes for the
    same packages; :class:`CudasplitError` when ``cyclonedx-python-lib`` is not installed."""
    try:
        from cyclonedx.model.bom import Bom
        from cyclonedx.output.json import JsonV1Dot6
        from cyclonedx.schema import SchemaVersion
        from cyclonedx.validation.json import JsonStrictValidator
    except ImportError as exc:
        raise CudasplitError("cudasplit sbom needs cyclonedx-python-lib "
                             "(pip install 'cudasplit[sbom]')") from exc
    bom = _bom(Bom, packages, name)
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise CudasplitError(f"the SBOM does not validate: {error}")
    return text + "\n"


def _bom(bom_type: Any, packages: Sequence[SbomPackage], name: str) -> Any:
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component, ComponentType
    bom = bom_type()
    digest = hashlib.sha256(name.encode())
    components = []
    for package in sorted(packages, key=lambda p: (p.name, p.version, p.platform)):
        component = _package_component(package)
        components.append(component)
        bom.components.add(component)
        for f in package.files:
            digest.update(f"{package.name}\0{f.output}\0{f.path}\0{f.sha256}\n".encode())
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, "cudasplit-sbom:" + digest.hexdigest())
    bom.metadata.timestamp = _timestamp()
    bom.metadata.component = Component(name=name, type=ComponentType.APPLICATION,
                                       bom_ref="release", properties=[
                                           Property(name="cudasplit:version",
                                                    value=_version())])
    bom.register_dependency(bom.metadata.component, components)
    return bom


def _package_component(package: SbomPackage) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType
    licences = _licences(package.licence)
    files = []
    for f in sorted(package.files, key=lambda f: (f.output, f.path)):
        props = [Property(name="cudasplit:output", value=f.output),
                 Property(name="cudasplit:size", value=str(f.size)),
                 Property(name="cudasplit:package", value=package.name)]
        if f.member is not None:
            props.append(Property(name="cudasplit:member", value=f.member))
        props += _inside_properties(f.gpu, f.glibc)
        files.append(Component(
            name=f.path, type=ComponentType.FILE, bom_ref=f"{package.name}:{f.output}:{f.path}",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)],
            licenses=_licences(package.licence), properties=props))
    gpu = [row for f in package.files for row in f.gpu]
    glibc = [need for f in package.files for need in f.glibc]
    props = [Property(name="cudasplit:platform", value=package.platform or "unknown"),
             *_inside_properties(gpu, glibc)]
    return Component(name=package.name, version=package.version or None,
                     type=ComponentType.LIBRARY, bom_ref=f"{package.name}@{package.version}",
                     licenses=licences, properties=props, components=files)


def _inside_properties(gpu: list[dict[str, Any]], glibc: list[dict[str, Any]]) -> list[Any]:
    from cyclonedx.model import Property
    props = []
    for kind in ("sass", "ptx", "ltoir"):
        archs = sorted({str(r["arch"]) for r in gpu if r["kind"] == kind}, key=arch_order)
        if archs:
            props.append(Property(name=f"cudasplit:gpu:{kind}", value=",".join(archs)))
    floors: dict[str, str] = {}
    for need in glibc:
        prefix, version = str(need["prefix"]), str(need["version"])
        if prefix not in floors or _numbers(version) > _numbers(floors[prefix]):
            floors[prefix] = version
    props += [Property(name=f"cudasplit:floor:{prefix}", value=version)
              for prefix, version in sorted(floors.items())]
    return props


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _licences(name: str) -> list[Any]:
    from cyclonedx.model.license import DisjunctiveLicense
    return [DisjunctiveLicense(name=name)]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("cudasplit")
    except PackageNotFoundError:
        return "unknown"


def _timestamp() -> datetime:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "0")
    return datetime.fromtimestamp(int(epoch) if epoch.isdigit() else 0, UTC)
