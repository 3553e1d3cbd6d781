"""Issue 23: a file that should be patched and is not fails ``--nix`` and ``--strict`` runs, and
is counted in the summary line in every mode.

The fixture: a library linked with 256-byte pages (``PT_LOAD`` alignment below the page size),
so no segment can be appended for a RUNPATH that does not fit into ``.dynstr``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudasplit import ProblemsFound, SplitOptions, split_nix, split_to_dir
from cudasplit.errors import UnpatchedFilesError
from tests.support.tarutil import write_archive

LONG = "/nix/store/" + "a" * 32 + "-cuda_compat-12.9/compat"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unpatched")
    (root / "s.c").write_text("int f(void){return 1;}\n")
    lib = root / "libsmall.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libsmall.so.1",
                    "-Wl,-z,max-page-size=0x100,-z,common-page-size=0x100,-z,noseparate-code",
                    "-o", str(lib), str(root / "s.c")], check=True)
    return write_archive(root / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz",
                         [("file", "lib/libsmall.so.1", lib.read_bytes()),
                          ("file", "LICENSE", b"license")])


def _options(**kw: object) -> SplitOptions:
    from cudasplit import RunpathPolicy
    return SplitOptions(runpath=RunpathPolicy(cuda_compat=LONG), jobs=1, **kw)  # type: ignore[arg-type]


def test_counted_in_the_summary_line(archive: Path, tmp_path: Path) -> None:
    report = split_to_dir(archive, tmp_path / "o", _options())
    assert [(p.path, p.code) for p in report.problems] == [("lib/libsmall.so.1", "patch-failed")]
    assert "NOT patched: 1 ELF file that should be (patch-failed; see the problems)" in \
        report.summary_lines()


def test_strict_fails(archive: Path, tmp_path: Path) -> None:
    with pytest.raises(ProblemsFound, match="should be patched and are not"):
        split_to_dir(archive, tmp_path / "o", _options(strict=True))
    assert not (tmp_path / "o").exists()


def test_nix_fails(archive: Path, tmp_path: Path) -> None:
    names = ("out", "lib")
    env = {"outputs": " ".join(names), **{n: str(tmp_path / "store" / n) for n in names}}
    with pytest.raises(UnpatchedFilesError, match=r"libsmall\.so\.1"):
        split_nix(archive, env, _options(default_rules=True))


def test_cli_exit_status_and_summary(archive: Path, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "cudasplit", "split", str(archive), "--cuda-compat", LONG]
    plain = subprocess.run([*base, "-o", str(tmp_path / "a")], capture_output=True, text=True,
                           check=False)
    assert plain.returncode == 0, plain.stderr
    assert "NOT patched: 1 ELF file" in plain.stdout + plain.stderr
    strict = subprocess.run([*base, "-o", str(tmp_path / "b"), "--strict"], capture_output=True,
                            text=True, check=False)
    assert strict.returncode == 1 and "should be patched and are not" in strict.stderr
