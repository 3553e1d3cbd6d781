"""Hostile input: the catalog of named archives (tests/hostile.py) and generated archives.

Each run has a canary file and an empty directory next to the output directory; after the run
every entry outside the output directory must be byte-for-byte, mode-for-mode unchanged, and
every symlink inside the outputs must resolve inside them. Refused archives leave the output
directory empty (no output, no staging directory); the CLI says so in one line, exit code 2.

The generated-archive property runs ``CUDASPLIT_HYPOTHESIS_EXAMPLES`` examples (default 40).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cudasplit import Report, SplitOptions, inspect, split_to_dir
from cudasplit._elf.patch import set_runpath
from cudasplit.cli import main
from cudasplit.errors import CudasplitError, ElfError, OutputError, PatchError
from tests.support.hostile import (
    ELF64_DYN,
    HUGE_PHNUM_ELF,
    OVERLAPPING_ELF,
    Accept,
    Case,
    Ctx,
    Refuse,
    case_names,
    catalog,
)
from tests.support.tarutil import TOP, compress

CATALOG = catalog()
EXAMPLES = int(os.environ.get("CUDASPLIT_HYPOTHESIS_EXAMPLES", "40"))
CANARY = b"canary: must never change\n"


def make_ctx(root: Path) -> Ctx:
    (root / "outside").mkdir()
    (root / "canary").write_bytes(CANARY)
    (root / "canary").chmod(0o640)
    return Ctx(root / "canary", root / "outside")


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Type, mode and content of everything under ``root`` except ``skip``."""
    state: dict[str, tuple[int, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            st_ = path.lstat()
            body: bytes | str | None = None
            if path.is_symlink():
                body = os.readlink(path)
            elif path.is_file():
                body = path.read_bytes()
            state[str(path.relative_to(root))] = (st_.st_mode, body)
    return state


def assert_links_inside(out: Path) -> None:
    real_out = os.path.realpath(out)
    for dirpath, dirnames, filenames in os.walk(out):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                resolved = os.path.realpath(path)
                assert resolved == real_out or resolved.startswith(real_out + os.sep), (
                    f"{path} -> {os.readlink(path)} resolves outside: {resolved}")


def assert_left_nothing(out: Path) -> None:
    leftovers = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert leftovers == [], leftovers


def options(case: Case, **extra: Any) -> SplitOptions:
    return SplitOptions(jobs=1, **{**case.options, **extra})


# -- the catalog -------------------------------------------------------------------------------


def test_catalog_is_large_enough() -> None:
    names = case_names(CATALOG)
    assert len(names) >= 25 and len(set(names)) == len(names)


@pytest.mark.parametrize("case", CATALOG, ids=case_names(CATALOG))
def test_hostile_archive(case: Case, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "src").mkdir()
    archive = case.write(tmp_path / "src", ctx)
    out = tmp_path / "out"
    before = snapshot(tmp_path, out)
    try:
        outcome: Report | CudasplitError = split_to_dir(archive, out, options(case))
    except CudasplitError as exc:
        outcome = exc
    assert snapshot(tmp_path, out) == before, "something outside the output dir changed"
    if isinstance(case.expect, Refuse):
        assert isinstance(outcome, case.expect.error), outcome
        message = str(outcome)
        assert case.expect.fragment in message and "\n" not in message, message
        if not isinstance(outcome, OutputError):  # sink errors name the file being written
            assert str(archive) in message
        assert_left_nothing(out)
        return
    assert isinstance(outcome, Report), f"refused: {outcome}"
    assert_links_inside(out)
    codes = {p.code for p in [*outcome.problems, *outcome.warnings]}
    assert set(case.expect.codes) <= codes, (codes, outcome.problems)
    if case.expect.check is not None:
        case.expect.check(out, outcome)
    assert not [p for p in out.iterdir() if p.name.startswith(".cudasplit-staging")]
    json.loads(outcome.to_json())


@pytest.mark.parametrize("case", CATALOG, ids=case_names(CATALOG))
def test_hostile_archive_through_cli(case: Case, tmp_path: Path) -> None:
    """Exit code 2 and one line on stderr for refusals; 0 and a JSON report otherwise."""
    ctx = make_ctx(tmp_path)
    (tmp_path / "src").mkdir()
    archive = case.write(tmp_path / "src", ctx)
    out, report = tmp_path / "out", tmp_path / "report" / "report.json"
    report.parent.mkdir()
    args = ["split", str(archive), "-o", str(out), "--report", str(report), "-j", "1"]
    if "max_total_bytes" in case.options:
        args += ["--max-size", str(case.options["max_total_bytes"])]
    if "max_ratio" in case.options:
        args += ["--max-ratio", str(case.options["max_ratio"])]
    if "max_members" in case.options:
        args += ["--max-members", str(case.options["max_members"])]
    if case.options.get("skip_unsafe_members"):
        args += ["--skip-unsafe-members"]
    before = snapshot(tmp_path, out)
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.exception)
    report_text = report.read_text() if report.exists() else None
    report.unlink(missing_ok=True)
    assert snapshot(tmp_path, out) == before
    if isinstance(case.expect, Refuse):
        assert result.exit_code == 2, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("cudasplit: error: "), result.stderr
        assert "Traceback" not in result.stderr
        assert_left_nothing(out)
    else:
        assert result.exit_code == 0, result.stderr
        assert report_text is not None
        json.loads(report_text)


@pytest.mark.parametrize("case", [c for c in CATALOG if isinstance(c.expect, Accept)],
                         ids=lambda c: c.name)
def test_accepted_hostile_archive_fails_under_strict_when_it_reports_problems(
        case: Case, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "src").mkdir()
    archive = case.write(tmp_path / "src", ctx)
    report = inspect(archive, options(case))
    json.loads(report.to_json())
    if report.problems:
        with pytest.raises(CudasplitError) as info:
            split_to_dir(archive, tmp_path / "out", options(case, strict=True))
        assert info.value.exit_code == 1
        assert_left_nothing(tmp_path / "out")


def test_existing_output_dir_is_not_touched(tmp_path: Path) -> None:
    from tests.support.tarutil import write_archive
    archive = write_archive(tmp_path / f"{TOP}.tar.xz", [("file", "lib/libx.so.1", b"x")])
    out = tmp_path / "out"
    (out / "lib").mkdir(parents=True)
    (out / "lib" / "keep").write_bytes(b"mine")
    with pytest.raises(CudasplitError, match="already exists"):
        split_to_dir(archive, out, SplitOptions(jobs=1))
    assert sorted(p.name for p in out.iterdir()) == ["lib"]
    assert (out / "lib" / "keep").read_bytes() == b"mine"


# -- generated archives ------------------------------------------------------------------------

BENIGN = ["lib", "include", "bin", "stubs", "a", "b.so", "libx.so.1", "x.pc", ".", ""]
HOSTILE = ["..", "d\nx", "\udcff", "n" * 260]
# Mostly benign names, so that most archives get past the name checks and exercise placement.
_component = st.sampled_from(BENIGN * 10 + HOSTILE)
_rel = st.lists(_component, min_size=1, max_size=4).map("/".join)
_target = st.one_of(_rel, _rel.map(lambda p: "/" + p), st.sampled_from(["CANARY", "OUTSIDE"]))
_payload = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=200).map(lambda b: ELF64_DYN + b),
    st.sampled_from([HUGE_PHNUM_ELF, OVERLAPPING_ELF, b"!<arch>\n", b"prefix=/usr\n"]),
)
_member = st.tuples(
    st.sampled_from(["file"] * 6 + ["dir"] * 2 + ["symlink"] * 6 + ["hardlink"] * 3 + ["fifo"]),
    _rel, _target, _payload, st.integers(0, 0o7777))


def _generated_tar(members: list[tuple[str, str, str, bytes, int]], ctx: Ctx,
                   with_top: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as archive:
        prefix = f"{TOP}/" if with_top else ""
        for kind, name, target, data, mode in members:
            target = {"CANARY": str(ctx.canary), "OUTSIDE": str(ctx.outside)}.get(target, target)
            info = tarfile.TarInfo(prefix + name)
            info.mode = mode
            if kind == "file":
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = (prefix + target) if kind == "hardlink" else target
            archive.addfile(info)
    return buf.getvalue()


@st.composite
def archives(draw: st.DrawFn, ctx: Ctx) -> tuple[bytes, str]:
    members = draw(st.lists(_member, max_size=12))
    data = _generated_tar(members, ctx, draw(st.booleans()))
    # Cut points are drawn as fractions: the canary's temporary path changes the lengths.
    if draw(st.booleans()):
        data = data[: len(data) * draw(st.integers(0, 1000)) // 1000]
    codec = draw(st.sampled_from(["none", "xz", "gz", "zst"]))
    if codec != "none":
        data = compress(data, codec)
        if draw(st.integers(0, 3)) == 0:
            data = data[: len(data) * draw(st.integers(0, 1000)) // 1000]
    return data, {"none": ".tar", "xz": ".tar.xz", "gz": ".tar.gz", "zst": ".tar.zst"}[codec]


def _run_generated(root: Path, data: bytes, suffix: str) -> None:
    make_ctx(root)
    archive = root / f"{TOP}{suffix}"
    archive.write_bytes(data)
    out = root / "out"
    before = snapshot(root, out)
    with contextlib.suppress(CudasplitError):
        inspect(archive, SplitOptions(jobs=1))
    try:
        split_to_dir(archive, out, SplitOptions(jobs=1))
    except CudasplitError as exc:
        event(f"refused: {type(exc).__name__}")
        assert "\n" not in str(exc)
        assert_left_nothing(out)
    else:
        event("split completed")
        assert_links_inside(out)
    assert snapshot(root, out) == before


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_generated_archives_never_escape_or_crash(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ctx = Ctx(root / "canary", root / "outside")
        archive, suffix = data.draw(archives(ctx))
        _run_generated(root, archive, suffix)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.one_of(
    st.binary(max_size=300).map(lambda b: ELF64_DYN + b),
    st.tuples(st.sampled_from([HUGE_PHNUM_ELF, OVERLAPPING_ELF]), st.integers(0, 511),
              st.integers(0, 255)).map(lambda t: t[0][:t[1]] + bytes([t[2]]) + t[0][t[1] + 1:]),
))
def test_patcher_on_damaged_elf_raises_only_cudasplit_errors(blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "libx.so"
        path.write_bytes(blob)
        try:
            set_runpath(path, "$ORIGIN")
        except (ElfError, PatchError):
            assert path.read_bytes() == blob, "a refused file must stay byte-identical"


def test_generated_examples_setting_is_reported() -> None:
    """Shows in ``-rA`` output how many generated archives ran."""
    print(f"hypothesis examples per property: {EXAMPLES}")

