"""Fuzz targets (issue 24): the tar reader and the ELF planner+writer, driven by hypothesis
from the seed corpus kept in tests/data/fuzz/ (built by tests/support/fuzz_corpus.py).

* tar: a seed archive (tar, xz, gz, zst), mutated (bit flips, planted octal/base-256 values,
  truncation, inserted and repeated blocks), either as compressed bytes or inside the
  compressed stream, then planned (``inspect``) and split into a directory. Only a
  :class:`CudasplitError` with a one-line message may come out, nothing outside the output
  directory changes, a refusal leaves the output directory empty.
* ELF: a seed library or executable, mutated mostly in its headers, program headers and
  dynamic section, then read, planned and written by the native tiers (``apply_edit``). Only
  ``ElfError``/``PatchError`` may come out; a refused file is byte-identical; a written file
  reads back with the search path asked for.

Issue 33 adds printed text (:func:`shown`), globs and the shipped text edits, and manifests.

Bounded for CI: ``CUDASPLIT_FUZZ_EXAMPLES`` examples per target (default 150, ~2 s; derandomized so
CI is repeatable), each asserted to finish within a few seconds. A long local run:
``CUDASPLIT_FUZZ_EXAMPLES=5000 CUDASPLIT_FUZZ_RANDOM=1 pytest tests/test_fuzz_targets.py``.
A failing example found this way goes into the corpus (see tests/support/fuzz_corpus.py).
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
import os
import tempfile
import time
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from cudasplit import CudasplitError, Report, SplitOptions, inspect, split_to_dir
from cudasplit._elf.patch import ElfEdit, apply_edit
from cudasplit._elf.read import read_elf_info
from cudasplit.errors import ElfError, PatchError
from tests.support.paths import DATA
from tests.support.tarutil import TOP, compress

CORPUS = DATA / "fuzz"
TAR_SEEDS = sorted((CORPUS / "tar").iterdir())
ELF_SEEDS = sorted((CORPUS / "elf").iterdir())
EXAMPLES = int(os.environ.get("CUDASPLIT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                derandomize=not os.environ.get("CUDASPLIT_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECONDS_PER_CASE = 10.0
CANARY = b"must not change\n"

# Values that tar and ELF parsers get wrong: octal edge cases, base-256, huge and negative.
INTERESTING = [b"0", b"7" * 11, b"\x80" + b"\0" * 7, b"\xff" * 8, b"\0" * 8, b"-1",
               (2**31 - 1).to_bytes(4, "little"), (2**32 - 1).to_bytes(4, "little"),
               (2**63).to_bytes(8, "little"), b"\x01\0\0\0", b" " * 8, b"ustar\x0000"]


def _note(what: str) -> None:
    """An outcome for ``--hypothesis-show-statistics`` (the corpus replays run outside)."""
    with contextlib.suppress(InvalidArgument):
        event(what)


def _decompress(data: bytes, suffix: str) -> bytes:
    if suffix == ".tar.xz":
        return lzma.decompress(data)
    if suffix == ".tar.gz":
        return gzip.decompress(data)
    if suffix == ".tar.zst":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def _suffix(path: Path) -> str:
    return "".join(path.suffixes[-2:]) if path.suffix != ".tar" else ".tar"


@st.composite
def mutated(draw: st.DrawFn, data: bytes, header_bias: int = 0) -> bytes:
    """``data`` with 1-3 mutations at drawn positions (``header_bias``: that share of them
    within the first 1 KiB)."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        if not buf:
            break
        limit = min(len(buf), 1024) if draw(st.integers(0, 99)) < header_bias else len(buf)
        pos = draw(st.integers(0, limit - 1))
        op = draw(st.sampled_from(["flip", "byte", "plant", "truncate", "insert", "repeat"]))
        if op == "flip":
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            buf[pos] = draw(st.integers(0, 255))
        elif op == "plant":
            value = draw(st.sampled_from(INTERESTING))
            buf[pos:pos + len(value)] = value
        elif op == "truncate":
            del buf[pos:]
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=600))
        else:  # repeat a 512-byte block (a duplicated header)
            start = pos - pos % 512
            buf[start:start] = buf[start:start + 512]
    return bytes(buf)


@st.composite
def archives(draw: st.DrawFn) -> tuple[bytes, str]:
    seed = draw(st.sampled_from(TAR_SEEDS))
    suffix, data = _suffix(seed), seed.read_bytes()
    if suffix != ".tar" and draw(st.booleans()):  # mutate the tar inside the stream
        codec = suffix.rsplit(".", 1)[1]
        return compress(draw(mutated(_decompress(data, suffix))), codec), suffix
    return draw(mutated(data)), suffix


def _outside_state(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}


def _split_once(data: bytes, suffix: str, skip_unsafe: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "canary").write_bytes(CANARY)
        archive = root / f"{TOP}{suffix}"
        archive.write_bytes(data)
        out = root / "out"
        options = SplitOptions(jobs=1, max_total_bytes=64 << 20,
                               skip_unsafe_members=skip_unsafe)
        started = time.monotonic()
        for run in (lambda: inspect(archive, options), lambda: split_to_dir(archive, out, options)):
            try:
                outcome = run()
            except CudasplitError as exc:
                _note(f"tar: {type(exc).__name__}")
                assert "\n" not in str(exc), str(exc)
                assert not out.exists() or list(out.iterdir()) == []
            else:
                _note("tar: accepted")
                assert isinstance(outcome, Report)
        assert _outside_state(root) == {"canary": CANARY, archive.name: data}
        assert time.monotonic() - started < SECONDS_PER_CASE


@FUZZ
@given(archives(), st.booleans())
def test_fuzz_tar_reader(case: tuple[bytes, str], skip_unsafe: bool) -> None:
    _split_once(case[0], case[1], skip_unsafe)


@pytest.mark.parametrize("seed", TAR_SEEDS, ids=lambda p: p.name)
def test_tar_corpus_replays(seed: Path) -> None:
    """Every corpus file as it is: the seeds split; files added as ``found-*`` must not crash."""
    _split_once(seed.read_bytes(), _suffix(seed), skip_unsafe=False)
    if not seed.name.startswith("found-"):
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / f"{TOP}{_suffix(seed)}"
            archive.write_bytes(seed.read_bytes())
            assert inspect(archive, SplitOptions(jobs=1)).members


# -- ELF -------------------------------------------------------------------------------------

STORE = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz"
EDITS = [
    ElfEdit(runpath="$ORIGIN"),
    ElfEdit(runpath=f"{STORE}-cuda_compat-12.9/compat:/run/opengl-driver/lib:$ORIGIN"),
    ElfEdit(runpath="/opt/x", tag="RPATH"),
    ElfEdit(runpath=""),
    ElfEdit(interpreter=f"{STORE}-glibc-2.40/lib/ld-linux-x86-64.so.2"),
    ElfEdit(replace_needed=(("libb.so", "libb.so.2"),)),
    ElfEdit(runpath="$ORIGIN/../lib", add_needed=("libextra.so.1",)),
]


def _edit_once(data: bytes, edit: ElfEdit) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "libfuzz.so"
        path.write_bytes(data)
        started = time.monotonic()
        try:
            read_elf_info(path)
            apply_edit(path, edit, patcher="native")
        except (ElfError, PatchError) as exc:
            _note(f"elf: {type(exc).__name__}")
            assert "\n" not in str(exc)
            assert path.read_bytes() == data, "a refused file must stay byte-identical"
        else:
            _note("elf: written")
            info = read_elf_info(path)  # what was written reads back
            if edit.runpath and info is not None and info.has_dynamic:
                got = info.runpath if edit.tag == "RUNPATH" else info.rpath
                assert got == edit.runpath, (got, edit.runpath)
        assert time.monotonic() - started < SECONDS_PER_CASE


@FUZZ
@given(st.sampled_from(ELF_SEEDS).flatmap(lambda p: mutated(p.read_bytes(), header_bias=70)),
       st.sampled_from(EDITS))
def test_fuzz_elf_planner_and_writer(data: bytes, edit: ElfEdit) -> None:
    _edit_once(data, edit)


@pytest.mark.parametrize("seed", ELF_SEEDS, ids=lambda p: p.name)
@pytest.mark.parametrize("edit", EDITS[:3], ids=["origin", "store", "rpath"])
def test_elf_corpus_replays(seed: Path, edit: ElfEdit) -> None:
    _edit_once(seed.read_bytes(), edit)
    if not seed.name.startswith("found-"):  # the seeds themselves are patched, not refused
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / seed.name
            path.write_bytes(seed.read_bytes())
            apply_edit(path, edit, patcher="native")


# -- issue 33: printed text, globs and text edits, manifests -----------------------------------


@FUZZ
@given(st.text(alphabet=st.characters(), max_size=200))
def test_fuzz_printed_text(text: str) -> None:
    """Whatever a name holds, the line printed for it is printable (no ESC, C1, bidi control,
    line separator or lone surrogate reaches the terminal), printable text is left as it is,
    and a message is one line."""
    from cudasplit.cli._text import message, shown

    out = shown(text)
    assert out.isprintable()
    if text.isprintable():
        assert out == text
    else:
        _note("printed: escaped")
    line = message("warning", text, "code")
    assert "\n" not in line and "\r" not in line and line.isprintable()


_GLOB_PIECES = ["a", "b", "x", ".", "*", "?", "[ab]", "[!a]", "-"]


@st.composite
def globs(draw: st.DrawFn) -> str:
    def component() -> str:
        if draw(st.integers(0, 5)) == 0:
            return "**"
        pieces = draw(st.lists(st.sampled_from(_GLOB_PIECES), min_size=1, max_size=8))
        text = "".join(pieces)
        return text if "**" not in text else text.replace("**", "*")
    parts = [component() for _ in range(draw(st.integers(1, 4)))]
    return "/".join(parts)


def _reference(pattern: str, path: str) -> bool:
    """The documented semantics, by recursion over components with fnmatch inside one."""
    import fnmatch

    parts = pattern.split("/")
    if "/" not in pattern and parts != ["**"]:
        parts = ["**", *parts]

    def match(pat: list[str], comps: list[str]) -> bool:
        if not pat:
            return not comps
        if pat[0] == "**":
            if len(pat) == 1:
                return bool(comps) or pattern == "**"
            return any(match(pat[1:], comps[i:]) for i in range(len(comps) + 1))
        return bool(comps) and fnmatch.fnmatchcase(comps[0], pat[0]) and match(pat[1:],
                                                                                comps[1:])

    return match(parts, path.split("/"))


@FUZZ
@given(globs(), st.lists(st.text(alphabet="abx.-", min_size=1, max_size=12), min_size=1,
                         max_size=5).map("/".join))
def test_fuzz_globs(pattern: str, path: str) -> None:
    """The translated glob agrees with the documented semantics and is fast whatever the
    path: 40 copies of the path's last component must not slow it down (the old
    translation was exponential in the number of ``*``)."""
    from cudasplit._globs import compile_glob

    glob = compile_glob(pattern)
    assert glob.matches(path) == _reference(pattern, path), (pattern, path)
    started = time.monotonic()
    long = path + "/" + "a" * 200
    glob.matches(long)
    glob.matches("/".join([path] * 40))
    assert time.monotonic() - started < 1.0


def _shipped_text_edits() -> list[tuple[str, str]]:
    import tomllib

    found = []
    for path in sorted((DATA.parent.parent / "rules" / "packages").glob("*.toml")):
        table = tomllib.loads(path.read_text()).get("package", {})
        found += [(pair[0], pair[1]) for edit in table.get("text_edits", [])
                  for pair in edit.get("regex", [])]
    return found


_EDIT_FRAGMENTS = ["_cmake_import_check_", "TRT::", "nvinfer", "_win_", "x64", " ", "\n",
                   "INTERFACE_LINK_DIRECTORIES \"/usr/local/cuda", "-12.9", "/lib64\"", "\"",
                   "${_IMPORT_PREFIX}/lib", "a", "_"]


@FUZZ
@given(st.sampled_from(_shipped_text_edits()),
       st.lists(st.sampled_from(_EDIT_FRAGMENTS), max_size=400).map("".join))
def test_fuzz_text_edits(edit: tuple[str, str], text: str) -> None:
    """Every shipped text edit regex runs on archive text in time linear in the text: the
    text repeated 64 times costs no more than a bounded multiple of the text once."""
    import re

    pattern = re.compile(edit[0])
    started = time.monotonic()
    pattern.subn(lambda _: edit[1], text * 64)
    assert time.monotonic() - started < 2.0


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=12), children, max_size=4), max_leaves=20)


@st.composite
def manifests(draw: st.DrawFn) -> object:
    """A valid manifest with drawn values planted at drawn places, or any JSON at all."""
    if draw(st.integers(0, 3)) == 0:
        return draw(_JSON)
    artifact: dict[str, object] = {"relative_path": "x/cuda_x-1.0.tar.xz", "sha256": "0" * 64,
                                   "size": "1"}
    package: dict[str, object] = {"name": "X", "version": "1.0", "linux-x86_64": artifact}
    top: dict[str, object] = {"release_label": "12.9.1", "cuda_x": package}
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from([artifact, package, top]))
        key = draw(st.sampled_from(["size", "sha256", "md5", "relative_path", "version",
                                    "name", "cuda_variant", "release_label", "cuda12",
                                    "linux-sbsa", "license_path"]) | st.text(max_size=8))
        where[key] = draw(_JSON | st.text(alphabet=st.characters(), max_size=30)
                          | st.integers(min_value=-(2**70), max_value=2**70))
    return top


@FUZZ
@given(manifests())
def test_fuzz_manifests(data: object) -> None:
    """Only ManifestError comes out of a manifest; what loads is usable by every tool (sizes
    are ints of 63 bits, paths relative, names identifiers)."""
    from cudasplit._release.manifest import PNAME, parse_manifest, select_artifacts

    try:
        manifest = parse_manifest(data, source="fuzz.json")
    except CudasplitError as exc:
        _note(f"manifest: {type(exc).__name__}")
        assert "\n" not in str(exc)
        return
    _note("manifest: accepted")
    for package in manifest.packages:
        assert PNAME.fullmatch(package.pname)
    for artifact in manifest.artifacts:
        assert 0 <= artifact.size < 2**63 and not artifact.relative_path.startswith("/")
        assert ".." not in artifact.relative_path.split("/") and artifact.filename
    select_artifacts(manifest, platforms=("linux",))
