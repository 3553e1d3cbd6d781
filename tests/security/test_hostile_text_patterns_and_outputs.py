"""Issue 33, bad input round four: what an attacker's text does on a terminal, regexes and
globs that backtrack, outputs over their own inputs, the external decoder's memory, the
toolkit prefix, manifests, section headers, hard links into other outputs, ``--report``.

Each test here fails on the code before the fix (the message or the assertion says what the
old code did).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cudasplit
from cudasplit import (
    ManifestError,
    OutputError,
    SplitOptions,
    ToolkitError,
    UnsafeMemberError,
    inspect,
    split_to_dir,
)
from cudasplit.cli import main
from cudasplit.outputs import toolkit_view
from cudasplit.releases import load_manifest
from tests.support.builders import compile_shared
from tests.support.paths import REPO
from tests.support.tarutil import TOP, tar_bytes, write_archive

ESC_NAME = "lib\x1b]0;pwned\x07\x1b[2Jx.so.1"   # OSC (window title), CSI (clear screen)
RAW = ("\x1b", "\x9b", "\x85", "\u202e", "\x07")


def _no_raw_controls(text: str) -> None:
    assert not any(ch in text for ch in RAW), repr(text)


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """The real entry point (click's runner strips ANSI sequences from what it captures)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "cudasplit", *args], capture_output=True,
                          text=True, env=env, timeout=120, **kw)


# -- terminal injection -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_needed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library whose DT_NEEDED names carry an OSC and a CSI sequence and a bidi override."""
    root = tmp_path_factory.mktemp("needed")
    lib = compile_shared(root / "b", "libx.so.1", "int x(void) { return 1; }",
                         soname="libx.so.1", needed_libs=[ESC_NAME, "libq\u202eos.a.so"])
    return write_archive(root / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", lib.read_bytes())])


def test_split_warnings_show_controls_escaped(hostile_needed: Path, tmp_path: Path) -> None:
    done = _cli("split", str(hostile_needed), "-o", str(tmp_path / "o"), "--default-rules")
    assert done.returncode == 0, done.stderr
    _no_raw_controls(done.stderr + done.stdout)
    assert "lib\\x1b]0;pwned\\x07\\x1b[2Jx.so.1" in done.stderr
    assert "libq\\u202eos.a.so" in done.stderr


def test_inspect_explain_show_controls_escaped_and_json_stays_exact(
        hostile_needed: Path) -> None:
    explained = _cli("explain", str(hostile_needed), "lib/libx.so.1")
    assert explained.returncode == 0, explained.stderr
    _no_raw_controls(explained.stdout)
    assert "\\x1b]0;pwned" in explained.stdout
    as_json = _cli("inspect", "--json", str(hostile_needed))
    record = next(m for m in json.loads(as_json.stdout)["members"] if m["path"] ==
                  "lib/libx.so.1")
    assert record is not None
    exact = _cli("explain", "--json", str(hostile_needed), "lib/libx.so.1")
    needed = json.loads(exact.stdout)["elf"]["needed_unresolved"]
    assert ESC_NAME in needed and "libq\u202eos.a.so" in needed  # exact, not escaped


def test_progress_line_escapes_the_member_name(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from cudasplit.cli import ProgressLine

    ProgressLine()(cudasplit.Progress("a\x9b31m.tar", 1, 10, f"lib/{ESC_NAME}", done=True))
    err = capsys.readouterr().err
    _no_raw_controls(err.replace("\r", ""))
    assert "\\x1b]0;pwned" in err and "a\\x9b31m.tar" in err


def test_log_records_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from cudasplit.cli._terminal import setup_logging

    setup_logging(quiet=False, verbose=False)
    logging.getLogger("cudasplit").warning("%s: removed", "x\u202ey\x1b[0m")
    err = capsys.readouterr().err
    _no_raw_controls(err)
    assert err.strip() == "cudasplit: warning: x\\u202ey\\x1b[0m: removed"


@pytest.mark.parametrize("name", ["lib/a\x9bb.so", "lib/\u202eos.a", "lib/a\x85b",
                                  "lib/a\u2066b", "lib/\x1b[31mred"])
@pytest.mark.parametrize("form", ["tarball", "directory", "symlink-target"])
def test_member_names_with_controls_or_bidi_refuse(tmp_path: Path, name: str,
                                                   form: str) -> None:
    """One rule for C0, C1 and bidi controls in names (security.md): the archive or
    directory is refused (exit 2), and the message shows the name escaped."""
    if form == "directory":
        tree = tmp_path / TOP
        (tree / name).parent.mkdir(parents=True)
        (tree / name).write_bytes(b"x")
        source = tree
    else:
        entries = ([("file", name, b"x")] if form == "tarball" else
                   [("file", "lib/ok.so", b"x"), ("symlink", "lib/link.so", name[4:])])
        source = write_archive(tmp_path / f"{TOP}.tar.xz", entries)
    with pytest.raises(UnsafeMemberError, match=r"control|bidirectional"):
        inspect(source)
    done = _cli("split", str(source), "-o", str(tmp_path / "out"), "-q")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    _no_raw_controls(done.stderr)
    assert "U+" in done.stderr  # the character named, never printed raw
    assert not (tmp_path / "out").exists()


def test_manifest_text_is_escaped_in_messages(tmp_path: Path) -> None:
    manifest = tmp_path / "redistrib_1.0.json"
    manifest.write_text(json.dumps({"cuda_x": {"name": "x\x1b[2J\u202e", "version": "1.0"}}))
    for command in (["verify", str(manifest), "--tarballs", str(tmp_path)],
                    ["features", str(manifest), "--tarballs", str(tmp_path)],
                    ["nixify-sets", str(manifest), "-o", str(tmp_path / "sets")]):
        done = _cli(*command)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("cudasplit: error: ") and done.stderr.count("\n") == 1
        _no_raw_controls(done.stderr)


def test_rules_show_escapes_as_toml(tmp_path: Path) -> None:
    import tomllib

    rules = tmp_path / "mine.toml"
    rules.write_text('[[rule]]\nname = "r"\nmatch = ["x/**"]\noutput = "lib"\n'
                     'description = "looks \\u202e fine \\u009b"\n')
    done = _cli("rules", "show", str(rules))
    assert done.returncode == 0, done.stderr
    _no_raw_controls(done.stdout)
    shown = tomllib.loads(done.stdout)
    assert shown["rule"][0]["description"] == "looks \u202e fine \x9b"


def test_one_printing_function() -> None:
    """Every line for a person goes through cli/_text.shown: no module of the CLI prints any
    other way (click.echo, print, sys.stdout/stderr writes) but _text and the status line."""
    import ast

    allowed = {"_text.py", "_terminal.py"}
    for path in sorted((REPO / "cudasplit" / "cli").glob("*.py")):
        if path.name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("echo", "secho") and \
                    isinstance(node.value, ast.Name) and node.value.id == "click":
                pytest.fail(f"{path.name}:{node.lineno}: click.{node.attr} (use _text.say/data)")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "print" and not _version_line(path, node):
                pytest.fail(f"{path.name}:{node.lineno}: print()")
            if isinstance(node, ast.Attribute) and node.attr == "write" and \
                    isinstance(node.value, ast.Attribute) and node.value.attr in ("stdout",
                                                                                 "stderr"):
                pytest.fail(f"{path.name}:{node.lineno}: sys.{node.value.attr}.write")


def _version_line(path: Path, node: object) -> bool:
    """``cudasplit --version`` is answered before click is imported (start-up): the one
    print(), of a constant line with no input in it."""
    import ast

    return (path.name == "__init__.py" and isinstance(node, ast.Call) and len(node.args) == 1
            and isinstance(node.args[0], ast.JoinedStr)
            and ast.unparse(node.args[0]) == "f'cudasplit, version {__version__}'")


# -- one message style ----------------------------------------------------------------------------


def test_every_stderr_message_has_one_form(tmp_path: Path) -> None:
    manifest = tmp_path / "redistrib_12.9.1.json"
    manifest.write_text(json.dumps({"release_label": "12.9.1", "release_product": "cuda",
                                    "cuda_x": {"version": "1.0", "linux-x86_64": {
                                        "relative_path": "x/cuda_x-1.0.tar.xz",
                                        "sha256": "0" * 64, "size": "1"}}}))
    other = tmp_path / "cudnn_redistrib_9.8.0.json"
    other.write_text(json.dumps({"release_label": "9.8.0", "release_product": "cudnn"}))
    lines = []
    for command in (["features", str(manifest), "--tarballs", str(tmp_path)],
                    ["nixify-sets", str(manifest), str(other), "-o", str(tmp_path / "s")]):
        done = _cli(*command)
        lines += [line for line in done.stderr.splitlines() if line.strip()]
    messages = [line for line in lines if not line.startswith("wrote ")]
    assert messages, lines
    for line in messages:
        assert line.split(": ")[0:2][0] == "cudasplit" and line.split(": ")[1] in (
            "error", "warning", "problem", "note"), line


def test_quiet_help_says_what_it_hides() -> None:
    for command in ("split", "repack", "verify"):
        text = CliRunner().invoke(main, [command, "--help"]).output
        quiet = text[text.index("-q, --quiet"):].split("\n  -")[0]
        assert "Hide" in quiet and "still printed" in " ".join(quiet.split()), quiet


# -- regexes and globs ------------------------------------------------------------------------------


def _shipped_regexes() -> list[str]:
    import tomllib

    found = []
    for path in sorted((REPO / "rules" / "packages").glob("*.toml")):
        table = tomllib.loads(path.read_text()).get("package", {})
        found += [pair[0] for edit in table.get("text_edits", [])
                  for pair in edit.get("regex", [])]
    return found


@pytest.mark.parametrize("pattern", _shipped_regexes())
def test_shipped_patterns_are_linear(pattern: str) -> None:
    from cudasplit._rulebook import regex_hazard

    assert regex_hazard(pattern, seconds=20) is None


def test_tensorrt_edit_on_one_long_line(tmp_path: Path) -> None:
    """A 1 MiB CMake targets file of one line repeating the pattern's fragments (a few hundred
    bytes as .tar.xz): the old pattern took minutes (225 s measured), the linear one takes
    milliseconds. Run in a child with a deadline so a regression fails instead of hanging."""
    line = ("_cmake_import_check_ TRT::" * ((1 << 20) // 26 + 1))[: 1 << 20]
    archive = write_archive(tmp_path / "trt.tar.xz", [
        ("file", "cmake/TensorRT-EnterpriseTargets-release.cmake", line.encode())],
        top="tensorrt-linux-x86_64-11.2.1.2-archive")
    assert archive.stat().st_size < 4096
    done = _cli("split", str(archive), "-o", str(tmp_path / "o"), "-q", "--no-patch")
    assert done.returncode == 0, done.stderr


def test_rules_check_refuses_a_catastrophic_pattern(tmp_path: Path) -> None:
    rules = tmp_path / "slow.toml"
    rules.write_text(textwrap.dedent('''
        [package]
        [[package.text_edits]]
        files = ["lib/cmake/**"]
        regex = [['(?m)^.*_check_.*TRT::[A-Za-z_]*_win_.*$', ""]]
    '''))
    done = _cli("rules", "check", str(rules))
    assert done.returncode == 2 and "backtracks catastrophically" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/x.so", b"x")])
    split = _cli("split", str(archive), "-o", str(tmp_path / "o"), "--rules", str(rules))
    assert split.returncode == 2 and "backtracks" in split.stderr
    assert not (tmp_path / "o").exists()
    good = tmp_path / "good.toml"
    good.write_text(rules.read_text().replace(".*_check_.*TRT", "(?>[^\\n]*?_check_)[^\\n]*?TRT"
                                              ).replace("_win_.*$", "_win_[^\\n]*+$"))
    assert _cli("rules", "check", str(good)).returncode == 0


def test_many_star_glob_against_a_long_name(tmp_path: Path) -> None:
    """``*a*a*a*...*b`` against 200 bytes of ``a``: exponential in the old translation."""
    rules = tmp_path / "stars.toml"
    rules.write_text('[[rule]]\nname = "stars"\nmatch = ["' + "*a" * 12 + '*b"]\n'
                     'output = "lib"\n')
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/" + "a" * 200, b"x")])
    for command in (["inspect", str(archive)],
                    ["split", str(archive), "-o", str(tmp_path / "o"), "-q"]):
        done = _cli(*command, "--rules", str(rules), "--default-rules")
        assert done.returncode == 0, done.stderr


# -- outputs over their own inputs ----------------------------------------------------------------


@pytest.fixture
def split_dir(tmp_path: Path) -> Path:
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x"),
                                                         ("file", "include/x.h", b"x")])
    out = tmp_path / "split"
    split_to_dir(archive, out, SplitOptions(patch=False, default_rules=True))
    return out


def test_toolkit_over_its_own_input_is_refused(split_dir: Path) -> None:
    before = sorted(p.relative_to(split_dir) for p in split_dir.rglob("*"))
    for dest in (split_dir, split_dir / "include" / "tk", split_dir.parent):
        with pytest.raises(OutputError, match="an output may not be"):
            toolkit_view([split_dir], dest, overwrite=True)
    assert sorted(p.relative_to(split_dir) for p in split_dir.rglob("*")) == before
    done = _cli("toolkit", str(split_dir), "-o", str(split_dir), "--overwrite")
    assert done.returncode == 2 and (split_dir / "lib").is_dir()


def test_directory_source_with_output_inside_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / TOP
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "libx.so.1").write_bytes(b"x")
    for command in (["split", str(tree), "-o", str(tree / "out")],
                    ["repack", str(tree), "-o", str(tree / "packed")],
                    ["split", str(tree), "-o", str(tree)]):
        done = _cli(*command, "--default-rules")
        assert done.returncode == 2 and "an output may not be" in done.stderr, done.stderr
    assert sorted(p.name for p in tree.iterdir()) == ["lib"]


def test_an_input_inside_an_output_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out" / "lib").mkdir(parents=True)
    archive = write_archive(tmp_path / "out" / "lib" / f"{TOP}.tar.xz",
                            [("file", "lib/libx.so.1", b"x")])
    with pytest.raises(OutputError, match="contains the input"):
        split_to_dir(archive, tmp_path / "out", SplitOptions(overwrite=True))
    assert archive.is_file()
    beside = split_to_dir(archive, tmp_path / "elsewhere", SplitOptions(default_rules=True))
    assert beside.members  # an output directory next to the input is fine


def test_nixify_output_equal_to_an_input(tmp_path: Path) -> None:
    manifest = tmp_path / "redistrib_1.0.json"
    manifest.write_text("{}")
    with pytest.raises(OutputError, match="an output may not be"):
        cudasplit.nixify.nixify_manifest(manifest, tmp_path, tmp_path)
    done = _cli("features", str(manifest), "--tarballs", str(tmp_path), "-o", str(manifest))
    assert done.returncode == 2 and manifest.read_text() == "{}"


# -- the external decoder's memory ----------------------------------------------------------------


def test_external_xz_gets_a_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    import cudasplit._source.codecs as codecs

    data = tar_bytes([("file", "lib/big", b"\0" * (3 << 20))])
    archive = tmp_path / f"{TOP}.tar.xz"
    done = subprocess.run(["xz", "-T2", "--block-size=1MiB", "-c"], input=data,
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("no xz binary")
    archive.write_bytes(done.stdout)
    seen: list[list[str]] = []
    real = codecs.ExternalDecompressor

    def spy(argv: list[str], path: str, source: str) -> Any:
        seen.append(argv)
        return real(argv, path, source)

    monkeypatch.setattr(codecs, "ExternalDecompressor", spy)
    for limit, deliverable in ((None, None), (64 << 20, None), (None, 80 << 20),
                               (None, 1 << 20)):
        with codecs.open_decompressed(archive, jobs=8, external=True, memory_limit=limit,
                                      deliverable=deliverable) as stream:
            assert stream.read() == data
    limits = [[a for a in argv if a.startswith("--memlimit")] for argv in seen]
    # Without a limit: what xz -T8 needs to run its 8 threads (each a 1 MiB block's output
    # and input, the dictionary, liblzma's buffers), never less (fewer threads: slower).
    with archive.open("rb") as fh:
        streams = codecs.read_xz_layout(fh.fileno(), archive.stat().st_size)
        need = codecs._xz_threads_need(fh.fileno(), streams, 8)
    assert need >= 8 * ((1 << 20) + (1 << 20))
    assert limits == [[f"--memlimit-decompress={need}"], [f"--memlimit-decompress={64 << 20}"],
                      [f"--memlimit-decompress={min(need, 80 << 20)}"],
                      [f"--memlimit-decompress={codecs.MIN_BUDGET}"]]


def test_a_small_bomb_is_not_decoded_far_ahead(tmp_path: Path) -> None:
    """249 KB of .tar.xz in 256 MiB blocks of 4 MiB zero files: `xz -T8` decoded 1.3 GB
    ahead of the ratio guard that refused the archive (the issue measured 1.9 GB). The
    default budget and the child's limit are no larger than what the guards let through."""
    from cudasplit._source import RATIO_GRACE, Limits, deliverable

    assert deliverable(Limits(), 249_328) == max(RATIO_GRACE, 200 * 249_328)
    assert deliverable(Limits(max_total_bytes=1 << 20), 10 << 30) == 1 << 20


def test_a_memory_limit_holds_the_threads_dictionaries() -> None:
    from cudasplit._source.codecs import LIBLZMA_OVERHEAD, threads_within

    threads, budget = threads_within(128 << 20, 16, 8 << 20)
    assert threads * (8 << 20) + threads * LIBLZMA_OVERHEAD + budget <= 128 << 20
    assert threads == 5 and budget == (128 << 20) - 5 * ((8 << 20) + LIBLZMA_OVERHEAD)
    assert threads_within(16 << 20, 16, 64 << 20) == (1, 1 << 20)


@pytest.mark.parametrize(("preset", "dictionary"), [("-1", 1 << 20), ("-6", 8 << 20),
                                                     ("-9", 64 << 20)])
def test_dictionary_size_from_the_block_header(tmp_path: Path, preset: str,
                                               dictionary: int) -> None:
    from cudasplit._source.codecs import dictionary_size, read_xz_layout

    done = subprocess.run(["xz", preset, "-T1", "--block-size=65536", "-c"],
                          input=os.urandom(200000), capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("no xz binary")
    path = tmp_path / "x.xz"
    path.write_bytes(done.stdout)
    fd = os.open(path, os.O_RDONLY)
    try:
        blocks = [b for s in read_xz_layout(fd, os.fstat(fd).st_size) for b in s.blocks]
        assert dictionary_size(fd, blocks) == dictionary
    finally:
        os.close(fd)


# -- the toolkit prefix -----------------------------------------------------------------------------


def test_toolkit_overwrite_never_loses_the_old_prefix(split_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The new prefix cannot be renamed in: the old one must still be there, whole (the old
    code deleted it first, then failed to rename)."""
    import cudasplit._release.toolkit.write as write

    dest = tmp_path / "tk"
    toolkit_view([split_dir], dest)
    before = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))

    def refuse(*_args: object, **_kw: object) -> None:
        raise OSError(5, "I/O error (simulated)")

    monkeypatch.setattr(write.os, "replace", refuse)
    monkeypatch.setattr(write.os, "rename", refuse)
    monkeypatch.setattr(write, "_exchange", refuse, raising=False)
    with pytest.raises(ToolkitError):
        toolkit_view([split_dir], dest, overwrite=True)
    monkeypatch.undo()
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if ".cudasplit-" in p.name] == []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_toolkit_cleans_what_a_killed_run_left(split_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "tk"
    pid = _dead_pid()
    stage = tmp_path / f".tk.cudasplit-{pid}"
    (stage / "bin").mkdir(parents=True)
    aside = tmp_path / f".tk.cudasplit-previous-{pid}"
    (aside / "include").mkdir(parents=True)
    (aside / "marker").write_text("old prefix")
    toolkit_view([split_dir], tmp_path / "other")  # another prefix: its run leaves them alone
    assert stage.exists() and aside.exists()
    toolkit_view([split_dir], dest, overwrite=True)
    assert not stage.exists() and not aside.exists()
    # A kill between the two renames: the old prefix is put back when nothing is at DEST.
    dest2 = tmp_path / "tk2"
    aside2 = tmp_path / f".tk2.cudasplit-previous-{pid}"
    aside2.mkdir()
    (aside2 / "marker").write_text("old prefix")
    from cudasplit._release.toolkit import clean_leftovers

    clean_leftovers(dest2)
    assert (dest2 / "marker").read_text() == "old prefix"


def test_toolkit_sigterm_during_overwrite(split_dir: Path, tmp_path: Path) -> None:
    """SIGTERM at the worst moment (the old code: after deleting the old prefix, before the
    rename) leaves a whole prefix: the old or the new one."""
    dest = tmp_path / "tk"
    toolkit_view([split_dir], dest)
    code = textwrap.dedent(f"""
        import os, shutil, signal
        from cudasplit.cli import run
        real_rmtree = shutil.rmtree
        def stop_rmtree(path, *a, **k):
            if str(path) == {str(dest)!r}:  # the old code: the prefix deleted, then killed
                real_rmtree(path, *a, **k)
                os.kill(os.getpid(), signal.SIGTERM)
            elif "cudasplit-trash" in str(path):  # killed while the old prefix is deleted
                os.kill(os.getpid(), signal.SIGTERM)
            return real_rmtree(path, *a, **k)
        shutil.rmtree = stop_rmtree
        import sys
        sys.argv = ["cudasplit", "toolkit", {str(split_dir)!r}, "-o", {str(dest)!r},
                    "--overwrite"]
        run()
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ,
                          "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert (dest / "targets").is_dir() and (dest / "include").exists(), list(dest.iterdir())
    toolkit_view([split_dir], tmp_path / "tk", overwrite=True)  # and the next run is clean
    assert [p.name for p in tmp_path.iterdir() if "cudasplit" in p.name] == []


def test_toolkit_refuses_a_symlink_loop(tmp_path: Path) -> None:
    """``include/cccl -> .`` in two packages: the merge walked it to ELOOP and said "different
    contents"."""
    splits = []
    for name in ("a", "b"):
        include = tmp_path / name / "include" / "include"
        include.mkdir(parents=True)
        (include / f"{name}.h").write_text(name)
        (include / "cccl").symlink_to(".")
        splits.append(tmp_path / name)
    with pytest.raises(ToolkitError, match=r"cccl: a symlink loop .*-> \. leads back"):
        toolkit_view(splits, tmp_path / "tk")


# -- manifests ---------------------------------------------------------------------------------------


def _manifest(tmp_path: Path, **artifact: Any) -> Path:
    entry = {"relative_path": "x/cuda_x-1.0.tar.xz", "sha256": "0" * 64, "size": "1",
             **artifact}
    path = tmp_path / "redistrib_12.9.1.json"
    path.write_text(json.dumps({"release_label": "12.9.1", "cuda_x": {
        "version": "1.0", "linux-x86_64": entry}}))
    return path


@pytest.mark.parametrize("artifact", [
    {"size": "\u00b2"}, {"size": "1" * 5000}, {"size": -1}, {"size": 2**64}, {"size": "0x10"},
    {"sha256": "g" * 64}, {"sha256": "\u0660" * 64}, {"relative_path": "../x.tar.xz"},
    {"relative_path": "x//y.tar.xz"}, {"relative_path": "x/\x1b[2J.tar.xz"},
    {"md5": "zz"}], ids=str)
def test_manifest_values_outside_the_schema(tmp_path: Path, artifact: dict[str, Any]) -> None:
    path = _manifest(tmp_path, **artifact)
    with pytest.raises(ManifestError):
        load_manifest(path)
    for command in (["verify", str(path), "--tarballs", str(tmp_path)],
                    ["features", str(path), "--tarballs", str(tmp_path)],
                    ["nixify-sets", str(path), "-o", str(tmp_path / "s")],
                    ["diff", str(path), str(path)]):
        done = _cli(*command)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (command, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_json_integer_of_5000_digits(tmp_path: Path) -> None:
    path = tmp_path / "redistrib_1.json"
    path.write_text('{"cuda_x": {"version": "1", "linux-x86_64": {"relative_path": "a", '
                    '"sha256": "' + "0" * 64 + '", "size": ' + "1" * 5000 + "}}}")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_manifest(path)


@pytest.mark.parametrize("pname", ["cuda x", "cuda/x", "1cuda", "x" * 200, "cuda\u202ex",
                                   "${builtins.abort}", "a\"b"])
def test_package_names_are_identifiers(tmp_path: Path, pname: str) -> None:
    path = tmp_path / "redistrib_1.json"
    path.write_text(json.dumps({pname: {"version": "1.0"}}))
    with pytest.raises(ManifestError, match="not an identifier"):
        load_manifest(path)


def test_real_manifests_still_load() -> None:
    for path in sorted((REPO / "tests" / "data" / "manifests").rglob("redistrib_*.json")):
        assert load_manifest(path).packages


# -- section headers that are not valid ---------------------------------------------------------------


def _readelf_warnings(path: Path) -> int:
    done = subprocess.run(["readelf", "-a", str(path)], capture_output=True, check=False)
    return done.stderr.count(b"\n")


@pytest.mark.parametrize("where", ["end", "past", "straddling"])
def test_bogus_shoff_gets_no_section_header_bytes(tmp_path: Path, where: str) -> None:
    import shutil
    import struct

    from cudasplit._elf.patch import ElfEdit, apply_edit

    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    lib = compile_shared(tmp_path / "b", "liba.so", "int f(void) { return 3; }")
    blob = bytearray(lib.read_bytes())
    shoff = struct.unpack_from("<Q", blob, 40)[0]
    bogus = {"end": len(blob), "past": len(blob) + 4096, "straddling": shoff + 64}[where]
    struct.pack_into("<Q", blob, 40, bogus)
    path = tmp_path / "liba.so"
    path.write_bytes(bytes(blob))
    path.chmod(0o755)
    before = _readelf_warnings(path)
    result = apply_edit(path, ElfEdit(runpath="/nix/store/" + "b" * 32 + "-x/lib:$ORIGIN"),
                        patcher="append")
    assert result.method == "append"
    assert _readelf_warnings(path) <= before
    code = f"import ctypes,sys; sys.exit(ctypes.CDLL({str(path)!r}).f() != 3)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- hard links into another output --------------------------------------------------------------------


@pytest.mark.parametrize("early", [True, False], ids=["patched-early", "patched-at-end"])
def test_hard_link_into_stubs_keeps_the_original_bytes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       early: bool) -> None:
    import cudasplit._split.patchstage as stage

    restored: list[object] = []
    real_restore = stage.restore_original
    monkeypatch.setattr(stage, "restore_original",
                        lambda *a: restored.append(a) or real_restore(*a))
    if not early:
        monkeypatch.setattr(stage.PatchStage, "_patch_early", lambda self, job, own: None)
    lib = compile_shared(tmp_path / "b", "libcufft.so.11", "int f(void) { return 1; }",
                         soname="libcufft.so.11", runpath="/usr/lib/old")
    archive = write_archive(tmp_path / "x.tar.xz", [
        ("file", "lib/libcufft.so.11", lib.read_bytes()), ("file", "include/cufft.h", b"x"),
        ("file", "lib/libcufft_static.a", b"!<arch>\n"),
        ("hardlink", "lib/stubs/libcufft.so", "lib/libcufft.so.11")],
        top="libcufft-linux-x86_64-11.4.1.4-archive")
    roots = (("cuda_nvrtc", "/opt/nvrtc"), ("libnvjitlink", "/opt/nvjitlink"))
    report = split_to_dir(archive, tmp_path / "out", SplitOptions(
        strict=True, package_roots=roots, jobs=2))
    assert report.outputs["stubs"].files == 1  # no false empty-output under --strict
    stub = tmp_path / "out" / "stubs" / "lib" / "stubs" / "libcufft.so"
    assert hashlib.sha256(stub.read_bytes()).digest() == hashlib.sha256(
        lib.read_bytes()).digest()
    patched = tmp_path / "out" / "lib" / "lib" / "libcufft.so.11"
    assert patched.read_bytes() != lib.read_bytes()
    assert bool(restored) == early  # the undo log gave the copy its bytes back


# -- --report in a directory that does not exist ---------------------------------------------------------


def test_report_in_a_missing_directory(tmp_path: Path) -> None:
    """The check passed (the nearest existing parent is writable) but the directory was never
    made: the outputs were promoted and the run exited 2."""
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x")])
    report = tmp_path / "not" / "yet" / "r.json"
    done = _cli("split", str(archive), "-o", str(tmp_path / "o"), "--report", str(report),
                "--default-rules", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["members"]


# -- a moved dynamic array and PT_GNU_RELRO (documented in elf-editing.md) -------------------------


def _segments(path: Path) -> list[tuple[str, int, int, str]]:
    out = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] in ("LOAD", "DYNAMIC", "GNU_RELRO"):
            flags = "".join(fields[6:-1])  # "R E" is two fields
            rows.append((fields[0], int(fields[2], 16), int(fields[5], 16), flags))
    return rows


@pytest.mark.parametrize("linker", ["lld", "mold", "bfd"])
def test_moved_dynamic_array_is_as_documented(tmp_path: Path, linker: str) -> None:
    """elf-editing.md: where the array has no spare slot (lld), it moves into a writable
    segment outside PT_GNU_RELRO (as patchelf does); the file loads, also after strip.
    Elsewhere it stays in place, inside RELRO."""
    import shutil

    from cudasplit._elf.patch import ElfEdit, apply_edit

    tool = {"lld": "ld.lld", "mold": "mold", "bfd": "ld.bfd"}[linker]
    if shutil.which(tool) is None or shutil.which("readelf") is None:
        pytest.skip(f"no {tool} or readelf")
    source = tmp_path / "l.c"
    source.write_text("int three = 3; int *const table[1] = {&three};\n"
                      "int f(void) { return *table[0]; }\n")
    lib = tmp_path / "libl.so"
    subprocess.run(["gcc", "-shared", "-fPIC", f"-fuse-ld={linker}", "-Wl,-z,relro,-z,now",
                    "-o", str(lib), str(source)], check=True)
    apply_edit(lib, ElfEdit(runpath="/nix/store/" + "b" * 32 + "-x/lib:$ORIGIN"))
    rows = _segments(lib)
    dynamic = next(r for r in rows if r[0] == "DYNAMIC")
    relro = next(r for r in rows if r[0] == "GNU_RELRO")
    inside = relro[1] <= dynamic[1] < relro[1] + relro[2]
    assert inside == (linker != "lld"), rows
    host = next(r for r in rows if r[0] == "LOAD" and r[1] <= dynamic[1] < r[1] + r[2])
    assert "W" in host[3]
    code = f"import ctypes,sys; sys.exit(ctypes.CDLL({str(lib)!r}).f() != 3)"
    for _ in ("patched", "stripped"):
        assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
        subprocess.run(["strip", str(lib)], check=True)
