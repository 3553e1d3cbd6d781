"""dlopen targets: found in read-only data, reported per file, and the version-gated rule key."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._elf.read import DlopenTarget, read_elf_info, scan_dlopen
from cudasplit._rulebook import DlopenNeed, parse_dlopen_key
from cudasplit.errors import RulesError
from tests.support.builders import compile_shared
from tests.support.realwheels import cu12
from tests.support.tarutil import write_archive

SOURCE = r"""
#include <dlfcn.h>
#include <stdio.h>
static const char *const names[] = {"libnvrtc.so.%s", "libnvJitLink.so.12", "libcuda.so.1",
                                    "libm.so.6", "libself.so.1"};
int load(int i, const char *v) { char b[64]; snprintf(b, sizeof b, names[i], v);
                                 return dlopen(b, RTLD_NOW) != 0; }
"""


@pytest.fixture(scope="module")
def opener(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_shared(tmp_path_factory.mktemp("dl"), "libself.so.1", SOURCE,
                          soname="libself.so.1", needed_libs=["libdemo-needed.so.2"])


def test_rodata_names_with_their_providers(opener: Path) -> None:
    info = read_elf_info(opener)
    assert info is not None
    assert scan_dlopen(opener, info) == (
        DlopenTarget("libcuda.so.1", "driver"),
        DlopenTarget("libnvJitLink.so.12", "libnvjitlink"),
        DlopenTarget("libnvrtc.so.%s", "cuda_nvrtc"),
    )  # not glibc, not its own SONAME, not its DT_NEEDED


def test_stripped_section_headers_fall_back_to_readonly_segments(opener: Path,
                                                                 tmp_path: Path) -> None:
    data = bytearray(opener.read_bytes())
    data[0x28:0x30] = bytes(8)  # e_shoff = 0: no section headers
    data[0x3C:0x40] = bytes(4)  # e_shnum = e_shstrndx = 0
    copy = tmp_path / "noshdr.so"
    copy.write_bytes(bytes(data))
    info = read_elf_info(copy)
    assert info is not None
    assert {t.name for t in scan_dlopen(copy, info)} >= {"libnvrtc.so.%s", "libcuda.so.1"}


def test_dry_and_real_runs_report_dlopen_targets(opener: Path, tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libself.so.1",
                                                     opener.read_bytes())])
    real = split_to_dir(archive, tmp_path / "o", SplitOptions())
    dry = split_to_dir(archive, tmp_path / "o", SplitOptions(dry_run=True))
    expected = [{"name": "libcuda.so.1", "package": "driver"},
                {"name": "libnvJitLink.so.12", "package": "libnvjitlink"},
                {"name": "libnvrtc.so.%s", "package": "cuda_nvrtc"}]
    assert real.member("lib/libself.so.1").dlopen == expected
    assert dry.member("lib/libself.so.1").dlopen == expected


@pytest.mark.parametrize(("need", "version", "applies"), [
    (DlopenNeed("cuda_nvrtc"), "12.0.1", True),
    (DlopenNeed("cuda_nvrtc", since="12.8"), "12.9.1.4", True),
    (DlopenNeed("cuda_nvrtc", since="12.8"), "12.6.4.1", False),
    (DlopenNeed("cuda_nvrtc", since="12.8", before="13"), "13.0.0", False),
    (DlopenNeed("cuda_nvrtc", since="12.8"), None, True),
])
def test_version_gate(need: DlopenNeed, version: str | None, applies: bool) -> None:
    assert need.applies_to(version) is applies


@pytest.mark.parametrize("value", ["cuda_nvrtc", [{"pkg": "x"}], [{"package": "x", "since": 12}],
                                   [{"package": "x", "since": "new"}]])
def test_bad_key_is_a_rules_error(value: object) -> None:
    with pytest.raises(RulesError):
        parse_dlopen_key(value, "[package] dlopen")


def test_rule_key_adds_the_provider_lib_dir_version_gated(opener: Path, tmp_path: Path) -> None:
    rules = tmp_path / "extra.toml"
    rules.write_text('schema = 1\n[package]\ndlopen = [{ package = "cuda_nvrtc", since = "12.8" },'
                     ' { package = "libnvjitlink", before = "12.0" }]\n')
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libself.so.1",
                                                     opener.read_bytes())])
    options = SplitOptions(rules_files=(str(rules),), dry_run=True,
                           package_roots=(("cuda_nvrtc", "/nix/store/n-cuda_nvrtc"),
                                          ("libnvjitlink", "/nix/store/j-libnvjitlink")))
    report = split_to_dir(archive, tmp_path / "o", options)  # version 12.9.79 (tarutil.TOP)
    entries = (report.member("lib/libself.so.1").runpath_after or "").split(":")
    assert "/nix/store/n-cuda_nvrtc/lib" in entries
    assert "/nix/store/j-libnvjitlink/lib" not in entries
    missing = split_to_dir(archive, tmp_path / "o", SplitOptions(rules_files=(str(rules),),
                                                                 dry_run=True))
    assert any(w.code == "package-root-missing" and "cuda_nvrtc" in w.message
               for w in missing.warnings)


@pytest.mark.parametrize(("wheel", "path", "wanted"), [
    ("nvidia-cufft-cu12", "nvidia/cufft/lib/libcufft.so.11",
     {"libnvrtc.so.12": "cuda_nvrtc", "libnvJitLink.so.12": "libnvjitlink"}),
    ("nvidia-cublas-cu12", "nvidia/cublas/lib/libcublasLt.so.12",
     {"libnvrtc.so.12": "cuda_nvrtc", "libcuda.so.1": "driver"}),
])
def test_real_nvidia_libraries(wheel: str, path: str, wanted: dict[str, str]) -> None:
    library = cu12(wheel) / path
    info = read_elf_info(library)
    assert info is not None
    start = time.perf_counter()
    found = {t.name: t.package for t in scan_dlopen(library, info)}
    elapsed = time.perf_counter() - start
    assert wanted.items() <= found.items()
    # Bounded: only .rodata/.lrodata are read (libcublasLt: ~57 of 749 MB).
    assert elapsed < 5, f"{elapsed:.2f} s for {os.path.getsize(library) >> 20} MiB"


def test_damaged_section_headers_do_not_stop_patching(opener: Path, tmp_path: Path) -> None:
    data = bytearray(opener.read_bytes())
    data[0x28:0x30] = (len(data) - 8).to_bytes(8, "little")  # e_shoff near the end: lies
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libself.so.1", bytes(data))])
    report = split_to_dir(archive, tmp_path / "o", SplitOptions())
    record = report.member("lib/libself.so.1")
    assert record.patch in ("in-place", "append") and not report.problems
