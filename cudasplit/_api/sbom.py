"""Bills of materials (:mod:`cudasplit.sbom`): CycloneDX 1.6 and SPDX 2.3 documents of
tarballs, split directories or a release, from one read of the sources.

Thin entry points over :mod:`cudasplit._release.sbom` (read) with
:mod:`cudasplit._release.sbomcdx` and :mod:`cudasplit._release.sbomspdx` (write); none prints.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

from cudasplit._api.options import package_id
from cudasplit._argcheck import checked
from cudasplit._release.sbom import DEFAULT_BASE_URL, sbom_of, source_date
from cudasplit._release.sbomcdx import cyclonedx_json
from cudasplit._release.sbomspdx import spdx_json
from cudasplit._run import Progress, ProgressCallback, resolve_jobs
from cudasplit.errors import OptionsError

PathLike = str | os.PathLike[str]

__all__ = ["SBOM_FORMATS", "sbom", "sbom_documents"]

SBOM_FORMATS = ("cyclonedx", "spdx")
_URL = re.compile(r"(?:https?|ftp|file)://[!#-;=?-~]{1,1000}")  # printable, no space, < or >


@checked(jobs=0)
def sbom(sources: Sequence[PathLike], *, manifest: PathLike | None = None,
         platform: str | Sequence[str] | None = None, packages: Sequence[str] | None = None,
         package: str | None = None, strip_components: int | None = None,
         name: str | None = None, licence: str | None = None, base_url: str | None = None,
         fmt: str = "cyclonedx", jobs: int | None = None,
         progress: ProgressCallback | None = None) -> str:
    """A CycloneDX 1.6 or SPDX 2.3 JSON SBOM: every package with its archive (sha256, URL
    and size, checked against the manifest), purl, supplier (NVIDIA), licence and the
    packages it depends on; every file with its hashes, size, output and licence. The same
    input gives the same bytes (``SOURCE_DATE_EPOCH`` sets the timestamp, else 1970).

    Args:
        sources: tarballs, unpacked trees or split directories; with ``manifest``, the one
            directory holding its tarballs.
        manifest: NVIDIA's ``redistrib_*.json``: its packages of ``platform`` whose tarballs
            are in the directory, each checked against it (size, then sha256).
        platform: the platforms taken from the manifest (``linux-x86_64``, ``linux-sbsa``,
            ``linux``, ``all``, ...; default ``linux-x86_64``); only with ``manifest``.
        packages: the packages taken from the manifest (default: every one whose tarball is
            there); only with ``manifest``.
        package: the package of the one source, where its name does not say it: a pname,
            or ``<pname>-<platform>-<version>`` (a renamed tree, a split without a report).
        strip_components: leading directories of the one source to drop (with ``package``).
        name: the name of what the SBOM describes (default: the manifest's product, or the
            names of the packages).
        licence: the licence name of packages no manifest names one for.
        base_url: prefix of the manifest's relative paths (default: NVIDIA's redist URL).
        fmt: ``cyclonedx`` or ``spdx``.
        jobs: at most this many decoder threads; ``None`` or 0: every available CPU.
        progress: called with a :class:`Progress` as bytes are hashed and read.

    Returns:
        The JSON text.

    Raises:
        OptionsError: no source, an unknown ``fmt``, an option that does not fit the
            sources, a bad ``SOURCE_DATE_EPOCH``.
        SourceError: a source cannot be read or its package cannot be told; a tarball the
            manifest does not vouch for (``tarball-mismatch``); no tarball at all.
        ManifestError: the manifest cannot be read, or names no such platform or package.
        CudasplitError: ``cyclonedx-python-lib`` or ``spdx-tools`` is not installed.
    """
    return sbom_documents(sources, manifest=manifest, platform=platform, packages=packages,
                          package=package, strip_components=strip_components, name=name,
                          licence=licence, base_url=base_url, formats=(fmt,), jobs=jobs,
                          progress=progress)[fmt]


@checked(jobs=0, strip_components=0)
def sbom_documents(sources: Sequence[PathLike], *, manifest: PathLike | None = None,
                   platform: str | Sequence[str] | None = None,
                   packages: Sequence[str] | None = None, package: str | None = None,
                   strip_components: int | None = None, name: str | None = None,
                   licence: str | None = None, base_url: str | None = None,
                   formats: Sequence[str] = SBOM_FORMATS, jobs: int | None = None,
                   progress: ProgressCallback | None = None) -> dict[str, str]:
    """The SBOM in several formats from one read of the sources (see :func:`sbom`).

    Args:
        sources: as for :func:`sbom`.
        manifest: as for :func:`sbom`.
        platform: as for :func:`sbom`.
        packages: as for :func:`sbom`.
        package: as for :func:`sbom`.
        strip_components: as for :func:`sbom`.
        name: as for :func:`sbom`.
        licence: as for :func:`sbom`.
        base_url: as for :func:`sbom`.
        formats: ``cyclonedx`` and/or ``spdx``.
        jobs: as for :func:`sbom`.
        progress: as for :func:`sbom`.

    Returns:
        Format -> the JSON text of the document in that format.

    Raises:
        OptionsError: as for :func:`sbom`.
        SourceError: as for :func:`sbom`.
        ManifestError: as for :func:`sbom`.
        CudasplitError: as for :func:`sbom`.
    """
    unknown = [f for f in formats if f not in SBOM_FORMATS]
    if unknown or not formats:
        raise OptionsError(f"fmt: {', '.join(map(repr, unknown)) or 'none'} is no SBOM format "
                           f"(one of {', '.join(SBOM_FORMATS)})")
    platforms = (platform,) if isinstance(platform, str) else platform
    if platforms is not None and manifest is None:
        raise OptionsError("platform chooses tarballs from a manifest; without one, the "
                           "sources say their platform (or package names it: "
                           "<pname>-<platform>-<version>)")
    if base_url is not None and not _URL.fullmatch(base_url):
        raise OptionsError(f"base_url {base_url[:80]!r} is not a URL (https://...)")
    source_date()   # a bad SOURCE_DATE_EPOCH is an error before the read, not after it
    heard: list[Progress] = []

    def hear(update: Progress) -> None:
        heard[:] = [update]
        if progress is not None:
            progress(update)

    content = sbom_of(
        list(sources), manifest=None if manifest is None else os.fspath(manifest),
        platforms=tuple(platforms or ("linux-x86_64",)),
        packages=None if packages is None else tuple(packages),
        package=None if package is None else package_id(package),
        strip_components=strip_components, name=name, licence=licence,
        base_url=_slashed(base_url or DEFAULT_BASE_URL), jobs=resolve_jobs(jobs),
        sha1="spdx" in formats, progress=hear if progress is not None else None)
    writers = {"cyclonedx": cyclonedx_json, "spdx": spdx_json}
    documents = {}
    for fmt in dict.fromkeys(formats):
        if progress is not None and heard:   # the writing phase, after the bytes read
            progress(dataclasses.replace(heard[0], current=f"writing {fmt}", done=False))
        documents[fmt] = writers[fmt](content)
    return documents


def _slashed(url: str) -> str:
    return url if url.endswith("/") else url + "/"
