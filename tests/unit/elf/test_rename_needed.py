"""DT_NEEDED renames: the patcher primitive and the package rule that uses it (nsight)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._elf.patch import rename_needed
from cudasplit._rulebook import build_ruleset
from cudasplit.errors import RulesError
from tests.support.builders import compile_shared, dynamic_entries


def qtiff(directory: Path, needed: str = "libtiff.so.5") -> Path:
    return compile_shared(directory, "libqtiff.so", "int qtiff(void) { return 1; }",
                          needed_libs=(needed, "libc.so.6"))


def test_rename_in_place_and_read_back(tmp_path: Path) -> None:
    lib = qtiff(tmp_path)
    size = lib.stat().st_size
    assert rename_needed(lib, "libtiff.so.5", "libtiff.so") is True
    assert dynamic_entries(lib)["NEEDED"][0] == "libtiff.so"
    assert "libtiff.so.5" not in dynamic_entries(lib)["NEEDED"]
    assert lib.stat().st_size == size
    assert rename_needed(lib, "libtiff.so.5", "libtiff.so") is False  # nothing left to do


def test_longer_name_goes_through_append_and_loads(tmp_path: Path) -> None:
    """A longer name cannot overwrite the old one: the append tier adds it (patchelf does too)."""
    tiff = compile_shared(tmp_path / "t", "libtiff.so.5.8.0", "int tiff(void) { return 2; }",
                          soname="libtiff.so.5.8.0")
    lib = qtiff(tmp_path)
    size = lib.stat().st_size
    assert rename_needed(lib, "libtiff.so.5", "libtiff.so.5.8.0") is True
    assert dynamic_entries(lib)["NEEDED"][0] == "libtiff.so.5.8.0"
    assert lib.stat().st_size > size
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}); print('ok')"
    run = subprocess.run(["python3", "-c", code], capture_output=True, text=True, check=False,
                         env={"LD_LIBRARY_PATH": str(tiff.parent), "PATH": "/usr/bin:/bin"})
    assert run.stdout.strip() == "ok", run.stderr


def test_bad_names_are_refused_and_file_untouched(tmp_path: Path) -> None:
    lib = qtiff(tmp_path)
    before = lib.read_bytes()
    with pytest.raises(ValueError):
        rename_needed(lib, "libtiff.so.5", "a\0b")
    with pytest.raises(ValueError):
        rename_needed(lib, "libtiff.so.5", "")
    assert lib.read_bytes() == before


def test_renamed_library_loads_the_new_name(tmp_path: Path) -> None:
    tiff = compile_shared(tmp_path, "libtiff.so", "int tiff(void) { return 2; }",
                          soname="libtiff.so")
    lib = qtiff(tmp_path)
    rename_needed(lib, "libtiff.so.5", "libtiff.so")
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}); print('ok')"
    run = subprocess.run(["python3", "-c", code], capture_output=True, text=True, check=False,
                         env={"LD_LIBRARY_PATH": str(tiff.parent), "PATH": "/usr/bin:/bin"})
    assert run.stdout.strip() == "ok", run.stderr


def test_package_rule_renames_during_split(tmp_path: Path) -> None:
    top = tmp_path / "nsight_systems-linux-x86_64-2025.1.3.140-archive"
    plugin = top / "host-linux-x64" / "Plugins" / "imageformats"
    plugin.mkdir(parents=True)
    qtiff(plugin)
    report = split_to_dir(top, tmp_path / "o", SplitOptions())
    record = report.member("host-linux-x64/Plugins/imageformats/libqtiff.so")
    assert record.note == "DT_NEEDED renamed: libtiff.so.5 -> libtiff.so"
    placed = tmp_path / "o/out/host-linux-x64/Plugins/imageformats/libqtiff.so"
    assert "libtiff.so" in dynamic_entries(placed)["NEEDED"]
    assert record.needed_unresolved == ["libtiff.so"]  # the plan sees the new name
    planned = split_to_dir(top, tmp_path / "dry", SplitOptions(dry_run=True))
    dry = planned.member("host-linux-x64/Plugins/imageformats/libqtiff.so")
    assert dry.note == "DT_NEEDED would be renamed: libtiff.so.5 -> libtiff.so"


@pytest.mark.parametrize("table", ['{ "libtiff.so.5" = "" }', '{ "libtiff.so.5" = "a/b.so" }',
                                   '{ "" = "libtiff.so" }'])
def test_replace_needed_is_validated(table: str) -> None:
    import tomllib
    with pytest.raises(RulesError, match="replace_needed"):
        build_ruleset([("x.toml", tomllib.loads(f"[package]\nreplace_needed = {table}\n"))])
