"""Fuzz target: the fatbinary, archive and symbol-version readers on hostile bytes.

Seeds are well-formed objects and archives (tests/support/fatbins.py); hypothesis mutates them
(bytes planted at any offset, huge and zero counts and sizes, truncation, repeated blocks) and
each result is read as one file would be in a split. Nothing but a result may come out: no
exception, no run longer than a few seconds, no entry count above what the bytes can hold
(one entry per 64 bytes), never more rows than the cap.

Bounded for CI like the other fuzz targets: ``CUDASPLIT_FUZZ_EXAMPLES`` examples (default 150,
derandomized unless ``CUDASPLIT_FUZZ_RANDOM`` is set).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudasplit._elf.read import MAX_ARCH_ROWS, fatbin_entries, read_exports, read_inside
from tests.support.fatbins import Entry, ar_archive, container, elf_with_sections, fatbin_object

EXAMPLES = int(os.environ.get("CUDASPLIT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                derandomize=not os.environ.get("CUDASPLIT_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
SECONDS_PER_CASE = 5.0

_FAT = container(Entry("sass", 75), Entry("sass", 90, "a", extra_header=48),
                 Entry("ptx", 120, payload=b"x" * 40, compressed=True, unpacked=900),
                 Entry("ltoir", 100, "f"))
SEEDS = [
    fatbin_object(_FAT, container(Entry("sass", 80))),
    fatbin_object(_FAT, section="__nv_relfatbin"),
    ar_archive({"a.o": fatbin_object(_FAT), "long_member_name_here.o": fatbin_object(_FAT)}),
    elf_with_sections({".nv_fatbin": _FAT, "__nv_relfatbin": _FAT, ".text": b"\xc3" * 9}),
]
INTERESTING = [b"\0" * 8, b"\xff" * 8, (2**63).to_bytes(8, "little"), b"\x50\xed\x55\xba",
               (2**32 - 1).to_bytes(4, "little"), (64).to_bytes(4, "little"),
               (1).to_bytes(8, "little"), b"!<arch>\n", b"`\n", b"/0  ", b"#1/99999"]


@st.composite
def hostile(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(("plant", "flip", "truncate", "repeat")))
        if action == "plant":
            value = draw(st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=8))
            data[at:at + len(value)] = value
        elif action == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "truncate":
            del data[max(at, 8):]
        else:
            block = data[at:at + draw(st.integers(1, 200))]
            data[at:at] = block * draw(st.integers(1, 20))
    return bytes(data)


@FUZZ
@given(data=hostile())
def test_hostile_fatbins_give_problems_not_crashes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "hostile.so"
    path.write_bytes(data)
    start = time.monotonic()
    inside = read_inside(path)
    problems: list[str] = []
    entries = sum(1 for _ in fatbin_entries(path, problems))
    read_exports(path, [])
    assert time.monotonic() - start < SECONDS_PER_CASE
    assert entries <= len(data) // 64 + 1
    if inside is not None:
        assert len(inside.gpu) <= MAX_ARCH_ROWS
        assert all(isinstance(p, str) and "\n" not in p for p in inside.problems)
