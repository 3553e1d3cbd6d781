"""``cudasplit sbom`` of a 13.x release against the reads it cannot do without.

    python benchmarks/bench_sbom.py [--repeat 3] [--codec tar|xz] [--validate]

The release is the CUDA 13.0 one the tests build from NVIDIA's PyPI wheels
(``tests/support/releases.py``: eight packages, 650 MB of tar, cached outside the clone);
``--codec xz`` recompresses its tarballs once into ``.bench-cache/sbom/`` (``xz -6 -T2``, what
NVIDIA ships) with a manifest naming them. Timed in one process, interleaved rounds, warm page
cache, medians:

* ``verify``: :func:`cudasplit.releases.verify_manifest`, the sha256 of every tarball (the check the
  SBOM makes before it reads one);
* ``inspect``: :func:`cudasplit.inspect` of every tarball (the dry-run split the SBOM's
  outputs, GPU code and floors come from);
* ``floor``: the two added up;
* ``sbom cdx``: :func:`cudasplit.sbom.sbom` (CycloneDX: the check, one read hashing every member
  and reading every ELF member's names, the document written);
* ``sbom both``: :func:`cudasplit.sbom.sbom_documents` (CycloneDX and SPDX from one read, SHA-1
  besides SHA-256);
* ``read``, ``write cdx``, ``write spdx``: where ``sbom both`` goes (the read, then each
  writer: ``cyclonedx-python-lib`` and ``spdx-tools`` building and serialising their models).

Prints a markdown table with the ratios to ``floor``. ``--validate`` also times the two
libraries' validators on the documents once (they are not run by ``cudasplit sbom``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cudasplit  # noqa: E402
from cudasplit._release.sbom import sbom_of  # noqa: E402
from cudasplit._release.sbomcdx import cyclonedx_json  # noqa: E402
from cudasplit._release.sbomspdx import spdx_json  # noqa: E402
from tests.support.releases import release  # noqa: E402

CACHE = ROOT / ".bench-cache" / "sbom"


def prepare(codec: str) -> tuple[Path, Path]:
    """(manifest, tarball directory) of the 13.0.2 release, recompressed with ``codec``."""
    rel = release("13.0.2")
    if codec == "tar":
        return rel.manifest, rel.tarballs
    out = CACHE / codec
    manifest = out / rel.manifest.name
    if manifest.exists():
        return manifest, out / "tarballs"
    shutil.rmtree(out, ignore_errors=True)
    (out / "tarballs").mkdir(parents=True)
    data = json.loads(rel.manifest.read_text())
    for pname in rel.versions:
        tar = rel.tarball(pname)
        dest = out / "tarballs" / (tar.name + ".xz")
        with open(dest, "wb") as fh:
            subprocess.run(["xz", "-6", "-T2", "-c", str(tar)], stdout=fh, check=True)
        blob = dest.read_bytes()
        entry = data[pname]["linux-x86_64"]
        entry["relative_path"] += ".xz"
        entry.update(sha256=hashlib.sha256(blob).hexdigest(),
                     md5=hashlib.md5(blob).hexdigest(), size=str(len(blob)))
    manifest.write_text(json.dumps(data, indent=2))
    return manifest, out / "tarballs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--codec", choices=["tar", "xz"], default="tar")
    parser.add_argument("--validate", action="store_true")
    args = parser.parse_args()
    manifest, tarballs = prepare(args.codec)
    paths = sorted(p for p in tarballs.iterdir() if p.is_file())
    size = sum(p.stat().st_size for p in paths)
    runs: dict[str, Callable[[], object]] = {
        "verify": lambda: cudasplit.releases.verify_manifest(manifest, tarballs,
                                                    platforms=["linux-x86_64"]),
        "inspect": lambda: [cudasplit.inspect(p) for p in paths],
        "sbom cdx": lambda: cudasplit.sbom.sbom([tarballs], manifest=manifest),
        "sbom both": lambda: cudasplit.sbom.sbom_documents([tarballs], manifest=manifest),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for name in ("read", "write cdx", "write spdx"):
        times[name] = []
    for _ in range(args.repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
        phases(manifest, tarballs, times)
    med = {name: statistics.median(t) for name, t in times.items()}
    med["floor"] = med["verify"] + med["inspect"]
    files = sum(len(p.files) for p in sbom_of([tarballs], manifest=str(manifest)).packages)
    print(f"{len(paths)} tarballs ({args.codec}), {size / 1e6:,.0f} MB, {files:,} files, "
          f"median of {args.repeat} interleaved rounds\n")
    print("| run | seconds | / floor |\n|---|---:|---:|")
    for name in ("verify", "inspect", "floor", "sbom cdx", "sbom both", "read", "write cdx",
                 "write spdx"):
        print(f"| {name} | {med[name]:.2f} | {med[name] / med['floor']:.2f} |")
    if args.validate:
        validate(manifest, tarballs)
    return 0


def phases(manifest: Path, tarballs: Path, times: dict[str, list[float]]) -> None:
    """Where ``sbom both`` goes: the read (check, hashes, names), then each writer."""
    start = time.perf_counter()
    content = sbom_of([tarballs], manifest=str(manifest), sha1=True)
    read = time.perf_counter()
    cyclonedx_json(content)
    cdx = time.perf_counter()
    spdx_json(content)
    times["read"].append(read - start)
    times["write cdx"].append(cdx - read)
    times["write spdx"].append(time.perf_counter() - cdx)


def validate(manifest: Path, tarballs: Path) -> None:
    """What validating at run time would cost: each library's validator, once."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    docs = cudasplit.sbom.sbom_documents([tarballs], manifest=manifest)
    start = time.perf_counter()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(docs["cyclonedx"]) is None
    cdx = time.perf_counter() - start
    start = time.perf_counter()
    document = JsonLikeDictParser().parse(json.loads(docs["spdx"]))
    assert validate_full_spdx_document(document) == []
    spdx = time.perf_counter() - start
    print(f"\nvalidators, once: CycloneDX strict schema {cdx:.1f} s, "
          f"spdx-tools parse + validate {spdx:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
