"""cuda_crt's header edits (Nixpkgs cuda_crt/package.nix's postInstall: glibc >= 2.42
``noexcept``, clang ``__noinline__``) as text_edits, each at its CUDA versions only; and a
``--rules`` file that adds multi-line edits of its own on top of them.

The fixture headers hold just the lines the edits look for; that those lines are NVIDIA's is
tests/realbytes/test_real_crt_edits.py's job."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudasplit import PackageId, SplitOptions, split_to_dir
from cudasplit._rulebook import Where, load_ruleset
from tests.support.tarutil import write_archive

MATH_H = """\
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ double                 rsqrt(double x);
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ float                  rsqrtf(float x);
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ double                 sinpi(double x);
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ float                  sinpif(float x);
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ double                 cospi(double x);
extern __DEVICE_FUNCTIONS_DECL__ __cudart_builtin__ float                  cospif(float x);
"""
MATH_HPP = """\
__func__(double rsqrt(const double a))
__func__(float rsqrtf(const float a))
__func__(double sinpi(double a))
__func__(float sinpif(const float a))
__func__(double cospi(double a))
__func__(float cospif(const float a))
"""
HOST_DEFINES = "#if defined(__CUDACC__) || defined(__CUDA_ARCH__) || defined(__CUDA_LIBDEVICE__)\n"
HEADERS = {"math_functions.h": MATH_H, "math_functions.hpp": MATH_HPP,
           "host_defines.h": HOST_DEFINES}


def _split(tmp_path: Path, version: str, *, nvcc: bool = False, glibc: str | None = "2.42",
           rules: Path | None = None, extra: dict[str, str] | None = None,
           ) -> tuple[dict[str, str], list[str]]:
    pname = "cuda_nvcc" if nvcc else "cuda_crt"
    top = f"{pname}-linux-x86_64-{version}-archive"
    headers = {name: text + (extra or {}).get(name, "") for name, text in HEADERS.items()}
    entries = [("file", f"include/crt/{name}", text.encode()) for name, text in headers.items()]
    if nvcc:
        entries.append(("file", "bin/nvcc", b"#!/bin/sh\n"))
    archive = write_archive(tmp_path / "crt.tar.xz", entries, top=top)
    package = PackageId("cuda_crt", "linux-x86_64", version) if nvcc else None
    report = split_to_dir(archive, tmp_path / "split", SplitOptions(
        patch=False, package=package, glibc_version=glibc,
        rules_files=(str(rules),) if rules else ()))
    crt = tmp_path / "split/out/include/crt"
    assert not (tmp_path / "split/out/bin").exists()
    return ({name: (crt / name).read_text() for name in headers},
            [f"{p.code} {p.path}" for p in report.problems])


def test_cuda_12_from_the_nvcc_archive_gets_every_postinstall_edit(tmp_path: Path) -> None:
    got, problems = _split(tmp_path, "12.8.93", nvcc=True)
    assert problems == []
    for fn, type_ in (("rsqrt", "double"), ("rsqrtf", "float"), ("sinpi", "double"),
                      ("cospif", "float")):
        assert f"{fn}({type_} x) noexcept (true);" in got["math_functions.h"]
    assert "__func__(double sinpi(double a) throw())" in got["math_functions.hpp"]
    assert "__func__(float rsqrtf(const float a) throw())" in got["math_functions.hpp"]
    assert got["host_defines.h"] == ("#if (defined(__CUDACC__) || defined(__CUDA_ARCH__) || "
                                     "defined(__CUDA_LIBDEVICE__)) && !defined(__clang__)\n")


def test_cuda_12_nvcc_gets_the_same_edits_in_its_own_crt(tmp_path: Path) -> None:
    """Nixpkgs links nvcc's include/crt to cuda_crt's; here nvcc's copy takes cuda_crt's edits
    (``text_edits_from``), the CUDA 12 ones only."""
    archive = write_archive(tmp_path / "nvcc.tar.xz", [
        ("file", "bin/nvcc", b"#!/bin/sh\n"),
        *(("file", f"include/crt/{name}", text.encode()) for name, text in HEADERS.items())],
        top="cuda_nvcc-linux-x86_64-12.8.93-archive")
    report = split_to_dir(archive, tmp_path / "split", SplitOptions(patch=False,
                                                                    glibc_version="2.42"))
    assert [p.code for p in report.problems] == []
    crt = tmp_path / "split/out/include/crt"
    assert "!defined(__clang__)" in (crt / "host_defines.h").read_text()
    assert "cospif(float x) noexcept (true);" in (crt / "math_functions.h").read_text()
    assert (tmp_path / "split/out/bin/nvcc").is_file()


def test_cuda_13_nvcc_takes_none_of_the_crt_edits() -> None:
    edits = load_ruleset("cuda_nvcc").package.text_edits
    assert edits and not any(e.gate.applies(Where(cuda_version="13.0")) for e in edits)
    assert all(e.gate.cuda_before == "13.0" for e in edits)


@pytest.mark.parametrize("glibc", [None, "2.41"])
def test_noexcept_edits_need_glibc_2_42(tmp_path: Path, glibc: str | None) -> None:
    """Against an older glibc the added specifications clash with math_functions.h's own
    later declarations (nvcc 13.0 with glibc 2.36: "different exception specifier")."""
    got, problems = _split(tmp_path, "12.8.93", nvcc=True, glibc=glibc)
    assert problems == []
    assert got["math_functions.h"] == MATH_H and got["math_functions.hpp"] == MATH_HPP
    assert "!defined(__clang__)" in got["host_defines.h"]


def test_cuda_13_1_only_rsqrt(tmp_path: Path) -> None:
    got, problems = _split(tmp_path, "13.1.115")
    assert problems == []
    assert "rsqrt(double x) noexcept (true);" in got["math_functions.h"]
    assert "sinpi(double x);" in got["math_functions.h"]  # fixed by NVIDIA in 13.0
    assert "__func__(double sinpi(double a))\n" in got["math_functions.hpp"]
    assert got["host_defines.h"] == HOST_DEFINES


def test_cuda_13_2_keeps_every_header(tmp_path: Path) -> None:
    got, problems = _split(tmp_path, "13.2.78")
    assert problems == []
    assert got == HEADERS


USER_RULES = """\
schema = 1

[package]
# The shipped cuda_crt edits too: this file's text_edits replace the package file's.
text_edits_from = [{ package = "cuda_crt" }]

[[package.text_edits]]
description = "two lines become three (a user's patch)"
files = ["include/crt/host_defines.h"]
cuda_since = "12.8"
cuda_before = "12.9"
replace = [['''
#if defined(__CUDACC__) || defined(__CUDA_ARCH__) || defined(__CUDA_LIBDEVICE__)
#define MARK 1''', '''
#if defined(__CUDACC__) || defined(__CUDA_ARCH__) || defined(__CUDA_LIBDEVICE__)
#define MARK 2
#define MORE 3''']]

[[package.text_edits]]
description = "only on glibc >= 2.42"
files = ["include/crt/math_functions.hpp"]
glibc_since = "2.42"
replace = [['''/* a */
/* b */''', '/* a and b */']]
"""


@pytest.mark.parametrize(("version", "glibc"), [("12.8.93", "2.42"), ("12.8.93", None),
                                                ("12.9.86", "2.42")])
def test_a_rules_file_adds_multi_line_edits_before_the_shipped_ones(
        tmp_path: Path, version: str, glibc: str | None) -> None:
    """A ``--rules`` file with its own multi-line ``text_edits`` (gated like the shipped ones)
    plus ``text_edits_from = [{package = "cuda_crt"}]``: its edits run first, then cuda_crt's;
    an edit that does not apply leaves its text alone."""
    rules = tmp_path / "mine.toml"
    rules.write_text(USER_RULES)
    got, problems = _split(tmp_path, version, glibc=glibc, rules=rules, extra={
        "host_defines.h": "#define MARK 1\n", "math_functions.hpp": "/* a */\n/* b */\n"})
    assert problems == []
    clang = ("#if (defined(__CUDACC__) || defined(__CUDA_ARCH__) || "
             "defined(__CUDA_LIBDEVICE__)) && !defined(__clang__)\n")
    mine = "#define MARK 2\n#define MORE 3\n" if version.startswith("12.8") else "#define MARK 1\n"
    # The user's edit keeps the #if line, which the shipped __noinline__ edit then changes.
    assert got["host_defines.h"] == clang + mine
    hpp = got["math_functions.hpp"]
    assert hpp.endswith("\n/* a and b */\n" if glibc == "2.42" else "\n/* a */\n/* b */\n")
    assert ("__func__(double rsqrt(const double a) throw())" in hpp) == (glibc == "2.42")
