"""A linker matrix: one library and one executable per (arch, linker, flag set), in a tarball.

Debian's four linkers (bfd, gold, lld, mold) lay a file out differently: lld pads
``PT_GNU_RELRO`` to the page end and puts RELRO and ``.data`` in separate RW ``PT_LOAD``s; lld
and mold give ``.tbss`` no room in any ``PT_LOAD``; ``-z separate-code`` adds a segment; 64 KiB
pages, RELR relocations and the hash style change the rest. Every file here has thread-local
data (``.tdata`` and ``.tbss``), a RELRO table of relative relocations, and debug info (so
``strip --strip-debug`` has something to remove).

:func:`build_matrix` links every combination a tool can do (the rest are listed with the
reason) from two objects compiled once per arch, and writes them as a redist-shaped tarball
(``lib/libm_<linker>_<flags>.so.1``, ``bin/m_<linker>_<flags>``) plus a ``probe`` program that
``dlopen``s a library and calls it. :func:`run_target` runs a program natively or under
``qemu-aarch64 -L /usr/aarch64-linux-gnu``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.tarutil import write_archive

LINKERS = ("bfd", "gold", "lld", "mold")
ARCHES = ("x86_64", "aarch64")
QEMU_PREFIX = "/usr/aarch64-linux-gnu"
EXPECTED = 11  # what lm_get() returns: t_init 7 + t_zero 1 + table[2] 3

LIB_C = r"""
__thread int t_init = 7;
__thread int t_zero;
static int values[4] = {1, 2, 3, 4};
int *const table[4] = {&values[0], &values[1], &values[2], &values[3]};  /* RELRO, relative */
int lm_get(void) { t_zero += 1; return t_init + t_zero + *table[2]; }
"""
EXE_C = r"""
#include <stdio.h>
#include <string.h>
int lm_get(void);
__thread int e_tls;
__thread int e_init = 5;
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("matrix 1.0"); return 0; }
    e_tls = lm_get() + e_init;
    printf("%d\n", e_tls - e_init);
    return e_tls == 16 ? 0 : 1;
}
"""
PROBE_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    int (*get)(void) = (int (*)(void))dlsym(h, "lm_get");
    if (!get) { fprintf(stderr, "%s\n", dlerror()); return 3; }
    printf("%d\n", get());
    return 0;
}
"""


def _flag_sets(linker: str) -> dict[str, tuple[str, ...] | str]:
    """Flag set name -> linker flags, or the reason the linker cannot do it."""
    relr: tuple[str, ...] | str = {
        "lld": ("--pack-dyn-relocs=relr",),
        "bfd": ("-z", "pack-relative-relocs"),
        "mold": ("-z", "pack-relative-relocs"),
    }.get(linker, f"{linker} has no RELR relocations")
    sep: tuple[str, ...] | str = ("-z", "separate-code", "-z", "relro", "-z", "now") \
        if linker != "gold" else "gold has no -z separate-code"
    return {
        "relro-now": ("-z", "relro", "-z", "now"),
        "norelro-lazy": ("-z", "norelro", "-z", "lazy"),
        "relro-lazy": ("-z", "relro", "-z", "lazy"),
        "separate-code": sep,
        "page64k": ("-z", "max-page-size=65536", "-z", "relro", "-z", "now"),
        "relr": relr,
        "hash-both": ("--hash-style=both", "-z", "relro"),
        "nopie": ("-z", "relro", "-z", "now"),  # the executable is ET_EXEC (-no-pie)
    }


def compiler(arch: str) -> str | None:
    """The C compiler for `arch` here, or None."""
    if arch == platform.machine():
        return "gcc"
    cross = f"{arch}-linux-gnu-gcc"
    return cross if shutil.which(cross) else None


def runner(arch: str) -> list[str] | None:
    """The prefix that runs an `arch` program here ([] natively), or None when it cannot."""
    if arch == platform.machine():
        return []
    qemu = shutil.which(f"qemu-{arch}")
    return [qemu, "-L", QEMU_PREFIX] if qemu and os.path.isdir(QEMU_PREFIX) else None


def strip_tool(arch: str) -> str:
    return "strip" if arch == platform.machine() else f"{arch}-linux-gnu-strip"


def system_loader(arch: str) -> Path:
    if arch == "x86_64":
        return Path("/lib64/ld-linux-x86-64.so.2")
    return Path(QEMU_PREFIX if arch != platform.machine() else "/") / "lib/ld-linux-aarch64.so.1"


@dataclass
class Matrix:
    """What :func:`build_matrix` made for one arch."""

    arch: str
    tarball: Path
    probe: Path
    loader: Path  # a copy of the system loader at a long Nix-store-like path
    build: Path  # the files as linked
    libs: dict[str, str] = field(default_factory=dict)   # combo id -> member path
    exes: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # combo id -> why


def _cc(cc: str, linker: str, tools: Path, *args: str) -> subprocess.CompletedProcess[str]:
    use = [] if linker == "bfd" else [f"-fuse-ld={linker}"]
    if linker in ("lld", "mold"):
        use.append(f"-B{tools}")  # a cross gcc looks for <triple>-ld.lld; this dir has ld.lld
    return subprocess.run([cc, *use, *args], capture_output=True, text=True, check=False)


def _tools_dir(root: Path) -> Path:
    tools = root / "ldtools"
    tools.mkdir(exist_ok=True)
    for name, target in (("ld.lld", "ld.lld"), ("ld.mold", "mold")):
        found = shutil.which(target)
        if found and not (tools / name).exists():
            (tools / name).symlink_to(found)
    return tools


def build_matrix(arch: str, root: Path) -> Matrix:
    """Compile once, link every combination, write the tarball (see the module docstring)."""
    cc = compiler(arch)
    if cc is None:
        raise RuntimeError(f"no C compiler for {arch}")
    root.mkdir(parents=True, exist_ok=True)
    tools = _tools_dir(root)
    for name, text in (("lib.c", LIB_C), ("exe.c", EXE_C), ("probe.c", PROBE_C)):
        (root / name).write_text(text)
    _ok(subprocess.run([cc, "-g", "-O1", "-fPIC", "-c", "-o", str(root / "lib.o"),
                        str(root / "lib.c")], capture_output=True, text=True, check=False))
    _ok(subprocess.run([cc, "-g", "-O1", "-fPIE", "-c", "-o", str(root / "exe.o"),
                        str(root / "exe.c")], capture_output=True, text=True, check=False))
    probe = root / "probe"
    _ok(subprocess.run([cc, "-o", str(probe), str(root / "probe.c"), "-ldl"],
                       capture_output=True, text=True, check=False))
    loader = root / "nix" / "store" / ("0" * 32 + "-glibc-2.40-66") / "lib" / \
        system_loader(arch).name
    loader.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(system_loader(arch), loader)
    top = f"cuda_matrix-linux-{'sbsa' if arch == 'aarch64' else arch}-12.9.79-archive"
    build = root / "build"
    matrix = Matrix(arch, root / f"{top}.tar.xz", probe, loader, build)
    entries: list[tuple[str, ...] | tuple[str, str, bytes]] = []
    build.mkdir(exist_ok=True)
    for linker in LINKERS:
        for flags_name, flags in _flag_sets(linker).items():
            combo = f"{linker}-{flags_name}"
            if isinstance(flags, str):
                matrix.skipped[combo] = flags
                continue
            soname = f"libm_{linker}_{flags_name.replace('-', '_')}.so.1"
            lib, exe = build / soname, build / f"m_{linker}_{flags_name.replace('-', '_')}"
            wl = [f"-Wl,{','.join(flags)}"]
            done = _cc(cc, linker, tools, "-shared", "-o", str(lib), str(root / "lib.o"),
                       f"-Wl,-soname,{soname}", *wl)
            if done.returncode == 0:
                pie = "-no-pie" if flags_name == "nopie" else "-pie"
                done = _cc(cc, linker, tools, pie, "-o", str(exe), str(root / "exe.o"),
                           str(lib), *wl)
            if done.returncode != 0:
                matrix.skipped[combo] = f"{linker} cannot link {flags_name} for {arch}: " + \
                    (done.stderr.strip().splitlines() or ["?"])[-1]
                continue
            matrix.libs[combo] = f"lib/{soname}"
            matrix.exes[combo] = f"bin/{exe.name}"
            entries.append(("file", f"lib/{soname}", lib.read_bytes()))
            entries.append(("file", f"bin/{exe.name}", exe.read_bytes()))
    write_archive(matrix.tarball, entries, top=top)
    return matrix


def _ok(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{done.args} failed: {done.stderr}")


def run_target(arch: str, argv: list[str], timeout: float = 60,
               libdir: str | None = None) -> tuple[int, str]:
    """(exit status, stdout + stderr) of an `arch` program, under qemu when foreign;
    ``libdir``: the program's LD_LIBRARY_PATH."""
    prefix = runner(arch)
    if prefix is None:
        return -1, f"cannot run {arch} programs here"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    if libdir is not None and prefix:
        prefix = [*prefix, "-E", f"LD_LIBRARY_PATH={libdir}"]
    elif libdir is not None:
        env["LD_LIBRARY_PATH"] = libdir
    try:
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=timeout,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        return -2, "timed out"
    return done.returncode, (done.stdout + done.stderr).strip()
