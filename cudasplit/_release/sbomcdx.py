"""The CycloneDX 1.6 JSON document of an SBOM's facts, written by ``cyclonedx-python-lib``.

* The subject (``metadata.component``): the release (the manifest's product and label) or
  what ``--name`` says; ``metadata.supplier`` and every package's ``supplier``: NVIDIA.
* Each package a ``library`` component: its ref is ``name@version/platform[/cudaNN]`` (two
  platforms, two refs), its ``purl`` ``pkg:generic/nvidia/...`` with the platform and CUDA
  variant as qualifiers, the licence (name and the URL of the manifest's ``license_path``),
  the archive's sha256 as its hash and a ``distribution`` reference with the URL and hash,
  the archive's ``relative_path`` and size as ``cudasplit:archive:*`` properties.
* Each file a ``file`` component nested in its package (the package contains it): sha256,
  licence, ``cudasplit:output``, ``:member``, ``:size``; GPU architectures and glibc floors
  as ``cudasplit:gpu:*`` and ``cudasplit:floor:*`` on files and packages.
* ``dependencies``: the subject depends on every package; each package ``dependsOn`` the
  packages that provide its ``DT_NEEDED`` and ``dlopen`` names.

Reproducible: components sorted by ref, the serial number a UUID5 of the content's digest,
the timestamp ``SOURCE_DATE_EPOCH`` (else 1970). The document is not checked against the
schema at run time: jsonschema's ``uniqueItems`` check is quadratic in the files of a package
(most of a run's time on a release, and unbounded on a hostile archive of many files); the
test suite validates what this writes with the library's strict validator.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from cudasplit._release.sbom import (
    SUPPLIER,
    SUPPLIER_URL,
    SbomContent,
    SbomFile,
    SbomPackage,
    source_date,
    tool_version,
)
from cudasplit._report import arch_order
from cudasplit.errors import CudasplitError

__all__ = ["cyclonedx_json"]


def cyclonedx_json(content: SbomContent) -> str:
    """The document's text (indented JSON, a final newline); :class:`CudasplitError` when
    ``cyclonedx-python-lib`` is not installed."""
    try:
        from cyclonedx.model import Property, XsUri
        from cyclonedx.model.bom import Bom
        from cyclonedx.model.component import Component, ComponentType
        from cyclonedx.model.contact import OrganizationalEntity
        from cyclonedx.output.json import JsonV1Dot6
    except ImportError as exc:
        raise CudasplitError("cudasplit sbom needs cyclonedx-python-lib "
                             "(pip install 'cudasplit[sbom]')") from exc
    bom = Bom()
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, "cudasplit-sbom:" + content.digest())
    bom.metadata.timestamp = datetime.fromtimestamp(source_date(), UTC)
    bom.metadata.supplier = OrganizationalEntity(name=SUPPLIER, urls=[XsUri(SUPPLIER_URL)])
    bom.metadata.tools.components.add(Component(
        name="cudasplit", version=tool_version(), type=ComponentType.APPLICATION))
    props = [Property(name="cudasplit:manifest", value=content.manifest)] \
        if content.manifest else []
    props += [Property(name="cudasplit:left-out", value=label) for label in content.left_out]
    root = Component(name=content.name, version=content.version, bom_ref="subject",
                     type=ComponentType.FRAMEWORK, properties=props,
                     supplier=OrganizationalEntity(name=SUPPLIER, urls=[XsUri(SUPPLIER_URL)]))
    bom.metadata.component = root
    components = {p.key: _package(p) for p in content.packages}
    for component in components.values():
        bom.components.add(component)
    bom.register_dependency(root, list(components.values()))
    for package in content.packages:
        bom.register_dependency(components[package.key],
                                [components[k] for k in package.depends])
    return str(JsonV1Dot6(bom).output_as_string(indent=2)) + "\n"


def _package(package: SbomPackage) -> Any:
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        Property,
        XsUri,
    )
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.contact import OrganizationalEntity
    from packageurl import PackageURL

    props = [Property(name="cudasplit:platform", value=package.platform)]
    if package.cuda_variant:
        props.append(Property(name="cudasplit:cuda-variant", value=package.cuda_variant))
    archive = package.archive
    hashes, refs = [], []
    if archive is not None:
        digest = HashType(alg=HashAlgorithm.SHA_256, content=archive.sha256)
        hashes.append(digest)
        props.append(Property(name="cudasplit:archive:size", value=str(archive.size)))
        if archive.relative_path is not None:
            props.append(Property(name="cudasplit:archive:relative-path",
                                  value=archive.relative_path))
        if archive.manifest is not None:
            props.append(Property(name="cudasplit:archive:vouched-by", value=archive.manifest))
        if archive.url is not None:
            refs.append(ExternalReference(type=ExternalReferenceType.DISTRIBUTION,
                                          url=XsUri(archive.url), hashes=[digest]))
    props.append(Property(name="cudasplit:files", value="split" if package.split
                          else "archive"))
    props += [Property(name="cudasplit:depends-on", value=f"{key}: {', '.join(why)}")
              for key, why in package.resolves.items()]
    props += [Property(name="cudasplit:needs-outside", value=n) for n in package.outside]
    props += _inside(list(package.files))
    return Component(
        name=package.name, version=package.version, type=ComponentType.LIBRARY,
        bom_ref=package.key, purl=PackageURL.from_string(package.purl),
        supplier=OrganizationalEntity(name=SUPPLIER, urls=[XsUri(SUPPLIER_URL)]),
        hashes=hashes, external_references=refs, licenses=_licences(package),
        properties=props, components=[_file(package, f) for f in package.files])


def _file(package: SbomPackage, f: SbomFile) -> Any:
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType

    props = [Property(name="cudasplit:output", value=f.output),
             Property(name="cudasplit:size", value=str(f.size))]
    if f.member is not None:
        props.append(Property(name="cudasplit:member", value=f.member))
    props += _inside([f])
    return Component(
        name=f.path, type=ComponentType.FILE, bom_ref=f"{package.key}#{f.output}/{f.path}",
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)],
        licenses=_licences(package), properties=props)


def _inside(files: list[SbomFile]) -> list[Any]:
    """``cudasplit:gpu:<kind>`` (architectures) and ``cudasplit:floor:<prefix>`` (the highest
    version needed) of the files together."""
    from cyclonedx.model import Property

    gpu = [row for f in files for row in f.gpu]
    props = []
    for kind in ("sass", "ptx", "ltoir"):
        archs = sorted({str(r["arch"]) for r in gpu if r.get("kind") == kind}, key=arch_order)
        if archs:
            props.append(Property(name=f"cudasplit:gpu:{kind}", value=",".join(archs)))
    floors: dict[str, str] = {}
    for need in (n for f in files for n in f.glibc):
        prefix, version = str(need["prefix"]), str(need["version"])
        if prefix not in floors or _numbers(version) > _numbers(floors[prefix]):
            floors[prefix] = version
    props += [Property(name=f"cudasplit:floor:{prefix}", value=version)
              for prefix, version in sorted(floors.items())]
    return props


def _numbers(version: str) -> tuple[int, ...]:
    # Each part capped: a floor's digits come from the file (a 5,000-digit one is no int).
    return tuple(int(p[:9]) for p in version.split(".") if p.isascii() and p.isdigit())


def _licences(package: SbomPackage) -> list[Any]:
    from cyclonedx.model import XsUri
    from cyclonedx.model.license import DisjunctiveLicense

    url = XsUri(package.licence_url) if package.licence_url else None
    return [DisjunctiveLicense(name=package.licence, url=url)]

