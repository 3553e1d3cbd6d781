"""The reader contract, one bounded fuzz target per reader of archive bytes.

``docs/explanation/security.md`` states one contract for every reader of archive bytes: time
linear in the bytes, memory bounded per file, what was dropped said once per file, a maximum for
every number, overlapping or repeated regions read once or refused, and an end when the run
ends. Each target here generates the shapes that broke it (overlap, repetition, long names,
long numbers, deep nesting), sized so that a reader of the old kind needed seconds to minutes
or gigabytes, and asserts on every example:

* only the reader's own outcome: a result or its documented error, nothing else;
* its CPU time (this thread's: other processes on a loaded machine do not count) under
  :data:`CPU` seconds;
* the peak of its Python allocations under a bound linear in the input
  (:func:`memory_bound`);
* for the readers that report problems: at most ``MAX_PROBLEMS`` lines and one more.

Bounded for CI: ``CUDASPLIT_CONTRACT_EXAMPLES`` examples per target (default 12; derandomized
unless ``CUDASPLIT_FUZZ_RANDOM`` is set); the whole file takes about 20 s on 2 cores.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cudasplit._elf.read import (
    MAX_PROBLEMS,
    PT_NOTE,
    Region,
    Stopped,
    dyn_names,
    has_build_id,
    open_raw,
    read_elf_info,
    read_exports,
    read_inside,
    read_sections,
)
from cudasplit.errors import CudasplitError, ElfError, ManifestError, RulesError
from tests.support import hostile_elf as h
from tests.support.budget import Spent, spend
from tests.support.fatbins import Entry, container, elf_with_sections

EXAMPLES = int(os.environ.get("CUDASPLIT_CONTRACT_EXAMPLES", "12"))
CONTRACT = settings(max_examples=EXAMPLES, derandomize=not os.environ.get("CUDASPLIT_FUZZ_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CPU = 2.0          # seconds of CPU per example; the old readers took 10 s to minutes
MiB = 1 << 20


def memory_bound(size: int) -> int:
    """Peak bytes a reader may allocate for an input of ``size`` bytes: a fixed 8 MiB and
    four times the input (a table read once, the names it holds decoded once)."""
    return 8 * MiB + 4 * size


@pytest.fixture
def on_disk() -> Iterator[Callable[[bytes], str]]:
    with tempfile.TemporaryDirectory() as tmp:
        count = iter(range(1 << 30))

        def write(data: bytes) -> str:
            path = Path(tmp) / f"f{next(count)}"
            path.write_bytes(data)
            return str(path)

        yield write


def _measured(call: Callable[[], Any], size: int, what: str,
              expected: tuple[type[BaseException], ...] = ()) -> Spent:
    spent = spend(call, expected)
    spent.within(cpu=CPU, memory=memory_bound(size), what=what)
    return spent


def _problems_capped(problems: tuple[str, ...] | list[str]) -> None:
    assert len(problems) <= MAX_PROBLEMS + 1, problems
    if len(problems) == MAX_PROBLEMS + 1:
        assert "more problems not listed" in problems[-1]


def _file(data: bytes) -> str:
    return _write_tmp(data, "")


_TMP = tempfile.mkdtemp(prefix="cudasplit-contract-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


def _write_tmp(data: bytes, suffix: str) -> str:
    fd, name = tempfile.mkstemp(suffix=suffix, dir=_TMP)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return name


def _run_file(data: bytes, call: Callable[[str], Any], what: str,
              expected: tuple[type[BaseException], ...] = ()) -> Spent:
    path = _file(data)
    try:
        return _measured(lambda: call(path), len(data), what, expected)
    finally:
        os.unlink(path)


# -- tar headers -------------------------------------------------------------------------------


def _tar_block(name: bytes, typeflag: bytes, size: int) -> bytes:
    block = bytearray(512)
    block[0:len(name[:100])] = name[:100]
    block[100:108] = b"0000644\0"
    block[124:136] = f"{size:011o}\0".encode()
    block[136:148] = b"00000000000\0"
    block[156:157] = typeflag
    block[257:263] = b"ustar\0"
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}\0 ".encode()
    return bytes(block)


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


@st.composite
def tar_streams(draw: st.DrawFn) -> bytes:
    """Pax headers of many (repeated) records, GNU long names up to past their cap, chains of
    extended headers, numbers with many digits; then a member and the end marker."""
    out = bytearray()
    for _ in range(draw(st.integers(1, 40))):
        shape = draw(st.sampled_from(["pax", "long", "digits", "member"]))
        if shape == "pax":
            record = b"path=" + b"a" * draw(st.integers(1, 200))
            line = b" " + record + b"\n"
            line = str(len(line) + len(str(len(line)))).encode() + line
            body = line * draw(st.integers(1, 4000))
            out += _tar_block(b"././@PaxHeader", b"x", len(body)) + _padded(body)
        elif shape == "long":
            body = b"n" * draw(st.integers(1, 70_000)) + b"\0"
            out += _tar_block(b"././@LongLink", b"L", len(body)) + _padded(body)
        elif shape == "digits":
            digits = b"9" * draw(st.integers(1, 5000))
            line = b" size=" + digits + b"\n"
            line = str(len(line) + len(str(len(line)))).encode() + line
            out += _tar_block(b"././@PaxHeader", b"x", len(line)) + _padded(line)
        else:
            out += _tar_block(b"top/x", b"0", 0)
    out += _tar_block(b"top/end", b"0", 0) + b"\0" * 1024
    return bytes(out)


@CONTRACT
@given(tar_streams())
@example(_tar_block(b"././@PaxHeader", b"x", 1 << 20) + b"\0" * 512)   # a cap, not a read
@example(b"".join(_tar_block(b"top/x", b"0", 0) for _ in range(3000)) + b"\0" * 1024)
def test_tar_headers(data: bytes) -> None:
    from cudasplit._source import TarFormatError, TarReader

    charged = [0]

    def read_all() -> int:
        reader = TarReader(io.BytesIO(data), lambda n: charged.__setitem__(0, charged[0] + n))
        count = 0
        while reader.next() is not None:
            count += 1
        return count

    _measured(read_all, len(data), "tar headers", (TarFormatError,))
    # Every extended header is charged to the bomb guard before it is read, at most its cap.
    assert charged[0] <= 16 * MiB


# -- ELF headers: the loader's view --------------------------------------------------------------


@st.composite
def loader_files(draw: st.DrawFn) -> bytes:
    """Interpreters without an end, dynamic arrays without DT_NULL, DT_NEEDED entries that all
    name one long string (each a MemoryError or a quadratic scan before)."""
    shape = draw(st.sampled_from(["interp", "dynamic", "needed"]))
    if shape == "interp":
        return h.loader_strings(interp=draw(st.integers(1, 4 * MiB)))
    if shape == "dynamic":
        return h.loader_strings(dynamic=draw(st.integers(1, 200_000)))
    return h.loader_strings(needed=draw(st.integers(1, 30_000)),
                            string=draw(st.integers(1, 200_000)))


@CONTRACT
@given(loader_files())
@example(h.loader_strings(interp=4 * MiB))
@example(h.loader_strings(dynamic=200_000))
@example(h.loader_strings(needed=20_000, string=60_000))     # a MemoryError before
@example(h.loader_strings(needed=20_000, string=1 << 20))
def test_elf_headers(data: bytes) -> None:
    def both(path: str) -> object:
        read_elf_info(path)
        return dyn_names(open_raw(path))

    _run_file(data, both, "ELF headers", (CudasplitError,))


# -- sections ------------------------------------------------------------------------------------


@st.composite
def section_tables(draw: st.DrawFn) -> bytes:
    """Many headers over the same bytes, names sharing tails, counts that claim more than the
    file or the cap, a name table without ends."""
    count = draw(st.integers(1, 3000))
    name = draw(st.sampled_from([".nv_fatbin", ".text", "x" * 3000]))
    sections = [h.Sec(name, b"\0" * draw(st.integers(0, 4096)))]
    sections += [h.Sec(name, same_as=name) for _ in range(count)]
    data = bytearray(h.elf_file(sections))
    if draw(st.booleans()):   # e_shnum 0: the count is read from entry 0's sh_size
        struct.pack_into("<H", data, 60, 0)
        shoff = struct.unpack_from("<Q", data, 40)[0]
        struct.pack_into("<Q", data, shoff + 32, draw(st.sampled_from([1 << 18, 1 << 40])))
    return bytes(data)


@CONTRACT
@given(section_tables())
@example(h.elf_file([h.Sec(".nv_fatbin", b"\0" * 4096)]
                    + [h.Sec(".nv_fatbin", same_as=".nv_fatbin")] * 3000))
def test_sections(data: bytes) -> None:
    def walk(path: str) -> int:
        with open(path, "rb") as fh:
            region = Region(fh.fileno(), 0, len(data), path)
            table = read_sections(region)
            assert table is not None
            return sum(1 for _ in table.named(".nv_fatbin")) + sum(1 for _ in table.of_type(1))

    _run_file(data, walk, "sections")


# -- symbol tables -------------------------------------------------------------------------------


@st.composite
def symbol_files(draw: st.DrawFn) -> bytes:
    """N symbols naming one long string, or each a suffix of it (N x S names before)."""
    count = draw(st.integers(1, 20_000))
    length = draw(st.integers(1, 300_000))
    if draw(st.booleans()):
        return h.symbol_product(count, length, defined=draw(st.booleans()))
    return h.symbol_suffixes(min(count, length), length)


@CONTRACT
@given(symbol_files())
@example(h.symbol_product(8000, 1 << 20))         # 8 GB of names before
@example(h.symbol_product(8000, 1 << 20, defined=False))
@example(h.symbol_suffixes(8000, 300_000))
def test_symbol_tables(data: bytes) -> None:
    problems: list[str] = []
    _run_file(data, lambda path: read_exports(path, problems), "symbol tables")
    _problems_capped(problems)
    spent = _run_file(data, read_inside, "symbol tables (floor)")
    _problems_capped(spent.result.problems)


# -- version needs ---------------------------------------------------------------------------------


@st.composite
def version_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """Versions of thousands of digits; need chains of many records and aux records."""
    if draw(st.booleans()):
        return "sections", h.glibc_digits(draw(st.integers(1, 20_000)))
    return "loader", h.version_chain(draw(st.integers(1, 3000)), aux=draw(st.integers(1, 40)))


@CONTRACT
@given(version_files())
@example(("sections", h.glibc_digits(5000)))       # int() raised before
@example(("loader", h.version_chain(3000, aux=40)))
def test_version_needs(case: tuple[str, bytes]) -> None:
    view, data = case
    if view == "sections":
        spent = _run_file(data, read_inside, "version needs")
        for need in spent.result.floors:
            assert len(need.version) <= 8 * 10
        _problems_capped(spent.result.problems)
    else:
        _run_file(data, lambda path: dyn_names(open_raw(path)), "version chain",
                  (ElfError,))


# -- notes -----------------------------------------------------------------------------------------


@CONTRACT
@given(st.integers(1, 60_000), st.sampled_from([0, 4, 1 << 31]), st.sampled_from([0, 1 << 31]))
@example(60_000, 0, 0)
def test_notes(count: int, namesz: int, descsz: int) -> None:
    data = h.notes(count, namesz=namesz, descsz=descsz)

    def scan(path: str) -> list[bool]:
        elf = open_raw(path)
        return [has_build_id(elf, ph) for ph in elf.phdrs if ph.p_type == PT_NOTE]

    _run_file(data, scan, "notes", (ElfError,))


# -- fatbinaries -----------------------------------------------------------------------------------


@st.composite
def fatbin_files(draw: st.DrawFn) -> bytes:
    """Hundreds of section headers over one fatbinary; many tiny entries; many kinds."""
    if draw(st.booleans()):
        return h.overlapping_fatbins(draw(st.integers(2, 600)), draw(st.integers(1, 2000)))
    entries = [Entry("sass", draw(st.integers(1, 100_000)), payload=b"")
               for _ in range(draw(st.integers(1, 3000)))]
    return elf_with_sections({".nv_fatbin": container(*entries)})


@CONTRACT
@given(fatbin_files())
@example(h.overlapping_fatbins(300, 16_384))       # minutes and a MemoryError before
def test_fatbinaries(data: bytes) -> None:
    spent = _run_file(data, read_inside, "fatbinaries")
    inside = spent.result
    assert sum(code.entries for code in inside.gpu) <= len(data) // 64
    _problems_capped(inside.problems)


# -- ar archives -----------------------------------------------------------------------------------


@st.composite
def archives(draw: st.DrawFn) -> bytes:
    """Members named into a long-name table without ends; many damaged members; BSD names
    claiming more than there is."""
    shape = draw(st.sampled_from(["long", "damaged", "bsd"]))
    if shape == "long":
        return h.long_name_archive(draw(st.integers(1, 3000)),
                                   draw(st.integers(1, 4 * MiB)))
    if shape == "damaged":
        return h.damaged_archive(draw(st.integers(1, 6000)))
    member = b"#1/" + str(draw(st.integers(1, 10**12))).encode()
    header = member.ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2 + b"644".ljust(8) + \
        b"8".ljust(10) + b"`\n"
    return b"!<arch>\n" + (header + b"x" * 8) * draw(st.integers(1, 5000))


@CONTRACT
@given(archives())
@example(h.long_name_archive(1000, 4 * MiB))       # a scan of the table per name before
@example(h.damaged_archive(6000))
def test_ar_archives(data: bytes) -> None:
    spent = _run_file(data, read_inside, "ar archives")
    _problems_capped(spent.result.problems)


# -- manifests -------------------------------------------------------------------------------------


@st.composite
def manifest_texts(draw: st.DrawFn) -> bytes:
    """JSON nested deeply, with many keys, long strings, numbers of thousands of digits, or
    past the size cap."""
    shape = draw(st.sampled_from(["deep", "keys", "digits", "long", "lists"]))
    n = draw(st.integers(1, 200_000))
    if shape == "deep":
        return b"[" * n + b"]" * n
    if shape == "keys":
        return json.dumps({f"cuda_{i}": {"name": "x", "version": "1.0"}
                           for i in range(n // 20 + 1)}).encode()
    if shape == "digits":
        return b'{"release_label": "1.0", "cuda_x": {"name": "x", "version": "1.0", ' \
            b'"linux-x86_64": {"relative_path": "a/b.tar.xz", "sha256": "' + b"0" * 64 + \
            b'", "size": ' + b"9" * min(n, 6000) + b"}}}"
    if shape == "long":
        return json.dumps({"release_label": "x" * n}).encode()
    return b"[" + b"[]," * n + b"[]]"


@CONTRACT
@given(manifest_texts())
@example(b"[" * 200_000 + b"]" * 200_000)
@example(b"[" + b"[]," * (2 * MiB) + b"[]]")        # past the cap: refused unparsed
def test_manifests(data: bytes) -> None:
    import cudasplit

    # json builds about 28 bytes of objects per byte of "[[],[],...]": the 4 MiB cap bounds it
    path = _write_tmp(data, ".json")
    try:
        spent = spend(lambda: cudasplit.releases.load_manifest(path), (ManifestError,))
    finally:
        os.unlink(path)
    spent.within(cpu=CPU, memory=8 * MiB + 40 * len(data), what="manifests")




# -- rule files ------------------------------------------------------------------------------------


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    """Dotted keys of thousands of parts, nesting thousands deep, many rules, long globs."""
    shape = draw(st.sampled_from(["dotted", "header", "nested", "inline", "rules", "globs"]))
    n = draw(st.integers(1, 100_000))
    if shape == "dotted":
        return "a" + ".a" * n + " = 1\n"
    if shape == "header":
        return "[" + ".".join(["t"] * (n % 5000 + 1)) + "]\n"
    if shape == "nested":
        return "a = " + "[" * n + "]" * n + "\n"
    if shape == "inline":
        return "a = " + "{b=" * n + "1" + "}" * n + "\n"
    if shape == "rules":
        return "".join(f'[[rule]]\nname = "r{i}"\nmatch = ["lib/**"]\noutput = "lib"\n'
                       for i in range(n // 50 + 1))
    return '[[rule]]\nname = "g"\nmatch = ["' + "*a" * (n % 3000 + 1) + '*b"]\noutput = "lib"\n'


@CONTRACT
@given(rule_texts())
@example("a" + ".a" * 100_000 + " = 1\n")          # the OOM killer before
@example("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
@example('[package]\ndlopen = [{ package = "x", since = "' + "1" * 5000 + '" }]\n')
def test_rule_files(text: str) -> None:
    import cudasplit

    path = _write_tmp(text.encode(), ".toml")
    try:
        spent = spend(lambda: cudasplit.rules.check_rule_file(path), (RulesError,))
    finally:
        os.unlink(path)
    spent.within(cpu=CPU, memory=memory_bound(len(text)), what="rule files")


# -- the stop check --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["archive", "fatbin", "symbols"])
def test_a_read_stops_when_the_run_stops(shape: str, on_disk: Callable[[bytes], str]) -> None:
    """``stop()`` is asked inside every long loop: an archive of 20,000 members, a
    fatbinary of 60,000 entries, a table of 200,000 symbols each end within a few thousand
    steps of the run's end."""
    data = {"archive": lambda: h.damaged_archive(20_000),
            "fatbin": lambda: h.overlapping_fatbins(1, 60_000),
            "symbols": lambda: h.symbol_product(200_000, 8)}[shape]()
    path = on_disk(data)
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return asked[0] > 2

    reader = read_exports if shape == "symbols" else read_inside
    with pytest.raises(Stopped):
        reader(path, stop=stop)
    assert asked[0] == 3
    assert isinstance(Stopped(), OSError)   # what the callers already take as "not read"
