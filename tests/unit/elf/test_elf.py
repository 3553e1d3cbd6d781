"""Read-only ELF queries on files compiled here (x86_64 and, when available, cross targets)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudasplit import Kind
from cudasplit._elf.read import is_elf, kind_from_head, read_elf_info
from cudasplit.errors import ElfError

LIB_C = "char *getenv(const char *);\nint b_value(void){ return getenv(\"NOPE_X\") ? 3 : 2; }\n"
MAIN_C = "#include <stdio.h>\nint main(void){ puts(\"hi\"); return 0; }\n"


def _cc(compiler: str, out: Path, src: str, *flags: str) -> Path | None:
    """Compile `src` to `out`; None when the compiler is absent or cannot link this."""
    if shutil.which(compiler) is None:
        return None
    c = out.with_suffix(".c")
    c.write_text(src)
    done = subprocess.run([compiler, str(c), "-o", str(out), *flags], capture_output=True)
    return out if done.returncode == 0 else None


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | None]:
    d = tmp_path_factory.mktemp("elf")
    return {
        "so": _cc("gcc", d / "libb.so", LIB_C, "-shared", "-fPIC", "-Wl,-soname,libb.so.1",
                  "-Wl,-rpath,$ORIGIN"),
        "so_rpath": _cc("gcc", d / "libr.so", LIB_C, "-shared", "-fPIC",
                        "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN"),
        "pie": _cc("gcc", d / "pie", MAIN_C, "-pie", "-fPIE"),
        "nopie": _cc("gcc", d / "nopie", MAIN_C, "-no-pie"),
        "obj": _cc("gcc", d / "x.o", LIB_C, "-c"),
        "static": _cc("gcc", d / "static", MAIN_C, "-static"),
        "i386": _cc("gcc", d / "lib32.so", LIB_C, "-m32", "-shared", "-fPIC", "-nostdlib"),
        "ppc64be": _cc("powerpc64le-linux-gnu-gcc", d / "libbe.so", LIB_C, "-mbig-endian",
                       "-shared", "-fPIC", "-nostdlib"),
        "aarch64": _cc("aarch64-linux-gnu-gcc", d / "liba64.so", LIB_C, "-shared", "-fPIC"),
    }


def _need(files: dict[str, Path | None], key: str) -> Path:
    path = files[key]
    if path is None:
        pytest.skip(f"cannot build the {key} fixture with the installed compilers")
    return path


def test_is_elf() -> None:
    assert is_elf(b"\x7fELF\x02\x01")
    assert not is_elf(b"#!/bin/sh")
    assert not is_elf(b"")


@pytest.mark.parametrize(
    ("key", "kind"),
    [("so", Kind.ELF_SHARED), ("pie", Kind.ELF_EXEC), ("nopie", Kind.ELF_EXEC),
     ("obj", Kind.ELF_OTHER), ("static", Kind.ELF_EXEC), ("i386", Kind.ELF_SHARED),
     ("ppc64be", Kind.ELF_SHARED)],
)
def test_kind_from_head_and_info_agree(files: dict[str, Path | None], key: str, kind: Kind) -> None:
    path = _need(files, key)
    assert kind_from_head(path.read_bytes()[:4096]) == kind
    info = read_elf_info(path)
    assert info is not None and info.kind == kind


def test_kind_from_head_without_program_headers_uses_e_type(files: dict[str, Path | None]) -> None:
    head = _need(files, "pie").read_bytes()[:64]  # program headers cut off: PIE looks shared
    assert kind_from_head(head) == Kind.ELF_SHARED
    assert kind_from_head(b"hello") is None
    assert kind_from_head(b"\x7fELF") == Kind.ELF_OTHER


def test_shared_object_facts(files: dict[str, Path | None]) -> None:
    info = read_elf_info(_need(files, "so"))
    assert info is not None
    assert (info.elf_class, info.little_endian, info.machine) == (64, True, "EM_X86_64")
    assert info.elf_type == "ET_DYN" and info.has_dynamic and info.interp is None
    assert info.soname == "libb.so.1"
    assert info.runpath == "$ORIGIN" and info.rpath is None
    assert "libc.so.6" in info.needed


def test_rpath_and_executables(files: dict[str, Path | None]) -> None:
    info = read_elf_info(_need(files, "so_rpath"))
    assert info is not None and info.rpath == "$ORIGIN" and info.runpath is None
    pie = read_elf_info(_need(files, "pie"))
    assert pie is not None and pie.interp is not None and pie.interp.startswith("/")
    nopie = read_elf_info(_need(files, "nopie"))
    assert nopie is not None and nopie.elf_type == "ET_EXEC"


def test_objects_and_static_have_no_dynamic(files: dict[str, Path | None]) -> None:
    obj = read_elf_info(_need(files, "obj"))
    assert obj is not None and not obj.has_dynamic and obj.elf_type == "ET_REL"
    if files["static"] is not None:
        static = read_elf_info(files["static"])
        assert static is not None and static.kind == Kind.ELF_EXEC


def test_other_classes_and_byte_orders(files: dict[str, Path | None]) -> None:
    i386 = read_elf_info(_need(files, "i386"))
    assert i386 is not None and (i386.elf_class, i386.machine) == (32, "EM_386")
    be = read_elf_info(_need(files, "ppc64be"))
    assert be is not None and not be.little_endian and be.machine == "EM_PPC64"
    if files["aarch64"] is not None:
        a64 = read_elf_info(files["aarch64"])
        assert a64 is not None and a64.machine == "EM_AARCH64"


def test_not_elf_is_none(tmp_path: Path) -> None:
    text = tmp_path / "script"
    text.write_text("#!/bin/sh\n")
    assert read_elf_info(text) is None


def test_missing_file_is_elf_error(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match="missing"):
        read_elf_info(tmp_path / "missing")


_FIXTURE_OK = [HealthCheck.function_scoped_fixture]


@settings(max_examples=60, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.data())
def test_damaged_files_raise_only_elf_error(
    files: dict[str, Path | None], tmp_path: Path, data: st.DataObject
) -> None:
    blob = bytearray(_need(files, "so").read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        blob = blob[: data.draw(st.integers(0, len(blob) - 1), label="cut")]
    else:
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            pos = data.draw(st.integers(0, min(len(blob), 4096) - 1), label="pos")
            blob[pos] = data.draw(st.integers(0, 255), label="byte")
    target = tmp_path / "damaged.so"
    target.write_bytes(bytes(blob))
    try:
        info = read_elf_info(target)
    except ElfError as exc:
        assert "\n" not in str(exc) and str(target) in str(exc)
    else:
        assert info is None or info.elf_class in (32, 64)
    kind_from_head(bytes(blob[:4096]))  # must never raise


@given(st.binary(max_size=200))
def test_kind_from_head_never_raises(blob: bytes) -> None:
    assert kind_from_head(b"\x7fELF" + blob) in (Kind.ELF_SHARED, Kind.ELF_EXEC, Kind.ELF_OTHER)
