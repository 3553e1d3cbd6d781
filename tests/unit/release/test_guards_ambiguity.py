"""Ambiguous RUNPATHs (issue 28): a consumer linked against two directories that both hold
``libfoo.so.1`` is flagged by ``cudasplit ldd`` (an error with ``--strict``) and fails the
consumer-guards hook's fixup; the same consumer with one directory passes both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from cudasplit.guards import ambiguous_runpaths, consumer_guards_hook
from tests.support.builders import compile_executable, compile_shared, have_compiler

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")

CONSUMER = "int foo(void);\nint main(void) { return foo(); }\n"


def _consumer(tmp: Path, dirs: list[Path]) -> Path:
    """``bin/consumer`` NEEDing libfoo.so.1, its RUNPATH ``dirs`` (each holds a libfoo.so.1
    of its own: different bytes)."""
    libs = []
    for i, directory in enumerate(dirs):
        directory.mkdir(parents=True, exist_ok=True)
        libs.append(compile_shared(directory, "libfoo.so.1", f"int foo(void) {{ return {i}; }}",
                                   soname="libfoo.so.1"))
    out = tmp / "bin"
    out.mkdir(parents=True)
    return compile_executable(out, "consumer", CONSUMER, needed_libs=[libs[0]],
                              runpath=":".join(str(d) for d in dirs))


@pytest.fixture
def two(tmp_path: Path) -> Path:
    return _consumer(tmp_path / "two", [tmp_path / "a" / "lib", tmp_path / "b" / "lib"])


@pytest.fixture
def one(tmp_path: Path) -> Path:
    return _consumer(tmp_path / "one", [tmp_path / "c" / "lib"])


def test_two_directories_holding_libfoo_are_flagged(two: Path, tmp_path: Path) -> None:
    found = ambiguous_runpaths(two.parent.parent)
    assert [(a.file, a.library, a.directories) for a in found] == [
        (str(two), "libfoo.so.1", (str(tmp_path / "a/lib"), str(tmp_path / "b/lib")))]
    assert "libfoo.so.1 is in" in str(found[0])


def test_one_directory_is_not(one: Path) -> None:
    assert ambiguous_runpaths(one) == []


def test_the_same_file_twice_is_not_ambiguous(tmp_path: Path) -> None:
    """A symlink to the first copy, and a byte-identical copy, are one library."""
    first = tmp_path / "a" / "lib"
    consumer = _consumer(tmp_path, [first])
    (tmp_path / "link").mkdir()
    os.symlink(first / "libfoo.so.1", tmp_path / "link" / "libfoo.so.1")
    (tmp_path / "copy").mkdir()
    shutil.copy2(first / "libfoo.so.1", tmp_path / "copy" / "libfoo.so.1")
    subprocess.run(["patchelf", "--set-rpath", f"{first}:{tmp_path}/link:{tmp_path}/copy:{first}",
                    str(consumer)], check=True)
    assert ambiguous_runpaths(consumer) == []


def test_driver_libraries_are_not_ambiguous(tmp_path: Path) -> None:
    """cuda_compat's libcuda.so.1 before the driver's is the point of cuda_compat."""
    consumer = _consumer(tmp_path, [tmp_path / "a" / "lib"])
    for i, name in enumerate(("compat", "driver")):
        compile_shared(tmp_path / name, "libcuda.so.1", f"int cuInit(int f){{return f+{i};}}",
                       soname="libcuda.so.1")
    subprocess.run(["patchelf", "--set-rpath",
                    f"{tmp_path}/compat:{tmp_path}/a/lib:{tmp_path}/driver", str(consumer)],
                   check=True)
    assert ambiguous_runpaths(consumer) == []


def test_origin_and_maps_are_followed(tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, [tmp_path / "a" / "lib", tmp_path / "b" / "lib"])
    subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/../a/lib:/opt/elsewhere/lib",
                    str(consumer)], check=True)
    found = ambiguous_runpaths(consumer, maps=[("/opt/elsewhere", str(tmp_path / "b"))])
    assert [a.directories for a in found] == [
        (str(tmp_path / "bin/../a/lib"), str(tmp_path / "b/lib"))]


def test_cli_warns_and_strict_fails(two: Path, one: Path) -> None:
    runner = CliRunner()
    loose = runner.invoke(main, ["ldd", str(two), "--no-system"])
    assert loose.exit_code == 0, loose.output
    assert "warning: " in loose.output and "ambiguous RUNPATH: libfoo.so.1" in loose.output
    strict = runner.invoke(main, ["ldd", str(two), "--no-system", "--strict"])
    assert strict.exit_code == 1 and "error: " in strict.output
    as_json = runner.invoke(main, ["ldd", str(two), "--no-system", "--json"])
    entry = json.loads(as_json.output)["files"][0]
    assert entry["ambiguous"][0]["library"] == "libfoo.so.1"
    fine = runner.invoke(main, ["ldd", str(one), "--no-system", "--strict"])
    assert fine.exit_code == 0 and "ambiguous" not in fine.output


def run_hook(out: Path, body: str = "", env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """Source the hook as stdenv would for a consumer with one output ``out`` and run
    ``postFixupHooks`` (set -e, like stdenv's builder)."""
    script = (f"set -euo pipefail\npostFixupHooks=()\nsource {consumer_guards_hook()}\n{body}\n"
              'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "out": str(out), "outputs": "out",
                               "cudasplitForbiddenOutputs": "", **(env or {})})


def test_hook_fails_fixup_naming_file_library_and_directories(two: Path, tmp_path: Path
                                                              ) -> None:
    done = run_hook(two.parent.parent)
    assert done.returncode != 0
    assert (f"{two}: ambiguous RUNPATH: libfoo.so.1 is in {tmp_path}/a/lib and "
            f"{tmp_path}/b/lib") in done.stderr, done.stderr
    allowed = run_hook(two.parent.parent, env={"cudasplitAllowAmbiguous": "libfoo.so.1"})
    assert allowed.returncode == 0, allowed.stderr
    off = run_hook(two.parent.parent, env={"cudasplitNoAmbiguityCheck": "1"})
    assert off.returncode == 0, off.stderr


def test_hook_passes_with_one_directory(one: Path) -> None:
    done = run_hook(one.parent.parent)
    assert done.returncode == 0, done.stderr
    assert "ambiguous" not in done.stderr
