"""Outside Nix, DT_NEEDED names resolve as this machine's loader would resolve them (issue 26):
``ld.so.cache``, then the default directories of the file's architecture."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cudasplit import RunpathPolicy, SplitOptions, split_to_dir
from cudasplit._elf.plan import HostLoader, host_interpreter, read_ld_so_cache
from cudasplit._nix import with_nix_defaults
from cudasplit._release.ldd import view
from tests.support.builders import compile_shared
from tests.support.tarutil import write_archive

HOST = HostLoader()
HOST_NAME = next((n for n in ("libstdc++.so.6", "libz.so.1", "libgcc_s.so.1")
                  if HOST.find(n, 64, "EM_X86_64")), None)
needs_host = pytest.mark.skipif(HOST_NAME is None or host_interpreter("EM_X86_64") is None,
                                reason="no x86_64 host libraries here")


def _cache_file(path: Path, entries: list[tuple[str, str]]) -> Path:
    """A glibc ``ld.so.cache`` in the new format (strings follow the entries)."""
    header = struct.Struct("=II B3x I 12x")
    entry = struct.Struct("=iIIIQ")
    base = 20 + header.size + entry.size * len(entries)
    strings, rows = b"", b""
    for name, target in entries:
        key = base + len(strings)
        strings += name.encode() + b"\0"
        value = base + len(strings)
        strings += target.encode() + b"\0"
        rows += entry.pack(0x0303, key, value, 0, 0)
    path.write_bytes(b"glibc-ld.so.cache1.1" + header.pack(len(entries), len(strings), 0, 0)
                     + rows + strings)
    return path


def test_reads_the_new_cache_format(tmp_path: Path) -> None:
    cache = _cache_file(tmp_path / "ld.so.cache", [("libz.so.1", "/x/libz.so.1"),
                                                    ("libz.so.1", "/y/libz.so.1"),
                                                    ("libm.so.6", "/x/libm.so.6")])
    assert read_ld_so_cache(str(cache)) == {"libz.so.1": ("/x/libz.so.1", "/y/libz.so.1"),
                                            "libm.so.6": ("/x/libm.so.6",)}
    (tmp_path / "junk").write_bytes(b"glibc-ld.so.cache1.1\xff")
    assert read_ld_so_cache(str(tmp_path / "junk")) == {}
    assert read_ld_so_cache(str(tmp_path / "missing")) == {}


def test_a_cache_entry_of_another_architecture_is_skipped(tmp_path: Path) -> None:
    lib = compile_shared(tmp_path, "libfake.so.1", "int f(void){return 0;}",
                         soname="libfake.so.1")
    loader = HostLoader(cache={"libfake.so.1": (str(lib),)})
    assert loader.find("libfake.so.1", 64, "EM_X86_64") == str(lib)
    assert loader.find("libfake.so.1", 64, "EM_AARCH64") is None
    assert loader.find("libfake.so.1", 32, "EM_X86_64") is None


def _split_warnings(tmp_path: Path, policy: RunpathPolicy) -> list[str]:
    lib = compile_shared(tmp_path, "libuser.so.1", "int f(void){return 0;}",
                         soname="libuser.so.1", needed_libs=[HOST_NAME or "", "libnowhere.so.7"])
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libuser.so.1",
                                                     lib.read_bytes())])
    out = tmp_path / f"out-{policy.host_loader}"
    report = split_to_dir(archive, out, SplitOptions(runpath=policy))
    return [w.message for w in report.warnings if w.code == "needed-unresolved"]


@needs_host
def test_plain_split_warns_only_for_what_the_host_loader_lacks(tmp_path: Path) -> None:
    assert _split_warnings(tmp_path, RunpathPolicy()) == [
        "DT_NEEDED libnowhere.so.7 resolve nowhere (add their directory to library_paths, "
        "or accept them in ignore_missing)"]  # the library names its parameters


@needs_host
def test_nix_mode_ignores_the_host(tmp_path: Path) -> None:
    assert with_nix_defaults(RunpathPolicy(), {}).host_loader is False
    (warning,) = _split_warnings(tmp_path, RunpathPolicy(host_loader=False))
    assert HOST_NAME in warning and "libnowhere.so.7" in warning


@needs_host
def test_ldd_of_a_library_takes_the_host_loaders_view(tmp_path: Path) -> None:
    lib = compile_shared(tmp_path, "libuser.so.1", "int f(void){return 0;}",
                         soname="libuser.so.1", needed_libs=["libc.so.6", HOST_NAME or ""])
    one = view(lib)
    assert one is not None and one.interpreter == host_interpreter("EM_X86_64")
    found = {r.name: r for r in one.needed}
    assert found["libc.so.6"].path is not None and found["libc.so.6"].via == "glibc"
    assert found[HOST_NAME or ""].path is not None and not one.flags


def test_real_nvcc_13_split_warns_nothing_the_host_provides(tmp_path: Path) -> None:
    """The issue's case on real bytes: nvcc 13's ELF files need libstdc++, libgcc_s, libm,
    libz...; on a machine that has them, a plain split warns about none of them."""
    from tests.support.wheeltrees import WHEELS_13, redist_tarball

    tarball = redist_tarball("cuda_nvcc", WHEELS_13["cuda_nvcc"])
    plain = split_to_dir(tarball, tmp_path / "plain", SplitOptions(dry_run=True))
    warned = [w.message for w in plain.warnings if w.code == "needed-unresolved"]
    nix_like = split_to_dir(tarball, tmp_path / "nix", SplitOptions(
        dry_run=True, runpath=RunpathPolicy(host_loader=False)))
    in_nix = " ".join(w.message for w in nix_like.warnings if w.code == "needed-unresolved")
    host_names = [n for n in ("libstdc++.so.6", "libgcc_s.so.1", "libz.so.1") if n in in_nix]
    if not host_names or not all(HOST.find(n, 64, "EM_X86_64") for n in host_names):
        pytest.skip("this machine lacks the libraries nvcc needs")
    assert not any(n in " ".join(warned) for n in host_names), warned
