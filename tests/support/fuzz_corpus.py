"""The seed corpus of the fuzz targets (tests/test_fuzz_targets.py), kept in tests/data/fuzz/.

Regenerate (gcc and gcc-aarch64-linux-gnu needed; the files are our own builds, a few KB
each, no NVIDIA bytes)::

    python -m tests.support.fuzz_corpus

* ``elf/``: small stripped libraries and an executable (x86_64 GNU layout with RUNPATH and
  NEEDED, one without RUNPATH, a PIE executable, an aarch64 library).
* ``tar/``: redist-shaped archives (files, symlink chains, hard links, pax long names, a GNU
  long name, one holding an ELF seed) in every container cudasplit reads: tar, xz, gz, zst.

A fuzz case that finds a bug is added here as a file of its own (``tar/found-*.tar``,
``elf/found-*``) so the replay test keeps it fixed.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tests.support.paths import DATA
from tests.support.tarutil import TOP, compress

CORPUS = DATA / "fuzz"
_SMALL = ("-Wl,-z,max-page-size=0x1000", "-Wl,-z,noseparate-code", "-s")
B_C = "int b_value(void){ return 2; }\n"
A_C = "int b_value(void);\nint a_value(void){ return 40 + b_value(); }\n"
E_C = '#include <stdio.h>\nint main(int c, char **v){ if (c > 1) puts("ok"); return 0; }\n'


def _cc(cc: str, out: Path, source: str, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run([cc, str(src), "-o", str(out), *flags, *_SMALL], check=True,
                   capture_output=True)
    return out


def build_elf(directory: Path) -> dict[str, Path]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        libb = _cc("gcc", work / "libb.so", B_C, "-shared", "-fPIC", "-Wl,-soname,libb.so")
        liba = _cc("gcc", work / "liba.so.1", A_C, "-shared", "-fPIC", f"-L{work}", "-lb",
                   "-Wl,-soname,liba.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN:/usr/lib/old")
        exe = _cc("gcc", work / "tool", E_C, "-pie", "-fPIE")
        arm = _cc("aarch64-linux-gnu-gcc", work / "liba-aarch64.so.1", A_C, "-shared", "-fPIC",
                  "-Wl,-soname,liba.so.1", "-Wl,-rpath,/old/dir")
        directory.mkdir(parents=True, exist_ok=True)
        out = {}
        for path in (libb, liba, exe, arm):
            (directory / path.name).write_bytes(path.read_bytes())
            out[path.name] = directory / path.name
        return out


def _tar(entries: list[tuple[str, str, bytes | str]], fmt: int = tarfile.GNU_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        top = tarfile.TarInfo(TOP)
        top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, 1700000000
        tar.addfile(top)
        for kind, name, extra in entries:
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.mtime = 1700000000
            if kind == "file":
                assert isinstance(extra, bytes)
                info.size, info.mode = len(extra), 0o755 if extra[:4] == b"\x7fELF" else 0o644
                tar.addfile(info, io.BytesIO(extra))
                continue
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            assert isinstance(extra, str)
            info.linkname = extra if kind == "symlink" else f"{TOP}/{extra}"
            info.mode = 0o777 if kind == "symlink" else 0o644
            tar.addfile(info)
    return buf.getvalue()


def build_tar(directory: Path, elf: dict[str, Path]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lib = elf["liba.so.1"].read_bytes()
    plain = _tar([
        ("file", "include/demo.h", b"#define DEMO 1\n"),
        ("file", "lib/libdemo.so.1.2", b"not really elf"),
        ("symlink", "lib/libdemo.so.1", "libdemo.so.1.2"),
        ("symlink", "lib/libdemo.so", "libdemo.so.1"),
        ("hardlink", "lib/libdemo-copy.so", "lib/libdemo.so.1.2"),
        ("file", "pkg-config/demo.pc", b"prefix=/usr\nlibdir=${prefix}/lib\n"),
        ("file", "LICENSE", b"license\n"),
    ])
    with_elf = _tar([("file", "lib/liba.so.1", lib), ("symlink", "lib/liba.so", "liba.so.1"),
                     ("file", "bin/tool", elf["tool"].read_bytes())])
    pax = _tar([("file", "include/" + "n" * 150 + ".h", b"long"),
                ("symlink", "lib/" + "l" * 120, "../include/" + "n" * 150 + ".h")],
               fmt=tarfile.PAX_FORMAT)
    gnu_long = _tar([("file", "doc/" + "d" * 200, b"doc"), ("symlink", "doc/short", "d" * 200)])
    seeds = {"plain": plain, "with-elf": with_elf, "pax-long": pax, "gnu-long": gnu_long}
    for name, data in seeds.items():
        (directory / f"{name}.tar").write_bytes(data)
    for codec, suffix in (("xz", ".tar.xz"), ("gz", ".tar.gz"), ("zst", ".tar.zst")):
        (directory / f"plain{suffix}").write_bytes(compress(plain, codec))
    (directory / "with-elf.tar.zst").write_bytes(compress(with_elf, "zst"))


def main() -> None:
    elf = build_elf(CORPUS / "elf")
    build_tar(CORPUS / "tar", elf)
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file():
            print(f"{path.relative_to(CORPUS)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
