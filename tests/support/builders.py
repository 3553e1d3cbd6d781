"""Build realistic NVIDIA-style redistributable trees and tarballs in code, for the tests.

Nothing here touches the network. ELF files are real: they are compiled with gcc (or
``aarch64-linux-gnu-gcc``) from tiny C sources, so SONAME, NEEDED, RPATH and RUNPATH are what
the dynamic linker wrote, not hand-made bytes. Static archives are real ``ar`` archives.

Compiling is the slow part, so every distinct artifact is compiled once per process into a
session cache directory (keyed by its inputs through :func:`functools.cache`) and copied to
where it is wanted. A second tree with the same flags therefore costs only file copies.

Main entry points:

* :func:`compile_shared`, :func:`compile_executable`, :func:`make_static_archive`
* :func:`build_redist_tree` with a :class:`RedistVariant` (or keyword overrides of its flags)
* :data:`DEFAULT_RULES`, :func:`classify_default`, :func:`expected_outputs`,
  :data:`EXPECTED_DEFAULT`: which output the default profile must give each member
* :func:`write_tarball` (xz, multi-block xz, gz, bz2, zst, plain tar), :func:`open_tarball`,
  :func:`tar_members`, :func:`xz_block_count` to read them back
* :func:`tree_from_reference`: turn ``tests/data/trees/*.txt`` member lists into trees
* :func:`build_large_tarball`: a few hundred MB of cheap, barely compressible members
* :func:`dynamic_entries`: ``readelf -d`` as a dict, for assertions
"""

from __future__ import annotations

import atexit
import bz2
import contextlib
import dataclasses
import fnmatch
import functools
import gzip
import hashlib
import io
import lzma
import os
import platform as _platform
import random
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Final, Literal

import zstandard

from tests.support.paths import DATA

Arch = Literal["x86_64", "aarch64"]
Compression = Literal["xz", "xz-multiblock", "gz", "bz2", "zst", "none"]
COMPRESSIONS: Final[tuple[Compression, ...]] = ("xz", "xz-multiblock", "gz", "bz2", "zst", "none")
TARBALL_SUFFIX: Final[Mapping[Compression, str]] = {
    "xz": ".tar.xz",
    "xz-multiblock": ".tar.xz",
    "gz": ".tar.gz",
    "bz2": ".tar.bz2",
    "zst": ".tar.zst",
    "none": ".tar",
}
# A fixed timestamp (2025-01-01T00:00:00Z) so trees and tarballs are reproducible.
FIXED_MTIME: Final = 1_735_689_600


class BuilderError(RuntimeError):
    """A tool (gcc, ar, xz) failed or is missing while building test inputs."""


# --------------------------------------------------------------------------------------------
# Session cache and subprocess helpers
# --------------------------------------------------------------------------------------------


@functools.cache
def _cache_dir() -> Path:
    """One scratch directory per process; removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="cudasplit-builders-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:20]


def _file_digest(path: Path) -> str:
    return _digest(path.read_bytes())


def _run(cmd: Sequence[str], *, cwd: Path | None = None) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuilderError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")


def _install(cached: Path, dest: Path) -> Path:
    """Copy a cached artifact to ``dest`` (parents created), keeping its mode."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    shutil.copy2(cached, dest)
    return dest


def cc_for_arch(arch: Arch) -> str:
    """The C compiler that produces ``arch`` code here; BuilderError when none is installed."""
    host = _platform.machine()
    if arch == host or (arch == "aarch64" and host == "arm64"):
        return "gcc"
    if arch == "aarch64" and shutil.which("aarch64-linux-gnu-gcc"):
        return "aarch64-linux-gnu-gcc"
    if arch == "x86_64" and shutil.which("x86_64-linux-gnu-gcc"):
        return "x86_64-linux-gnu-gcc"
    raise BuilderError(f"no C compiler for {arch} on this {host} machine")


def have_compiler(arch: Arch) -> bool:
    """True when :func:`cc_for_arch` would succeed (use it in ``pytest.mark.skipif``)."""
    try:
        cc_for_arch(arch)
    except BuilderError:
        return False
    return True


def _binutil(cc: str, tool: str) -> str:
    """The binutils program matching a compiler (``aarch64-linux-gnu-gcc`` -> ``...-ar``)."""
    if cc.endswith("gcc"):
        candidate = cc[: -len("gcc")] + tool
        if shutil.which(candidate):
            return candidate
    return tool


# --------------------------------------------------------------------------------------------
# Compilation (cached)
# --------------------------------------------------------------------------------------------

LibRef = str | Path
"""A library for DT_NEEDED: a Path (link that file) or a name (see :func:`compile_shared`)."""


@functools.cache
def _object(c_source: str, stem: str, cc: str, cflags: tuple[str, ...]) -> Path:
    """Compile ``c_source`` to ``<stem>.o``; the file is named after the artifact because the
    object's STT_FILE symbol keeps the source name."""
    work = _cache_dir() / "obj" / _digest(c_source, stem, cc, *cflags)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"{stem}.c"
    src.write_text(c_source)
    obj = work / f"{stem}.o"
    _run([cc, "-c", "-fPIC", "-O1", *cflags, "-o", str(obj), str(src)])
    return obj


@functools.cache
def _staged(digest: str, path_str: str) -> Path:
    """A private copy of a library to link against, keyed by content, so the link cache does
    not depend on where a test put its copy."""
    staged = _cache_dir() / "needed" / digest / Path(path_str).name
    staged.parent.mkdir(parents=True, exist_ok=True)
    if not staged.exists():
        shutil.copy2(path_str, staged)
    return staged


def _standin(soname: str, cc: str) -> Path:
    """An empty shared object whose only job is to carry ``soname`` into a DT_NEEDED."""
    return _link("shared", "/* link-time stand-in */\n", soname, soname, (), None, None, cc, ())


def _resolve_needed(
    needed_libs: Sequence[LibRef], lib_dirs: Sequence[Path], cc: str
) -> tuple[tuple[str, str], ...]:
    """Turn NEEDED requests into (content digest, staged path) pairs for the link cache."""
    resolved: list[tuple[str, str]] = []
    for lib in needed_libs:
        if isinstance(lib, Path):
            path = lib
        else:
            found = [d / n for d in lib_dirs for n in (lib, f"lib{lib}.so") if (d / n).exists()]
            path = found[0] if found else _standin(lib, cc)
        digest = _file_digest(path)
        resolved.append((digest, str(_staged(digest, str(path)))))
    return tuple(resolved)


def _search_path_flags(rpath: str | None, runpath: str | None) -> list[str]:
    """Linker flags for DT_RPATH (old dtags) or DT_RUNPATH (new dtags); not both at once,
    because binutils 2.40 writes only one of the two tags."""
    if rpath is not None and runpath is not None:
        raise ValueError("give rpath or runpath, not both")
    if rpath is not None:
        return ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath is not None:
        return ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    return []


@functools.cache
def _link(
    kind: Literal["shared", "exe"],
    c_source: str,
    name: str,
    soname: str | None,
    needed: tuple[tuple[str, str], ...],
    rpath: str | None,
    runpath: str | None,
    cc: str,
    extra: tuple[str, ...],
) -> Path:
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", name.split(".so")[0]) or "artifact"
    obj = _object(c_source, stem, cc, extra)
    out = (
        _cache_dir()
        / "out"
        / _digest(
            kind, c_source, name, str(soname), repr(needed), str(rpath), str(runpath), cc, *extra
        )
        / name
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [cc, "-o", str(out), str(obj), *extra]
    if kind == "shared":
        cmd += ["-shared", "-fPIC"]
        if soname is not None:
            cmd.append(f"-Wl,-soname,{soname}")
    # --no-as-needed: record every requested NEEDED even if no symbol is used (stand-ins).
    cmd.append("-Wl,--no-as-needed")
    for _content_digest, staged in needed:
        cmd += [f"-L{Path(staged).parent}", f"-l:{Path(staged).name}"]
    cmd += _search_path_flags(rpath, runpath)
    _run(cmd)
    return out


def compile_shared(
    dir: Path,
    name: str,
    c_source: str,
    *,
    soname: str | None = None,
    needed_libs: Sequence[LibRef] = (),
    lib_dirs: Sequence[Path] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    cc: str = "gcc",
    extra: Sequence[str] = (),
) -> Path:
    """Compile ``c_source`` into the shared object ``dir/name`` and return its path.

    ``needed_libs``: each becomes a DT_NEEDED. A :class:`Path` is linked as it is (its SONAME
    is recorded). A string is looked up as ``<dir>/<name>`` or ``<dir>/lib<name>.so`` in
    ``lib_dirs``; when not found it is taken as a SONAME and an empty stand-in library is
    linked, so the NEEDED is recorded but no symbol can come from it.
    ``rpath`` writes DT_RPATH, ``runpath`` writes DT_RUNPATH (at most one). ``extra`` goes to
    both compile and link (e.g. ``("-s",)`` to strip).
    """
    needed = _resolve_needed(needed_libs, lib_dirs, cc)
    cached = _link("shared", c_source, name, soname, needed, rpath, runpath, cc, tuple(extra))
    return _install(cached, dir / name)


def compile_executable(
    dir: Path,
    name: str,
    c_source: str,
    *,
    needed_libs: Sequence[LibRef] = (),
    lib_dirs: Sequence[Path] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    cc: str = "gcc",
    extra: Sequence[str] = (),
) -> Path:
    """Compile ``c_source`` (with a ``main``) into the PIE executable ``dir/name``.

    Parameters as for :func:`compile_shared`.
    """
    needed = _resolve_needed(needed_libs, lib_dirs, cc)
    cached = _link("exe", c_source, name, None, needed, rpath, runpath, cc, tuple(extra))
    return _install(cached, dir / name)


@functools.cache
def _archive(name: str, members: tuple[tuple[str, str], ...], cc: str) -> Path:
    """Build an ``ar`` archive from (member name, object path) pairs; ``D`` keeps it
    deterministic (zero mtimes/uids), ``s`` writes the symbol index like NVIDIA's."""
    work = _cache_dir() / "ar" / _digest(name, repr(members), cc)
    work.mkdir(parents=True, exist_ok=True)
    for member, obj in members:
        shutil.copy2(obj, work / member)
    out = work / name
    _run([_binutil(cc, "ar"), "rcsD", str(out), *(member for member, _ in members)], cwd=work)
    return out


def make_static_archive(
    dir: Path,
    name: str,
    objects_or_sources: Sequence[str | Path],
    *,
    cc: str = "gcc",
    extra: Sequence[str] = (),
) -> Path:
    """Write the real ``ar`` archive ``dir/name`` and return its path.

    Each item is C source text (compiled with ``cc``) or the Path of an existing object file.
    Members are named ``<archive stem>_<i>.o``.
    """
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", name.removesuffix(".a"))
    members: list[tuple[str, str]] = []
    for i, item in enumerate(objects_or_sources):
        member = f"{stem}_{i}"
        obj = _object(item, member, cc, tuple(extra)) if isinstance(item, str) else item
        members.append((f"{member}.o", str(obj)))
    return _install(_archive(name, tuple(members), cc), dir / name)


def dynamic_entries(path: Path) -> dict[str, list[str]]:
    """``readelf -d`` as ``{"SONAME": [...], "NEEDED": [...], "RPATH": [...], "RUNPATH": [...]}``
    (only the tags that are present); the bracketed value of each line is kept verbatim."""
    proc = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True)
    entries: dict[str, list[str]] = {}
    for match in re.finditer(r"\((\w+)\)\s+.*?\[(.*)\]", proc.stdout):
        entries.setdefault(match.group(1), []).append(match.group(2))
    return entries


def is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


# --------------------------------------------------------------------------------------------
# C sources of the demo package
# --------------------------------------------------------------------------------------------


def _lib_source(prefix: str, calls: str | None = None) -> str:
    """A small library: a version string, an arithmetic function and optionally a call into a
    dependency, so that NEEDED is a real symbol dependency and not only a stand-in."""
    body = f"return {calls}(a, b) + 1;" if calls else "return a + b;"
    decl = f"int {calls}(int, int);\n" if calls else ""
    return (
        f"{decl}"
        f'const char *{prefix}_version(void) {{ return "{prefix} 1"; }}\n'
        f"int {prefix}_add(int a, int b) {{ {body} }}\n"
    )


def _exe_source(calls: str | None = None) -> str:
    if calls is None:
        return '#include <stdio.h>\nint main(void) { puts("demo"); return 0; }\n'
    return (
        "#include <stdio.h>\n"
        f"const char *{calls}(void);\n"
        f'int main(void) {{ printf("%s\\n", {calls}()); return 0; }}\n'
    )


# The real stub returns CUDA_ERROR_STUB_LIBRARY (34) from every entry point.
_STUB_CUDA_SOURCE: Final = "int cuInit(unsigned int flags) { (void)flags; return 34; }\n"


# --------------------------------------------------------------------------------------------
# The demo redistributable tree
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RedistVariant:
    """Which parts :func:`build_redist_tree` creates. Defaults: everything but the opt-in
    layouts (nsight_compute-style ``host/``+``target/``, cross-output symlinks)."""

    arch: Arch = "x86_64"
    with_license: bool = True
    with_bin: bool = True  # bin/demo (ELF, NEEDED libdemo.so.12), bin/demo-run, bin/demo.profile
    with_hardlink: bool = True  # bin/demo-query + bin/demo-query-<major.minor> (one inode)
    with_include: bool = True  # nested headers
    with_dir_symlink: bool = True  # include/crt_compat -> crt
    with_lib: bool = True  # lib/libdemo*, symlink chains, RPATH/RUNPATH variants
    with_static: bool = True  # lib/libdemo_static.a, lib/x64/libnested.a
    with_stubs: bool = True  # lib/stubs/libcuda.so (+ lib/stubs/libcuda_stub_extra.a if static)
    with_cmake: bool = True  # lib/cmake/demo/*.cmake
    with_pkgconfig: bool = True  # pkg-config/demo-X.Y.pc, pkg-config/cudart-X.Y.pc
    with_doc: bool = True  # doc/, share/man/man1/demo.1
    with_samples: bool = True
    with_python: bool = True  # python/demo-X.Y-py3-none-any.whl
    with_host_target: bool = True  # nsight_systems-style host-<arch>/ + target-<arch>/
    with_nsight_compute: bool = False  # nsight_compute-style host/<archDir>/ + target/<archDir>/
    with_src: bool = True  # src/*.c, src/*.h (libcublas-style)
    with_nvvm: bool = True  # nvvm/lib64/libnvvm.so chain, nvvm/include/nvvm.h
    with_lib64: bool = True  # a real lib64/libextra.so
    with_cross_symlinks: bool = False  # bin/demo-lib -> ../lib/..., lib/libcuda.so -> stubs/...
    strip: bool = False  # strip ELF files (gcc -s)
    compact: bool = False  # -z noseparate-code: 2 PT_LOADs, no page padding (older toolchains)


DEFAULT_VARIANT: Final = RedistVariant()

# platform, host dir, target dir, pkg-config triple, nsight_compute arch dir
_ARCH_LAYOUT: Final[Mapping[Arch, tuple[str, str, str, str, str]]] = {
    "x86_64": (
        "linux-x86_64",
        "host-linux-x64",
        "target-linux-x64",
        "x86_64-linux",
        "linux-desktop-glibc_2_11_3-x64",
    ),
    "aarch64": (
        "linux-sbsa",
        "host-linux-armv8",
        "target-linux-sbsa-armv8",
        "sbsa-linux",
        "linux-desktop-t210-a64",
    ),
}


@dataclasses.dataclass(frozen=True)
class _Ctx:
    """What every section builder needs."""

    top: Path
    variant: RedistVariant
    version: str
    cc: str

    @property
    def major(self) -> str:
        return self.version.split(".")[0]

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def layout(self) -> tuple[str, str, str, str, str]:
        return _ARCH_LAYOUT[self.variant.arch]

    @property
    def extra(self) -> tuple[str, ...]:
        flags = ("-s",) if self.variant.strip else ()
        # noseparate-code drops the page-aligned padding that makes tiny ELF files 15 KiB.
        return flags + (("-Wl,-z,noseparate-code",) if self.variant.compact else ())

    def text(self, rel: str, content: str, mode: int = 0o644) -> Path:
        path = self.top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(mode)
        return path

    def symlink(self, rel: str, target: str) -> None:
        path = self.top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    def shared(
        self,
        rel: str,
        source: str,
        *,
        soname: str | None = None,
        needed_libs: Sequence[LibRef] = (),
        rpath: str | None = None,
        runpath: str | None = None,
    ) -> Path:
        path = self.top / rel
        return compile_shared(
            path.parent,
            path.name,
            source,
            soname=soname,
            needed_libs=needed_libs,
            rpath=rpath,
            runpath=runpath,
            cc=self.cc,
            extra=self.extra,
        )

    def exe(
        self,
        rel: str,
        source: str,
        *,
        needed_libs: Sequence[LibRef] = (),
        runpath: str | None = None,
    ) -> Path:
        path = self.top / rel
        return compile_executable(
            path.parent,
            path.name,
            source,
            needed_libs=needed_libs,
            runpath=runpath,
            cc=self.cc,
            extra=self.extra,
        )

    def static(self, rel: str, *sources: str) -> Path:
        path = self.top / rel
        return make_static_archive(path.parent, path.name, list(sources), cc=self.cc)

    def versioned_chain(
        self,
        rel_dir: str,
        base: str,
        version: str,
        source: str,
        *,
        needed_libs: Sequence[LibRef] = (),
        rpath: str | None = None,
        runpath: str | None = None,
    ) -> Path:
        """``lib<base>.so -> lib<base>.so.<major> -> lib<base>.so.<version>`` (real file last);
        the middle name is the SONAME, as the loader looks it up."""
        major = version.split(".")[0]
        real = self.shared(
            f"{rel_dir}/lib{base}.so.{version}",
            source,
            soname=f"lib{base}.so.{major}",
            needed_libs=needed_libs,
            rpath=rpath,
            runpath=runpath,
        )
        self.symlink(f"{rel_dir}/lib{base}.so.{major}", f"lib{base}.so.{version}")
        self.symlink(f"{rel_dir}/lib{base}.so", f"lib{base}.so.{major}")
        return real

    def libdemo(self) -> Path:
        """The cached libdemo shared object, for linking (whether or not lib/ is shipped)."""
        return _link(
            "shared",
            _lib_source("demo"),
            f"libdemo.so.{self.version}",
            f"libdemo.so.{self.major}",
            (),
            None,
            None,
            self.cc,
            self.extra,
        )


def _add_license(c: _Ctx) -> None:
    c.text(
        "LICENSE",
        "End User License Agreement\n--------------------------\n\n"
        "Test fixture written by cudasplit's tests; not NVIDIA's license text.\n",
    )


def _add_bin(c: _Ctx) -> None:
    libdemo = c.libdemo()
    c.exe("bin/demo", _exe_source("demo_version"), needed_libs=[libdemo])
    c.text(
        "bin/demo-run",
        '#!/bin/sh\n# wrapper script, like nsight\'s bin/nsys\nexec "$(dirname "$0")/demo" "$@"\n',
        0o755,
    )
    c.text(
        "bin/demo.profile",
        (
            "\nTOP              = $(_HERE_)/..\n\n"
            "NVVMIR_LIBRARY_DIR = $(TOP)/$(_NVVM_BRANCH_)/libdevice\n\n"
            "LD_LIBRARY_PATH += $(TOP)/lib:\n"
            "PATH            += $(TOP)/$(_NVVM_BRANCH_)/bin:$(_HERE_):\n\n"
            'INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)\n\n'
            'LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs"'
            ' "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"\n'
        ),
    )
    if c.variant.with_hardlink:
        # Two names, one inode: the tarball writer emits the second one as a tar LNKTYPE.
        query = c.exe("bin/demo-query", _exe_source())
        os.link(query, c.top / f"bin/demo-query-{c.major_minor}")


_HEADERS: Final[Mapping[str, str]] = {
    "include/cuda_demo.h": (
        '#pragma once\n#include "crt/host_defines.h"\n'
        "const char *demo_version(void);\nint demo_add(int, int);\n"
    ),
    "include/crt/host_defines.h": "#pragma once\n#define __host__\n#define __device__\n",
    "include/cooperative_groups.h": '#pragma once\n#include "cooperative_groups/details/async.h"\n',
    "include/cooperative_groups/details/async.h": "#pragma once\n/* async copies */\n",
}


def _add_include(c: _Ctx) -> None:
    for rel, content in _HEADERS.items():
        c.text(rel, content)
    if c.variant.with_dir_symlink:
        c.symlink("include/crt_compat", "crt")


def _add_lib(c: _Ctx) -> None:
    _install(c.libdemo(), c.top / f"lib/libdemo.so.{c.version}")
    c.symlink(f"lib/libdemo.so.{c.major}", f"libdemo.so.{c.version}")
    c.symlink("lib/libdemo.so", f"libdemo.so.{c.major}")
    # libcublas-style: DT_RPATH=$ORIGIN and a real symbol dependency on the first library.
    c.versioned_chain(
        "lib",
        "demoBlas",
        c.version,
        _lib_source("demoBlas", calls="demo_add"),
        needed_libs=[c.libdemo()],
        rpath="$ORIGIN",
    )
    # libnvrtc-style: DT_RUNPATH with an empty trailing entry (= the current directory).
    c.versioned_chain("lib", "demoRtc", c.version, _lib_source("demoRtc"), runpath="$ORIGIN:")


def _add_static(c: _Ctx) -> None:
    c.static("lib/libdemo_static.a", _lib_source("demo_static"), _lib_source("demo_static2"))
    c.static("lib/x64/libnested.a", _lib_source("nested"))


def _add_stubs(c: _Ctx) -> None:
    c.shared("lib/stubs/libcuda.so", _STUB_CUDA_SOURCE, soname="libcuda.so.1")
    if c.variant.with_static:
        c.static("lib/stubs/libcuda_stub_extra.a", _lib_source("stub_extra"))


def _add_cmake(c: _Ctx) -> None:
    c.text(
        "lib/cmake/demo/demo-config.cmake",
        'get_filename_component(_demo_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)\n'
        "add_library(demo::demo SHARED IMPORTED)\n"
        "set_target_properties(demo::demo PROPERTIES\n"
        f'  IMPORTED_LOCATION "${{_demo_root}}/lib/libdemo.so.{c.major}"\n'
        '  INTERFACE_INCLUDE_DIRECTORIES "${_demo_root}/include")\n',
    )
    c.text("lib/cmake/demo/demo-config-version.cmake", f'set(PACKAGE_VERSION "{c.version}")\n')


def pkgconfig_text(name: str, description: str, major_minor: str, triple: str, libs: str) -> str:
    """A ``.pc`` file written the way NVIDIA writes them (cudaroot/libdir/includedir)."""
    return (
        f"cudaroot=/usr/local/cuda-{major_minor}\n"
        f"libdir=${{cudaroot}}/targets/{triple}/lib\n"
        f"includedir=${{cudaroot}}/targets/{triple}/include\n"
        "\n"
        f"Name: {name}\n"
        f"Description: {description}\n"
        f"Version: {major_minor}\n"
        f"Libs: -L${{libdir}} {libs}\n"
        "Cflags: -I${includedir}\n"
    )


def _add_pkgconfig(c: _Ctx) -> None:
    triple = c.layout[3]
    c.text(
        f"pkg-config/demo-{c.major_minor}.pc",
        pkgconfig_text("demo", "Demo Library", c.major_minor, triple, "-ldemo"),
    )
    c.text(
        f"pkg-config/cudart-{c.major_minor}.pc",
        pkgconfig_text("cudart", "CUDA Runtime Library", c.major_minor, triple, "-lcudart"),
    )


def _add_doc(c: _Ctx) -> None:
    c.text("doc/html/index.html", "<html><body><h1>Demo</h1></body></html>\n")
    c.text("doc/README.txt", "Demo library documentation.\n")
    c.text("share/man/man1/demo.1", ".TH DEMO 1\n.SH NAME\ndemo \\- print the version\n")


def _add_samples(c: _Ctx) -> None:
    c.text(
        "samples/vectorAdd/vectorAdd.cu",
        "__global__ void vectorAdd(const float *a, float *b) { b[0] = a[0]; }\n",
    )
    c.text("samples/vectorAdd/Makefile", "vectorAdd: vectorAdd.cu\n\tnvcc -o $@ $<\n")


def _wheel_bytes(name: str, version: str) -> bytes:
    """A tiny valid wheel (zip) with fixed timestamps, so tarballs stay reproducible."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: cudasplit-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist_info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, content in [*files.items(), (f"{dist_info}/RECORD", record)]:
            zf.writestr(zipfile.ZipInfo(path, date_time=(2025, 1, 1, 0, 0, 0)), content)
    return buf.getvalue()


def _add_python(c: _Ctx) -> None:
    path = c.top / f"python/demo-{c.major_minor}-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_wheel_bytes("demo", c.major_minor))


def _add_host_target(c: _Ctx) -> None:
    """nsight_systems-style trees: vendored libraries, an exe with RUNPATH=$ORIGIN, docs and an
    archive inside, and a relative symlink from host into target."""
    _, host, target, _, _ = c.layout
    libtarget = c.shared(f"{target}/libtarget.so", _lib_source("target"), soname="libtarget.so")
    c.exe(
        f"{target}/demo-cli",
        _exe_source("target_version"),
        needed_libs=[libtarget],
        runpath="$ORIGIN",
    )
    c.static(f"{target}/libtarget_static.a", _lib_source("target_static"))
    qt = c.shared(f"{host}/libQt6Core.so.6", _lib_source("qt"), soname="libQt6Core.so.6")
    c.exe(f"{host}/demo-ui.bin", _exe_source("qt_version"), needed_libs=[qt], runpath="$ORIGIN")
    c.static(f"{host}/libhost_helpers.a", _lib_source("host_helpers"))
    c.text(f"{host}/doc/notes.txt", "Docs inside a host tree stay with the tree.\n")
    c.text(f"{host}/include/host_api.h", "#pragma once\n")
    c.symlink(f"{host}/libtarget.so", f"../{target}/libtarget.so")


def _add_nsight_compute(c: _Ctx) -> None:
    arch_dir = c.layout[4]
    lib = c.shared(
        f"host/{arch_dir}/libHostUtil.so", _lib_source("hostutil"), soname="libHostUtil.so"
    )
    c.exe(
        f"host/{arch_dir}/ncu-ui.bin",
        _exe_source("hostutil_version"),
        needed_libs=[lib],
        runpath="$ORIGIN",
    )
    c.text(f"host/{arch_dir}/docs/index.html", "<html></html>\n")
    c.static(f"target/{arch_dir}/libTargetStatic.a", _lib_source("target_static_ncu"))
    c.shared(
        f"target/{arch_dir}/libInterceptor.so",
        _lib_source("interceptor"),
        soname="libInterceptor.so",
    )


def _add_src(c: _Ctx) -> None:
    c.text("src/demo_fortran.c", '#include "demo_fortran.h"\nint demo_fortran(void);\n')
    c.text("src/demo_fortran.h", "#pragma once\n")


def _add_nvvm(c: _Ctx) -> None:
    c.versioned_chain("nvvm/lib64", "nvvm", "4.0.0", _lib_source("nvvm"))
    c.text("nvvm/include/nvvm.h", "#pragma once\n")


def _add_lib64(c: _Ctx) -> None:
    c.shared("lib64/libextra.so", _lib_source("extra"), soname="libextra.so")


def _add_cross_symlinks(c: _Ctx) -> None:
    """Symlinks whose own path would go elsewhere than their target's: they follow the
    target (into lib and stubs)."""
    if c.variant.with_lib:
        c.symlink("bin/demo-lib", f"../lib/libdemo.so.{c.version}")
    if c.variant.with_stubs:
        c.symlink("lib/libcuda.so", "stubs/libcuda.so")


# Sections in build order: (flag name, builder). lib/ before stubs/static is irrelevant on
# disk but keeps the code in the order a reader expects.
_SECTIONS: Final = (
    ("with_license", _add_license),
    ("with_bin", _add_bin),
    ("with_include", _add_include),
    ("with_lib", _add_lib),
    ("with_static", _add_static),
    ("with_stubs", _add_stubs),
    ("with_cmake", _add_cmake),
    ("with_pkgconfig", _add_pkgconfig),
    ("with_doc", _add_doc),
    ("with_samples", _add_samples),
    ("with_python", _add_python),
    ("with_host_target", _add_host_target),
    ("with_nsight_compute", _add_nsight_compute),
    ("with_src", _add_src),
    ("with_nvvm", _add_nvvm),
    ("with_lib64", _add_lib64),
    ("with_cross_symlinks", _add_cross_symlinks),
)


def top_dir_name(pname: str, platform: str, version: str, cuda_suffix: str | None = None) -> str:
    """``<pname>-<platform>-<version>[<cuda_suffix>]-archive`` (cuDNN: suffix ``_cuda12``)."""
    return f"{pname}-{platform}-{version}{cuda_suffix or ''}-archive"


def build_redist_tree(
    root: Path,
    *,
    pname: str = "cuda_demo",
    platform: str | None = None,
    version: str = "12.9.79",
    cuda_suffix: str | None = None,
    variant: RedistVariant = DEFAULT_VARIANT,
    **flags: bool | str,
) -> Path:
    """Create ``<root>/<pname>-<platform>-<version>[<cuda_suffix>]-archive/`` and return it.

    ``platform`` defaults from the arch (``linux-x86_64`` / ``linux-sbsa``). ``flags`` override
    fields of ``variant`` (``build_redist_tree(p, with_lib64=False, arch="aarch64")``).
    Directory mtimes are not normalised here; :func:`write_tarball` fixes them.
    """
    variant = dataclasses.replace(variant, **flags)  # type: ignore[arg-type]
    platform = platform or _ARCH_LAYOUT[variant.arch][0]
    top = root / top_dir_name(pname, platform, version, cuda_suffix)
    if top.exists():
        raise BuilderError(f"{top} already exists")
    top.mkdir(parents=True)
    ctx = _Ctx(top=top, variant=variant, version=version, cc=cc_for_arch(variant.arch))
    for flag, section in _SECTIONS:
        if getattr(variant, flag):
            section(ctx)
    return top


# --------------------------------------------------------------------------------------------
# Expected outputs of the default profile
# --------------------------------------------------------------------------------------------

# THE TABLE. Paths are relative to the top directory; first match wins.
# Glob syntax: "**" spans any number of directories (also none), "*" and "?" stay within one
# path component; a pattern without "/" matches the file name at any depth ("*.a" = "**/*.a").
# A symlink is classified by its final target (followed inside the tree); a dangling or
# absolute symlink by its own path. Directories are not listed: they follow their contents.
DEFAULT_RULES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("bin", ("host-*/**", "target-*/**", "host/**", "target/**")),  # nsight trees, kept whole
    ("samples", ("samples/**",)),  # samples keep their .a/.cmake/.pc
    ("python", ("*.whl",)),
    ("stubs", ("lib/stubs/**", "stubs/**")),  # the whole dir, .a stubs too
    ("static", ("*.a",)),  # at any depth, also lib/x64/
    (
        "dev",
        (
            "*.pc",
            "*.cmake",
            "lib/cmake/**",
            "pkg-config/**",
            "pkgconfig/**",
            "lib/pkgconfig/**",
            "share/pkgconfig/**",
        ),
    ),
    ("include", ("include/**",)),
    ("lib", ("lib/**", "lib64/**")),
    ("bin", ("bin/**",)),
    ("doc", ("doc/**", "share/doc/**", "share/man/**", "share/info/**")),
)
FALLBACK_OUTPUT: Final = "out"  # LICENSE, nvvm/, src/, extras/, ...


@functools.cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    if "/" not in pattern:
        pattern = "**/" + pattern  # a bare name matches at any depth
    parts = pattern.split("/")
    regex = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        regex += "".join(
            "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch) for ch in part
        )
        regex += "" if last else "/"
    return re.compile(regex + r"\Z")


def glob_match(pattern: str, rel_path: str) -> bool:
    """Match one DEFAULT_RULES pattern against a member path (top directory stripped)."""
    return _glob_regex(pattern).match(rel_path) is not None


def classify_default(rel_path: str) -> str:
    """The output the default profile gives a regular file at ``rel_path``."""
    for output, patterns in DEFAULT_RULES:
        if any(glob_match(p, rel_path) for p in patterns):
            return output
    return FALLBACK_OUTPUT


def _final_target(top: Path, rel: str) -> str:
    """Follow a symlink chain inside ``top``; the path to classify by."""
    current = rel
    for _ in range(40):
        path = top / current
        if not path.is_symlink():
            return current if path.exists() else rel
        target = os.readlink(path)
        if os.path.isabs(target):
            return rel
        resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
        if resolved.startswith("../") or resolved == "..":
            return rel
        current = resolved
    return rel  # a loop: classify by its own path


def expected_outputs(top_dir: Path) -> dict[str, str]:
    """Member path (top dir stripped) -> expected output, for every non-directory in the tree
    (files, hardlinks, symlinks including directory symlinks)."""
    result: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top_dir):
        base = Path(dirpath)
        names = filenames + [d for d in dirnames if (base / d).is_symlink()]
        for name in names:
            rel = (base / name).relative_to(top_dir).as_posix()
            result[rel] = classify_default(_final_target(top_dir, rel))
    return dict(sorted(result.items()))


# Hand-written for build_redist_tree() with the default variant (x86_64, 12.9.79): an oracle
# independent of the glob code above (test_builders checks both agree).
EXPECTED_DEFAULT: Final[Mapping[str, str]] = {
    "LICENSE": "out",
    "bin/demo": "bin",
    "bin/demo-query": "bin",
    "bin/demo-query-12.9": "bin",  # hardlink
    "bin/demo-run": "bin",
    "bin/demo.profile": "bin",
    "doc/README.txt": "doc",
    "doc/html/index.html": "doc",
    "host-linux-x64/demo-ui.bin": "bin",
    "host-linux-x64/doc/notes.txt": "bin",  # host tree kept whole
    "host-linux-x64/include/host_api.h": "bin",
    "host-linux-x64/libQt6Core.so.6": "bin",
    "host-linux-x64/libhost_helpers.a": "bin",  # host tree beats *.a
    "host-linux-x64/libtarget.so": "bin",  # -> ../target-linux-x64/libtarget.so
    "include/cooperative_groups.h": "include",
    "include/cooperative_groups/details/async.h": "include",
    "include/crt/host_defines.h": "include",
    "include/crt_compat": "include",  # directory symlink -> crt
    "include/cuda_demo.h": "include",
    "lib/cmake/demo/demo-config-version.cmake": "dev",
    "lib/cmake/demo/demo-config.cmake": "dev",
    "lib/libdemo.so": "lib",
    "lib/libdemo.so.12": "lib",
    "lib/libdemo.so.12.9.79": "lib",
    "lib/libdemoBlas.so": "lib",
    "lib/libdemoBlas.so.12": "lib",
    "lib/libdemoBlas.so.12.9.79": "lib",  # DT_RPATH=$ORIGIN, NEEDED libdemo.so.12
    "lib/libdemoRtc.so": "lib",
    "lib/libdemoRtc.so.12": "lib",
    "lib/libdemoRtc.so.12.9.79": "lib",  # DT_RUNPATH=$ORIGIN:
    "lib/libdemo_static.a": "static",
    "lib/stubs/libcuda.so": "stubs",
    "lib/stubs/libcuda_stub_extra.a": "stubs",  # the whole stubs dir, as Nixpkgs
    "lib/x64/libnested.a": "static",
    "lib64/libextra.so": "lib",
    "nvvm/include/nvvm.h": "out",
    "nvvm/lib64/libnvvm.so": "out",
    "nvvm/lib64/libnvvm.so.4": "out",
    "nvvm/lib64/libnvvm.so.4.0.0": "out",
    "pkg-config/cudart-12.9.pc": "dev",
    "pkg-config/demo-12.9.pc": "dev",
    "python/demo-12.9-py3-none-any.whl": "python",
    "samples/vectorAdd/Makefile": "samples",
    "samples/vectorAdd/vectorAdd.cu": "samples",
    "share/man/man1/demo.1": "doc",
    "src/demo_fortran.c": "out",
    "src/demo_fortran.h": "out",
    "target-linux-x64/demo-cli": "bin",
    "target-linux-x64/libtarget.so": "bin",
    "target-linux-x64/libtarget_static.a": "bin",
}


# --------------------------------------------------------------------------------------------
# Tarballs
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def compressed_writer(
    dest: Path, compression: Compression, *, xz_block_size: int = 64 * 1024
) -> Iterator[IO[bytes]]:
    """A binary stream that writes ``dest`` compressed; reproducible (no names/mtimes in
    headers). ``xz`` is one block (python lzma); ``xz-multiblock`` pipes through the system
    ``xz -T2 --block-size`` so the index lists several blocks, like ``xz -T0`` output."""
    with dest.open("wb") as raw:
        if compression == "none":
            yield raw
        elif compression == "gz":
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                yield gz  # type: ignore[misc]
        elif compression == "bz2":
            with bz2.BZ2File(raw, "wb") as bz:
                yield bz
        elif compression == "xz":
            with lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64) as xz:
                yield xz
        elif compression == "zst":
            cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
            with cctx.stream_writer(raw, closefd=False) as zst:
                yield zst
        elif compression == "xz-multiblock":
            with _xz_process(raw, xz_block_size) as stdin:
                yield stdin
        else:
            raise ValueError(f"unknown compression {compression!r}")


@contextlib.contextmanager
def _xz_process(raw: IO[bytes], block_size: int) -> Iterator[IO[bytes]]:
    if shutil.which("xz") is None:
        raise BuilderError("xz-multiblock needs the xz program")
    cmd = ["xz", "-T2", f"--block-size={block_size}", "-6", "-c"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=raw)
    assert proc.stdin is not None
    try:
        yield proc.stdin
    finally:
        proc.stdin.close()
        if proc.wait() != 0:
            raise BuilderError(f"{shlex.join(cmd)} exited {proc.returncode}")


def _tree_entries(top_dir: Path) -> list[Path]:
    """Every path in the tree including top_dir, not descending into directory symlinks."""
    entries = [top_dir]
    for dirpath, dirnames, filenames in os.walk(top_dir):
        base = Path(dirpath)
        entries += [base / n for n in dirnames + filenames]
    return entries


def _sort_key(top_parent: Path, path: Path) -> str:
    # Pure path order with a trailing "/" on directories: what the reference member lists and
    # NVIDIA's tarballs show (each directory right before its contents).
    rel = path.relative_to(top_parent).as_posix()
    return rel + "/" if path.is_dir() and not path.is_symlink() else rel


def _tarinfo(
    path: Path, arcname: str, mtime: int, seen: dict[tuple[int, int], str]
) -> tarfile.TarInfo:
    st = path.lstat()
    info = tarfile.TarInfo(arcname)
    info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "root", "root"
    if path.is_symlink():
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
    elif path.is_dir():
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.mode = 0o755 if st.st_mode & 0o111 else 0o644
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in seen:
            info.type, info.linkname = tarfile.LNKTYPE, seen[key]
        else:
            seen[key] = arcname
            info.size = st.st_size
    return info


def write_tarball(
    top_dir: Path,
    dest: Path,
    compression: Compression = "xz",
    *,
    mtime: int = FIXED_MTIME,
    order: Literal["sorted", "shuffled"] = "sorted",
    seed: int = 0,
    xz_block_size: int = 64 * 1024,
    tar_format: int = tarfile.GNU_FORMAT,
) -> Path:
    """Write ``top_dir`` as a redistributable tarball and return its path.

    ``dest`` is the file to write, or an existing directory (then the file is
    ``<dest>/<top_dir.name><suffix>``). Members: the top directory first, then everything in
    path order (``order="shuffled"`` shuffles all but the top dir with ``seed``, for
    order-robustness tests); symlinks kept as symlinks; files sharing an inode become one
    regular member and tar LNKTYPE members after it; uid/gid 0, fixed mtime, modes 0755/0644.
    """
    if dest.is_dir():
        dest = dest / (top_dir.name + TARBALL_SUFFIX[compression])
    entries = sorted(_tree_entries(top_dir), key=lambda p: _sort_key(top_dir.parent, p))
    if order == "shuffled":
        rest = entries[1:]
        random.Random(seed).shuffle(rest)
        entries = [entries[0], *rest]
    seen: dict[tuple[int, int], str] = {}
    with (
        compressed_writer(dest, compression, xz_block_size=xz_block_size) as stream,
        tarfile.open(fileobj=stream, mode="w|", format=tar_format) as tar,
    ):
        for path in entries:
            info = _tarinfo(path, path.relative_to(top_dir.parent).as_posix(), mtime, seen)
            if info.isreg():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return dest


@contextlib.contextmanager
def open_tarball(path: Path) -> Iterator[tarfile.TarFile]:
    """Open any tarball this module writes for streaming reads (``r|``); tarfile in 3.11 has no
    zstd, so .zst goes through the zstandard module."""
    with path.open("rb") as raw:
        if raw.read(4) == b"\x28\xb5\x2f\xfd":
            raw.seek(0)
            with (
                zstandard.ZstdDecompressor().stream_reader(raw) as plain,
                tarfile.open(fileobj=plain, mode="r|") as tar,
            ):
                yield tar
        else:
            raw.seek(0)
            with tarfile.open(fileobj=raw, mode="r|*") as tar:
                yield tar


def tar_members(path: Path) -> list[tarfile.TarInfo]:
    """All members of a tarball in archive order (content is skipped, not kept)."""
    with open_tarball(path) as tar:
        return list(tar)


def xz_block_count(path: Path) -> int:
    """Number of blocks in an .xz file, from ``xz --list --robot``."""
    proc = subprocess.run(
        ["xz", "--list", "--robot", str(path)], capture_output=True, text=True, check=True
    )
    for line in proc.stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == "totals":
            return int(fields[2])
    raise BuilderError(f"no totals line in xz --list output for {path}")


# --------------------------------------------------------------------------------------------
# Trees from the reference member lists
# --------------------------------------------------------------------------------------------

REFERENCE_DATA_DIR: Final = DATA / "trees"


@dataclasses.dataclass(frozen=True)
class RefEntry:
    """One line of a reference list: ``<type> <path>[ -> <target>]``."""

    type: str
    path: str
    target: str | None = None


def parse_reference_list(list_file: Path) -> list[RefEntry]:
    entries = []
    for line in list_file.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, rest = line.split(" ", 1)
        path, _, target = rest.partition(" -> ")
        entries.append(
            RefEntry(
                kind,
                _fill_placeholders(path.rstrip("/"), kind),
                _fill_placeholders(target, kind) if target else None,
            )
        )
    return entries


def _fill_placeholders(path: str, kind: str) -> str:
    """``<ver>`` -> ``1.0.0``; a whole ``<...>`` component -> a name fitting the type; an
    inline ``<...>`` (``libboost_<...>.so``) -> ``example``."""
    path = path.replace("<ver>", "1.0.0")
    whole = {
        "elf-so": "libexample.so.1",
        "elf-exe": "example",
        "static": "libexample.a",
        "data": "example.dat",
        "header": "example.h",
    }.get(kind, "example.txt")
    parts = [
        whole if part == "<...>" else part.replace("<...>", "example") for part in path.split("/")
    ]
    return "/".join(parts)


@dataclasses.dataclass(frozen=True)
class _ElfFacts:
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None


# From the list comments and redist-and-nix.md §3/§4 (globs against the path below the top
# dir). The libcublas family carries DT_RPATH=$ORIGIN (§3; the list comment says "RUNPATH"
# loosely); the real stub libcuda.so has SONAME libcuda.so.1.
_REFERENCE_ELF_FACTS: Final[tuple[tuple[str, _ElfFacts], ...]] = (
    ("lib/stubs/libcuda.so", _ElfFacts(soname="libcuda.so.1")),
    ("lib/stubs/libnvidia-ml.so", _ElfFacts(soname="libnvidia-ml.so.1")),
    # Stubs carry the runtime SONAME of the library they stand in for.
    ("lib/stubs/libcublas.so", _ElfFacts(soname="libcublas.so.12")),
    ("lib/stubs/libcublasLt.so", _ElfFacts(soname="libcublasLt.so.12")),
    ("lib/libcublas.so.*", _ElfFacts(needed=("libcublasLt.so.12",), rpath="$ORIGIN")),
    ("lib/libcublasLt.so.*", _ElfFacts(rpath="$ORIGIN")),
    ("lib/libnvblas.so.*", _ElfFacts(needed=("libcublas.so.12",), rpath="$ORIGIN")),
    ("*/libqtiff.so", _ElfFacts(needed=("libtiff.so.5",))),
)


def _elf_facts(rel: str, path: str, entries: Sequence[RefEntry]) -> _ElfFacts:
    """Known facts, else SONAME = the symlink pointing straight at the file (the middle link
    of ``libX.so -> libX.so.12 -> libX.so.12.9.79``), else the file name."""
    facts = next((f for pat, f in _REFERENCE_ELF_FACTS if fnmatch.fnmatch(rel, pat)), _ElfFacts())
    if facts.soname is None:
        parent, name = path.rsplit("/", 1)
        direct = [
            e.path.rsplit("/", 1)[1]
            for e in entries
            if e.type == "symlink" and e.target == name and e.path.rsplit("/", 1)[0] == parent
        ]
        facts = dataclasses.replace(facts, soname=min(direct, key=len) if direct else name)
    return facts


def _reference_text(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".pc"):
        stem = name.removesuffix(".pc")
        lib, _, mm = stem.rpartition("-")
        # NVIDIA's nvidia-ml module links the stub: its Libs append /stubs to libdir.
        libs = "-L${libdir}/stubs -lnvidia-ml" if lib == "nvidia-ml" else f"-l{lib}"
        return pkgconfig_text(lib, f"{lib} (test fixture)", mm, "x86_64-linux", libs)
    if name.endswith(".py"):
        return f'"""{name} (test fixture)."""\n'
    if name.endswith((".c", ".h")):
        return f"/* {name} (test fixture) */\n"
    if rel.startswith("bin/"):
        return "#!/bin/sh\nexec true\n"
    return f"{name}: placeholder written by cudasplit's tests\n"


def _materialize(entry: RefEntry, root: Path, entries: Sequence[RefEntry], cc: str) -> None:
    path = root / entry.path
    rel = entry.path.split("/", 1)[1] if "/" in entry.path else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    if entry.type == "dir":
        path.mkdir(exist_ok=True)
    elif entry.type == "symlink":
        path.symlink_to(entry.target or "")
    elif entry.type == "elf-so":
        facts = _elf_facts(rel, entry.path, entries)
        compile_shared(
            path.parent,
            path.name,
            _lib_source("ref"),
            soname=facts.soname,
            needed_libs=list(facts.needed),
            rpath=facts.rpath,
            cc=cc,
        )
    elif entry.type == "elf-exe":
        compile_executable(path.parent, path.name, _exe_source(), cc=cc)
    elif entry.type == "static":
        make_static_archive(path.parent, path.name, [_lib_source("ref_static")], cc=cc)
    elif entry.type == "header":
        path.write_text(f"#pragma once\n/* {path.name} (test fixture) */\n")
    elif entry.type == "data":
        path.write_bytes(bytes(range(256)))
    else:  # text
        content = _reference_text(rel)
        path.write_text(content)
        path.chmod(0o755 if content.startswith("#!") else 0o644)


def tree_from_reference(list_file: Path, root: Path, *, arch: Arch = "x86_64") -> Path:
    """Build the tree a reference member list describes under ``root``; return its top dir.

    ELF entries are small real ELF files (one compile per distinct SONAME/NEEDED/RPATH, then
    copies), ``static`` real ar archives, text/header/data small files, symlinks as listed.
    Placeholders ``<ver>``/``<...>`` get plausible names (see :func:`_fill_placeholders`).
    """
    entries = parse_reference_list(list_file)
    cc = cc_for_arch(arch)
    # Symlinks last, so nothing is created through a link.
    for entry in sorted(entries, key=lambda e: e.type == "symlink"):
        _materialize(entry, root, entries, cc)
    return root / entries[0].path.split("/", 1)[0]


# --------------------------------------------------------------------------------------------
# A large tarball for memory-bound tests
# --------------------------------------------------------------------------------------------

_MIB: Final = 1024 * 1024


class _PoolStream(io.RawIOBase):
    """``head`` then ``size`` bytes cut from a random pool at shifting offsets: cheap to make
    (slices of one buffer), and with a pool larger than the codec's window barely
    compressible. Wrap it in io.BufferedReader: tarfile needs full-sized reads."""

    def __init__(self, head: bytes, pool: bytes, size: int, start: int) -> None:
        self._head, self._pool, self._left = head, pool, size
        self._offset = start % len(pool)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        n = min(len(buffer), self._left, len(self._pool) - self._offset)
        buffer[:n] = self._pool[self._offset : self._offset + n]
        self._left -= n
        # An odd stride after each read so that neighbouring chunks do not line up.
        self._offset = (self._offset + n + 4099) % len(self._pool)
        return n


def _ar_header(name: str, size: int) -> bytes:
    """One GNU ar member header (60 bytes)."""
    return (f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{size:<10}`\n").encode()


def build_large_tarball(
    dest: Path,
    size_mb: int = 300,
    compression: Compression = "zst",
    *,
    members: int = 3,
    pool_mb: int = 16,
    seed: int = 0,
) -> Path:
    """Write a ``libdemo_large-linux-x86_64-12.9.1.4-archive`` tarball of about ``size_mb`` MiB
    (uncompressed) and return its path (``dest`` may be a directory, as for write_tarball).

    ``members`` big static archives (``lib/libdemo_large_<i>_static.a``, real ar framing
    around pseudo-random payload, like libcublasLt_static.a) plus LICENSE, a header and a
    real shared library chain. Content is streamed: the builder holds only the pool
    (``pool_mb`` MiB) in memory. A pool bigger than the codec window (zstd level 3, xz -6:
    8 MiB) makes the data nearly incompressible; a small pool (1) makes it compress well.
    xz at this size takes minutes: prefer zst or none.
    """
    top_name = top_dir_name("libdemo_large", "linux-x86_64", "12.9.1.4")
    if dest.is_dir():
        dest = dest / (top_name + TARBALL_SUFFIX[compression])
    pool = random.Random(seed).randbytes(pool_mb * _MIB)
    with tempfile.TemporaryDirectory(prefix="large-small-") as tmp:
        small = _large_small_members(Path(tmp) / top_name)
        with (
            compressed_writer(dest, compression) as stream,
            tarfile.open(fileobj=stream, mode="w|", format=tarfile.GNU_FORMAT) as tar,
        ):
            seen: dict[tuple[int, int], str] = {}
            for path in sorted(_tree_entries(small), key=lambda p: _sort_key(small.parent, p)):
                info = _tarinfo(path, path.relative_to(small.parent).as_posix(), FIXED_MTIME, seen)
                with path.open("rb") if info.isreg() else contextlib.nullcontext() as f:
                    tar.addfile(info, f)
            _add_large_archives(tar, top_name, pool, size_mb * _MIB, members)
    return dest


def _large_small_members(top: Path) -> Path:
    top.mkdir(parents=True)
    ctx = _Ctx(top=top, variant=DEFAULT_VARIANT, version="12.9.1.4", cc=cc_for_arch("x86_64"))
    _add_license(ctx)
    ctx.text("include/demo_large.h", "#pragma once\n")
    ctx.versioned_chain("lib", "demo_large", "12.9.1.4", _lib_source("demo_large"), rpath="$ORIGIN")
    return top


def _add_large_archives(
    tar: tarfile.TarFile, top_name: str, pool: bytes, total: int, members: int
) -> None:
    per_member = max(total // max(members, 1), 68)
    for i in range(members):
        payload = per_member - 8 - 60
        payload -= payload % 2  # ar pads odd members; keep sizes exact instead
        head = b"!<arch>\n" + _ar_header(f"large_{i}.o", payload)
        info = tarfile.TarInfo(f"{top_name}/lib/libdemo_large_{i}_static.a")
        info.size, info.mtime, info.mode, info.uname, info.gname = (
            len(head) + payload,
            FIXED_MTIME,
            0o644,
            "root",
            "root",
        )
        raw = _PoolStream(head, pool, payload, start=i * 7 * _MIB + i)
        tar.addfile(info, io.BufferedReader(raw, _MIB))
