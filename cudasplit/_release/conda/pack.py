"""One conda package (``.conda``) from one staged output: its ``info/`` and the archive.

The ``.conda`` container (the ``pkg-`` and ``info-`` tar.zst components in a stored zip) is
written by ``conda-package-streaming``'s builder; this module decides what goes in:

* ``info/index.json`` (name, version, build, depends, constrains, subdir, noarch, timestamp),
  ``info/about.json``, ``info/files``, ``info/paths.json`` (sha256 and size of every file; a
  link's are its target's, followed through the run's other packages, which share the prefix),
  ``info/run_exports.json``, and for files that name the install-prefix placeholder
  ``prefix_placeholder``/``file_mode`` in ``paths.json`` and ``info/has_prefix`` (conda
  replaces it at install time); ``info/licenses/`` as staged;
* links as conda-build leaves them: a link whose text does not start with ``.`` is rewritten
  to the relative path of its fully resolved target (``libcudart.so -> libcudart.so.13`` becomes
  ``libcudart.so -> libcudart.so.13.0.96``), resolved through the run's packages, which share
  the prefix; one that starts with ``.`` (``../targets/...``) is kept as written, and so is one
  whose target the run does not hold (conda-build's ``check_symlinks``);
* reproducible bytes: members sorted, uid/gid 0, modes normalised, one mtime, JSON with sorted
  keys, zstd settings that do not depend on the clock, and the zip's own member times (the
  builder stamps the clock) set to 1980-01-01.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudasplit.errors import OptionsError, OutputError

__all__ = ["CondaMeta", "pack_conda", "real_path"]

CHUNK = 1 << 20
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "linux-ppc64le": "ppc64le"}
_MAX_HOPS = 40
# The zip's DOS date and time of 1980-01-01 00:00:00 (its epoch).
_DOS_DATE, _DOS_TIME = (1 << 5) | 1, 0


@dataclass(frozen=True, slots=True)
class CondaMeta:
    """The metadata of one package (templates already filled).

    Attributes:
        name: the package name.
        version: its version.
        build: the build string.
        build_number: the build number.
        subdir: ``noarch``, ``linux-64``, ``linux-aarch64``.
        noarch: ``generic`` or ``None``.
        depends: run dependencies (match specs).
        constrains: run constraints.
        run_exports: kind -> specs.
        about: home, license, summary, ...
        timestamp: milliseconds since the epoch.

    Raises:
        Nothing: a value.
    """

    name: str
    version: str
    build: str
    build_number: int
    subdir: str
    noarch: str | None
    depends: tuple[str, ...]
    constrains: tuple[str, ...]
    run_exports: tuple[tuple[str, tuple[str, ...]], ...]
    about: tuple[tuple[str, str], ...]
    timestamp: int

    @property
    def stem(self) -> str:
        return f"{self.name}-{self.version}-{self.build}"

    def index_json(self) -> dict[str, Any]:
        index: dict[str, Any] = {
            "arch": _ARCH.get(self.subdir), "build": self.build,
            "build_number": self.build_number, "depends": list(self.depends),
            "license": dict(self.about).get("license", ""), "name": self.name,
            "platform": "linux" if self.subdir.startswith("linux-") else None,
            "subdir": self.subdir, "timestamp": self.timestamp, "version": self.version,
        }
        if self.constrains:
            index["constrains"] = list(self.constrains)
        if self.noarch:
            index["noarch"] = self.noarch
        return index


@dataclass(frozen=True, slots=True)
class _Entry:
    path: str            # relative to the package root (and $PREFIX, outside info/)
    local: Path          # the staged file
    link: str | None     # a symlink's text


def pack_conda(meta: CondaMeta, root: Path, dest: Path, *, placeholder: str | None,
               resolve: Callable[[str], Path | None], level: int, threads: int,
               mtime: int) -> None:
    """Write ``dest`` (a ``.conda``) from the staged package ``root``.

    Args:
        meta: the package's metadata.
        root: the staged output (``info/`` below it goes into the info component).
        dest: the archive to write (``<stem>.conda``).
        placeholder: the install-prefix placeholder files may name (``None``: none).
        resolve: a prefix path -> the staged regular file of the run that holds it (links
            are followed through it for their sha256 and size).
        level: zstd level.
        threads: zstd workers (0: none; the bytes are the same for any value >= 1).
        mtime: every member's mtime.

    Raises:
        OutputError: the archive cannot be written.
        OptionsError: conda-package-streaming is not installed.
    """
    builder = _builder()
    entries = list(_walk(root))
    payload = [_as_conda_build_links(e, resolve) for e in entries
               if not e.path.startswith("info/")]
    records = [_record(e, placeholder, resolve) for e in payload]
    info = _info_files(meta, records, [e for e in entries if e.path.startswith("info/")])
    compressor = _compressor(level, threads)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with builder(meta.stem, dest.parent, compressor=compressor) as tar:
            for name, data in sorted(info.items()):
                tar.addfile(_info(name, len(data), 0o644, mtime), io.BytesIO(data))
            for entry in payload:
                _add(tar, entry, mtime)
        _zero_zip_times(dest)
    except OSError as exc:
        raise OutputError(f"{dest}: cannot write the conda package ({exc.strerror or exc})") \
            from exc


def _builder() -> Any:
    try:
        from conda_package_streaming.create import conda_builder
    except ImportError as exc:
        raise OptionsError("the conda format (fmt conda) needs conda-package-streaming "
                           "(pip install 'cudasplit[conda]')") from exc
    return conda_builder


def _compressor(level: int, threads: int) -> Callable[[], Any]:
    import zstandard

    return lambda: zstandard.ZstdCompressor(level=level, threads=threads, write_checksum=True)


def _walk(root: Path) -> Iterator[_Entry]:
    """Files and symlinks below ``root``, sorted by path (directories are implied)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            local = Path(dirpath, name)
            path = name if rel == "." else f"{rel}/{name}"
            if local.is_symlink():
                found.append(_Entry(path, local, os.readlink(local)))
            elif local.is_file():
                found.append(_Entry(path, local, None))
    yield from sorted(found, key=lambda e: e.path.split("/"))


def _record(entry: _Entry, placeholder: str | None,
            resolve: Callable[[str], Path | None]) -> dict[str, Any]:
    """The ``paths.json`` entry of one file or link."""
    if entry.link is not None:
        target = _follow(entry.path, resolve)
        record: dict[str, Any] = {"_path": entry.path, "path_type": "softlink"}
        if target is None:  # a directory, or nothing of this run (conda-build: empty file)
            record.update(sha256=EMPTY_SHA256, size_in_bytes=0)
        else:
            digest, size, _mode = _scan(target, None)
            record.update(sha256=digest, size_in_bytes=size)
        return record
    digest, size, mode = _scan(entry.local, placeholder)
    record = {"_path": entry.path, "path_type": "hardlink", "sha256": digest,
              "size_in_bytes": size}
    if mode is not None:
        record.update(file_mode=mode, prefix_placeholder=placeholder)
    return record


def _follow(path: str, resolve: Callable[[str], Path | None]) -> Path | None:
    """The staged regular file a link resolves to in the shared prefix, if the run has it."""
    real = real_path(path, resolve)
    local = resolve(real) if real is not None else None
    return local if local is not None and local.is_file() and not local.is_symlink() else None


def real_path(path: str, resolve: Callable[[str], Path | None]) -> str | None:
    """``path``'s fully resolved prefix path (``os.path.realpath`` over the shared prefix):
    every link on the way followed, component by component, through the run's packages;
    ``None`` when a component is not in the run, a link is absolute or climbs out of the
    prefix, or more than :data:`_MAX_HOPS` links are followed."""
    done: list[str] = []
    todo = path.split("/")
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        local = resolve("/".join((*done, part)))
        if local is None:
            return None
        if local.is_symlink():
            hops += 1
            text = os.readlink(local)
            if hops > _MAX_HOPS or text.startswith("/"):
                return None
            todo = text.split("/") + todo
        else:
            done.append(part)
    return "/".join(done)


def _as_conda_build_links(entry: _Entry, resolve: Callable[[str], Path | None]) -> _Entry:
    """A link rewritten to its real target as conda-build's ``check_symlinks`` does (see the
    module docstring); files and other links as they are."""
    if entry.link is None or entry.link.startswith("."):
        return entry
    real = real_path(entry.path, resolve)
    if real is None:
        return entry
    text = os.path.relpath(real, os.path.dirname(entry.path) or ".")
    return entry if text == entry.link else _Entry(entry.path, entry.local, text)


def _scan(path: Path, placeholder: str | None) -> tuple[str, int, str | None]:
    """sha256, size, and how the placeholder appears (``text``, ``binary``, or ``None``)."""
    digest, size = hashlib.sha256(), 0
    needle = placeholder.encode() if placeholder else b""
    found = has_nul = False
    tail = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if needle:
                found = found or needle in tail + chunk
                has_nul = has_nul or b"\0" in chunk
                tail = chunk[-(len(needle) - 1):] if len(needle) > 1 else b""
    mode = ("binary" if has_nul else "text") if found else None
    return digest.hexdigest(), size, mode


def _info_files(meta: CondaMeta, records: list[dict[str, Any]],
                staged: list[_Entry]) -> dict[str, bytes]:
    """``info/`` of the package: generated JSON plus the staged ``info/`` files."""
    info = {
        "info/index.json": _json(meta.index_json()),
        "info/about.json": _json(dict(meta.about)),
        "info/paths.json": _json({"paths": records, "paths_version": 1}),
        "info/files": "".join(f"{r['_path']}\n" for r in records).encode(),
    }
    if meta.run_exports:
        info["info/run_exports.json"] = _json({k: list(v) for k, v in meta.run_exports})
    prefixed = [r for r in records if "prefix_placeholder" in r]
    if prefixed:
        info["info/has_prefix"] = "".join(
            f"{r['prefix_placeholder']} {r['file_mode']} {r['_path']}\n" for r in prefixed
        ).encode()
    for entry in staged:
        if entry.link is None:
            info[entry.path] = entry.local.read_bytes()
    return info


def _json(value: Mapping[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def _info(name: str, size: int, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add(tar: tarfile.TarFile, entry: _Entry, mtime: int) -> None:
    if entry.link is not None:
        info = _info(entry.path, 0, 0o777, mtime)
        info.type, info.linkname = tarfile.SYMTYPE, entry.link
        tar.addfile(info)
        return
    st = entry.local.stat()
    mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
    with open(entry.local, "rb") as fh:
        tar.addfile(_info(entry.path, st.st_size, mode, mtime), fh)


def _zero_zip_times(path: Path) -> None:
    """Every local header's and central-directory entry's DOS time and date to the zip epoch:
    the builder stamps the clock, the only part of the bytes that would change run to run."""
    with zipfile.ZipFile(path) as zf:
        offsets = [info.header_offset for info in zf.infolist()]
        start = zf.start_dir
        count = len(offsets)
    with open(path, "r+b") as fh:
        for offset in offsets:
            fh.seek(offset)
            if fh.read(4) != b"PK\x03\x04":
                raise OSError(f"{path}: not a local zip header at {offset}")
            fh.seek(offset + 10)
            fh.write(struct.pack("<HH", _DOS_TIME, _DOS_DATE))
        position = start
        for _ in range(count):
            fh.seek(position)
            header = fh.read(46)
            if header[:4] != b"PK\x01\x02":
                raise OSError(f"{path}: not a central directory entry at {position}")
            fh.seek(position + 12)
            fh.write(struct.pack("<HH", _DOS_TIME, _DOS_DATE))
            name_len, extra_len, comment_len = struct.unpack("<HHH", header[28:34])
            position += 46 + name_len + extra_len + comment_len
