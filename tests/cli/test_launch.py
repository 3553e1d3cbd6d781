"""The program's entry point starts a split's decoder before the CLI loads
(``cudasplit/_launch.py``): it reads the command line only as far as it must, knows every
value-taking option of ``split`` (checked here against click's own definition), starts nothing
for a command line it does not fully understand, and the split takes the decoder over (or kills
it, when the split would run another one). The split's result is the same either way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudasplit._launch import VALUE_OPTIONS, early_split_source
from cudasplit._source import codecs, start_decoding
from cudasplit.cli._split import split_command
from tests.support.tarutil import write_archive

REPO = Path(__file__).resolve().parents[2]
TOP = "cuda_demo-linux-x86_64-12.9.79-archive"
ENTRIES = [("file", "lib/libdemo.so.1", b"x" * 50_000), ("file", "include/demo.h", b"h")]


def test_the_table_is_the_split_commands_own() -> None:
    taking = {name for param in split_command.params
              if getattr(param, "param_type_name", "") == "option"
              and not (param.is_flag or param.count) for name in param.opts}
    assert taking == VALUE_OPTIONS
    assert all(param.nargs == 1 for param in split_command.params
               if getattr(param, "param_type_name", "") == "option" and not param.is_flag)


@pytest.mark.parametrize(("args", "expected"), [
    (["split", "A", "-o", "out"], ("A", None)),
    (["split", "-j4", "A", "-o", "out"], ("A", 4)),
    (["split", "--jobs", "16", "--outputs", "lib,dev", "A"], ("A", 16)),
    (["split", "--jobs=2", "-q", "--", "A"], ("A", 2)),
    (["split", "-o", "A", "B"], ("B", None)),            # -o's value is not a source
    (["split", "--report", "r.json", "A"], ("A", None)),
])
def test_what_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       args: list[str], expected: tuple[str, int | None]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("A", "B"):
        (tmp_path / name).write_bytes(b"")
    assert early_split_source(args) == expected


@pytest.mark.parametrize("args", [
    [], ["inspect", "A"], ["split"], ["split", "A", "B"],          # not one source
    ["split", "missing"], ["split", "dir"], ["split", "-"],           # not a regular file
    ["split", "A", "--memory-limit", "64M"], ["split", "A", "--max-size=1G"],  # not default
    ["split", "-qj4", "A"], ["split", "-j", "x", "A"],               # left to click
])
def test_what_it_leaves_to_the_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "A").write_bytes(b"")
    (tmp_path / "B").write_bytes(b"")
    (tmp_path / "dir").mkdir()
    assert early_split_source(args) is None


def test_the_split_takes_the_library_decoder_over(tmp_path: Path) -> None:
    """zstd and single-block xz decode in-process: their threads start early, and the split
    reads from them."""
    import cudasplit
    from cudasplit import SplitOptions

    archive = write_archive(tmp_path / f"{TOP}.tar.zst", ENTRIES, codec="zst", top=TOP)
    assert start_decoding(archive, jobs=1)
    early = next(iter(codecs._EARLY.values()))[1]
    first = cudasplit.split_to_dir(archive, tmp_path / "a", SplitOptions(jobs=1))
    assert codecs._EARLY == {} and early.closed   # taken over, read, closed by the split
    assert start_decoding(archive, jobs=1)
    second = cudasplit.split_to_dir(archive, tmp_path / "b", SplitOptions(jobs=3))
    assert codecs._EARLY == {}                    # another jobs: replaced
    assert [m.path for m in first.members] == [m.path for m in second.members]


@pytest.mark.skipif(shutil.which("xz") is None, reason="needs the xz program (xz-utils)")
def test_a_decoder_the_split_would_not_run_is_replaced(tmp_path: Path) -> None:
    import cudasplit
    from cudasplit import SplitOptions
    from tests.support.builders import compressed_writer
    from tests.support.tarutil import tar_bytes

    archive = tmp_path / f"{TOP}.tar.xz"
    with compressed_writer(archive, "xz-multiblock", xz_block_size=64 * 1024) as out:
        out.write(tar_bytes([("file", "lib/libdemo.so.1", os.urandom(300_000))], top=TOP))
    assert start_decoding(archive, jobs=8)            # xz -T8
    early = next(iter(codecs._EARLY.values()))[1]
    assert isinstance(early, codecs.ExternalDecompressor)
    report = cudasplit.split_to_dir(archive, tmp_path / "out", SplitOptions(jobs=1))
    assert codecs._EARLY == {}
    assert early._proc.poll() is not None   # killed: one job decodes in-process
    assert report.member("lib/libdemo.so.1").output is not None


def test_the_program_splits_the_same_with_and_without_it(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES, top=TOP)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outs = []
    for name, entry in (("early", "cudasplit._launch"), ("cli", "cudasplit.cli")):
        out = tmp_path / name
        code = f"import sys; sys.argv[0] = 'cudasplit'; from {entry} import run; run()"
        done = subprocess.run([sys.executable, "-c", code, "split", str(archive), "-o",
                               str(out), "-q", "--report", str(tmp_path / f"{name}.json")],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outs.append(sorted(p.relative_to(out).as_posix() for p in out.rglob("*")))
    assert outs[0] == outs[1]
