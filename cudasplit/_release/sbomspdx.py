"""The SPDX 2.3 JSON document of an SBOM's facts, written by ``spdx-tools``.

* Each package an SPDX package: ``supplier`` and ``originator`` NVIDIA; the archive's URL as
  ``downloadLocation`` (``NOASSERTION`` without a manifest), its ``relative_path`` as
  ``packageFileName``, its sha256 as the package checksum; the ``purl`` as a
  ``PACKAGE-MANAGER`` external reference (the same ``pkg:generic/nvidia/...`` as CycloneDX);
  the licence as ``LicenseRef-NVIDIA-<name>``, its name and the manifest's licence URL in
  ``hasExtractedLicensingInfos`` (NVIDIA's licences have no SPDX identifier); the package
  verification code from its files' SHA-1s, as SPDX 2.3 asks.
* Each file an SPDX file (``./<archive path>``, or ``./<output>/<path>`` for a split) with
  its SHA-1 and SHA-256; the package ``CONTAINS`` it.
* The document ``DESCRIBES`` every package; a package ``DEPENDS_ON`` the packages that
  provide its ``DT_NEEDED`` and ``dlopen`` names.

SPDX ids allow only letters, digits, ``.`` and ``-``: each is the readable part of the ref
(other characters as ``-``) and 12 hex digits of the ref's sha256, so two refs never share an
id. Reproducible: the namespace and the document come from the content's digest, the
creation time from ``SOURCE_DATE_EPOCH`` (else 1970). Not validated at run time (the
validator looks up every relationship's ids in a list of all of them: quadratic); the test
suite validates what this writes with ``spdx-tools``' validator.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from cudasplit._release.sbom import (
    SUPPLIER,
    SbomContent,
    SbomFile,
    SbomPackage,
    source_date,
    tool_version,
)
from cudasplit.errors import CudasplitError

__all__ = ["spdx_id", "spdx_json"]

_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def spdx_id(kind: str, ref: str) -> str:
    """``SPDXRef-<kind>-<readable>-<12 hex digits of the ref's sha256>``."""
    readable = _UNSAFE.sub("-", ref).strip("-")[:80]
    return f"SPDXRef-{kind}-{readable}-{hashlib.sha256(ref.encode()).hexdigest()[:12]}"


def licence_ref(name: str) -> str:
    """``LicenseRef-NVIDIA-<name>``, made of the characters a LicenseRef may hold."""
    readable = _UNSAFE.sub("-", name).strip("-")[:60] or "licence"
    return f"LicenseRef-NVIDIA-{readable}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def spdx_json(content: SbomContent) -> str:
    """The document's text (indented JSON, a final newline); :class:`CudasplitError` when
    ``spdx-tools`` is not installed, or a file lacks the SHA-1 SPDX needs (read with
    ``sha1=True``)."""
    try:
        from spdx_tools.common.spdx_licensing import spdx_licensing
        from spdx_tools.spdx.jsonschema.document_converter import DocumentConverter
        from spdx_tools.spdx.model import (
            Actor,
            ActorType,
            CreationInfo,
            Document,
            ExtractedLicensingInfo,
            Relationship,
            RelationshipType,
        )
    except ImportError as exc:
        raise CudasplitError("cudasplit sbom --spdx needs spdx-tools "
                             "(pip install 'cudasplit[sbom]')") from exc
    digest = content.digest()
    readable = _UNSAFE.sub("-", content.name).strip("-")[:60] or "sbom"
    info = CreationInfo(
        spdx_version="SPDX-2.3", spdx_id="SPDXRef-DOCUMENT",
        name=content.name + (f" {content.version}" if content.version else ""),
        document_namespace=(f"https://spdx.org/spdxdocs/cudasplit-{readable}-"
                            f"{uuid.uuid5(uuid.NAMESPACE_URL, 'cudasplit-spdx:' + digest)}"),
        creators=[Actor(ActorType.TOOL, f"cudasplit-{tool_version()}"),
                  Actor(ActorType.ORGANIZATION, SUPPLIER)],
        created=datetime.fromtimestamp(source_date(), UTC).replace(tzinfo=None),
        document_comment=_comment(content))
    packages, files, relationships = [], [], []
    for package in content.packages:
        ident = spdx_id("Package", package.key)
        licence = spdx_licensing.parse(licence_ref(package.licence))
        own = [_file(package, f, licence) for f in package.files]
        packages.append(_package(package, ident, own, licence))
        files += own
        relationships.append(Relationship("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES,
                                          ident))
        relationships += [Relationship(ident, RelationshipType.CONTAINS, f.spdx_id)
                          for f in own]
        relationships += [Relationship(ident, RelationshipType.DEPENDS_ON,
                                       spdx_id("Package", other),
                                       comment=", ".join(package.resolves.get(other, ())))
                          for other in package.depends]
    # One definition per licence name (its id is made from the name), with the URL of
    # every package's copy of it.
    urls: dict[str, set[str]] = {}
    for package in content.packages:
        urls.setdefault(package.licence, set()).update(
            [package.licence_url] if package.licence_url else [])
    extracted = [ExtractedLicensingInfo(
        license_id=licence_ref(name), license_name=name,
        extracted_text=(f"NVIDIA's licence {name!r}: the LICENSE file of each package "
                        "that names it" + (" (see also)" if urls[name] else "")),
        cross_references=sorted(urls[name])) for name in sorted(urls)]
    document = Document(info, packages=packages, files=files, relationships=relationships,
                        extracted_licensing_info=extracted)
    data = DocumentConverter().convert(document)
    out = io.StringIO()
    json.dump(data, out, indent=2)
    return out.getvalue() + "\n"


def _comment(content: SbomContent) -> str | None:
    lines = []
    if content.manifest:
        lines.append(f"Archives checked against {content.manifest} (size and sha256).")
    if content.left_out:
        lines.append("Left out (no tarball): " + ", ".join(content.left_out) + ".")
    return " ".join(lines) or None


def _package(package: SbomPackage, ident: str, files: list[Any], licence: Any) -> Any:
    from spdx_tools.spdx.model import (
        Actor,
        ActorType,
        Checksum,
        ChecksumAlgorithm,
        ExternalPackageRef,
        ExternalPackageRefCategory,
        Package,
        PackagePurpose,
        PackageVerificationCode,
        SpdxNoAssertion,
    )

    archive = package.archive
    sha1s = sorted(next(c.value for c in f.checksums if c.algorithm is ChecksumAlgorithm.SHA1)
                   for f in files)
    code = hashlib.sha1("".join(sha1s).encode(), usedforsecurity=False).hexdigest()
    comment = [f"Platform {package.platform}"
               + (f", CUDA variant {package.cuda_variant}" if package.cuda_variant else "")
               + "."]
    if archive is not None:
        comment.append(f"Archive of {archive.size} bytes"
                       + (f", checked against {archive.manifest}" if archive.manifest else "")
                       + ".")
    if package.split:
        comment.append("Files as a split wrote them (RUNPATHs rewritten), not NVIDIA's bytes.")
    if package.outside:
        comment.append("Needs from outside: " + ", ".join(package.outside) + ".")
    nvidia = Actor(ActorType.ORGANIZATION, SUPPLIER)
    return Package(
        spdx_id=ident, name=package.name, version=package.version,
        download_location=archive.url if archive is not None and archive.url
        else SpdxNoAssertion(),
        file_name=archive.relative_path if archive is not None else None,
        supplier=nvidia, originator=nvidia, files_analyzed=True,
        verification_code=PackageVerificationCode(code),
        checksums=[Checksum(ChecksumAlgorithm.SHA256, archive.sha256)] if archive else [],
        license_concluded=licence, license_declared=licence,
        copyright_text=SpdxNoAssertion(), comment=" ".join(comment),
        external_references=[ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER,
                                                "purl", package.purl)],
        primary_package_purpose=PackagePurpose.LIBRARY)


def _file(package: SbomPackage, f: SbomFile, licence: Any) -> Any:
    from spdx_tools.spdx.model import Checksum, ChecksumAlgorithm, File, SpdxNoAssertion

    if f.sha1 is None:
        raise CudasplitError(f"{package.key}: {f.path}: no SHA-1 read (SPDX files need one)")
    name = f"./{f.member}" if f.member is not None and not package.split \
        else f"./{f.output}/{f.path}"
    comment = f"Output {f.output}: {f.path}."
    return File(
        name=name, spdx_id=spdx_id("File", f"{package.key}#{f.output}/{f.path}"),
        checksums=[Checksum(ChecksumAlgorithm.SHA1, f.sha1),
                   Checksum(ChecksumAlgorithm.SHA256, f.sha256)],
        license_concluded=licence,
        copyright_text=SpdxNoAssertion(), comment=comment)
