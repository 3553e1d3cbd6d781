"""What is inside a release, end to end on small built archives: the split report's GPU code and
glibc floors, --max-glibc, the prune plan's rules, the SBOM, and the diff of two releases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from cudasplit import (
    OptionsError,
    ProblemsFound,
    Progress,
    SourceNotFoundError,
    SplitOptions,
    inspect,
    split_to_dir,
)
from cudasplit._release.pruneplan import parse_capabilities, runs_on
from cudasplit.cli import main
from cudasplit.elf import gpu_prune_plan
from cudasplit.releases import diff_releases
from cudasplit.sbom import sbom
from tests.support.builders import compile_shared
from tests.support.fatbins import Entry, ar_archive, container, fatbin_object
from tests.support.paths import REPO
from tests.support.tarutil import write_archive

TOP12 = "cuda_cudart-linux-x86_64-12.9.79-archive"
TOP13 = "cuda_cudart-linux-x86_64-13.0.96-archive"
SOURCE = "#include <math.h>\ndouble f(double x) { return log2(x); }\n"

OLD_FAT = container(Entry("sass", 50), Entry("sass", 70), Entry("sass", 80), Entry("ptx", 80))
NEW_FAT = container(Entry("sass", 75), Entry("sass", 80), Entry("sass", 90, "a"),
                    Entry("ptx", 90))


def _tarball(tmp_path: Path, name: str, fat: bytes, top: str = TOP12,
             lib: Path | None = None) -> Path:
    entries: list[tuple[str, ...] | tuple[str, str, bytes]] = [
        ("file", "lib/libcudadevrt.a", ar_archive({"devrt.o": fatbin_object(
            fat, section="__nv_relfatbin")})),
        ("file", "include/cuda_runtime.h", b"/* header */\n"),
    ]
    if lib is not None:
        entries.append(("file", "lib/libcudart.so.12", lib.read_bytes()))
    return write_archive(tmp_path / name, entries, codec="gz", top=top)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    return compile_shared(tmp_path_factory.mktemp("lib"), "libcudart.so.12", SOURCE,
                          soname="libcudart.so.12", extra=["-lm"])


def test_report_carries_gpu_code_and_glibc_floor(tmp_path: Path, lib: Path) -> None:
    report = inspect(_tarball(tmp_path, "a.tar.gz", OLD_FAT, lib=lib))
    devrt = report.member("lib/libcudadevrt.a")
    assert [(r["kind"], r["arch"]) for r in devrt.gpu or []] == [
        ("sass", "sm_50"), ("sass", "sm_70"), ("sass", "sm_80"), ("ptx", "sm_80")]
    floor = report.member("lib/libcudart.so.12").glibc
    assert floor and floor[0]["prefix"] == "GLIBC" and floor[0]["symbol"]
    data = report.as_dict()
    assert [r["arch"] for r in data["inside"]["gpu"]] == ["sm_50", "sm_70", "sm_80", "sm_80"]
    assert data["inside"]["glibc"][0]["path"] == "lib/libcudart.so.12"
    schema = json.loads((REPO / "cudasplit" / "schemas" / "report.json").read_text())
    jsonschema.validate(data, schema)
    # A written split reads the same from its staged files, on the worker thread.
    written = split_to_dir(_tarball(tmp_path, "b.tar.gz", OLD_FAT, lib=lib), tmp_path / "out")
    assert written.member("lib/libcudadevrt.a").gpu == devrt.gpu
    # --no-inside: nothing read, the keys are absent
    bare = inspect(_tarball(tmp_path, "c.tar.gz", OLD_FAT, lib=lib),
                   SplitOptions(inside=False))
    assert "inside" not in bare.as_dict() and bare.member("lib/libcudadevrt.a").gpu is None


def test_max_glibc_fails_naming_file_and_symbol(tmp_path: Path, lib: Path) -> None:
    source = _tarball(tmp_path, "a.tar.gz", OLD_FAT, lib=lib)
    with pytest.raises(ProblemsFound) as caught:
        split_to_dir(source, tmp_path / "out", SplitOptions(max_glibc="2.0"))
    symbol = inspect(source).member("lib/libcudart.so.12").glibc[0]["symbol"]  # type: ignore[index]
    assert "lib/libcudart.so.12: needs GLIBC_" in str(caught.value)
    assert f"symbol {symbol} from libm.so.6" in str(caught.value)
    assert not (tmp_path / "out").exists()          # nothing left behind
    split_to_dir(source, tmp_path / "ok", SplitOptions(max_glibc="99.0"))
    with pytest.raises(OptionsError):
        SplitOptions(max_glibc="2")
    result = CliRunner().invoke(main, ["inspect", "--max-glibc", "2.0", str(source)])
    assert result.exit_code == 1 and "symbol" in result.output


@pytest.mark.parametrize("kind, arch, target, ok", [
    ("sass", "sm_80", (8, 6), True), ("sass", "sm_86", (8, 0), False),
    ("sass", "sm_80", (9, 0), False), ("sass", "sm_90a", (9, 0), True),
    ("sass", "sm_90a", (9, 1), False), ("sass", "sm_100f", (10, 3), True),
    ("sass", "sm_100f", (12, 0), False), ("ptx", "sm_80", (12, 0), True),
    ("ptx", "sm_90", (8, 9), False), ("ptx", "sm_90a", (10, 0), False),
    ("ptx", "sm_100f", (10, 3), True), ("ptx", "sm_100f", (12, 0), False),
])
def test_compatibility_rules(kind: str, arch: str, target: tuple[int, int], ok: bool) -> None:
    assert runs_on(kind, arch, target) is ok


def test_capabilities_parse() -> None:
    assert parse_capabilities("8.0;9.0") == ((8, 0), (9, 0))
    assert parse_capabilities("sm_90a 8.6,75") == ((7, 5), (8, 6), (9, 0))
    with pytest.raises(OptionsError):
        parse_capabilities("hopper")


def test_prune_plan_keeps_what_each_gpu_uses(tmp_path: Path) -> None:
    fat = container(Entry("sass", 75), Entry("sass", 80), Entry("sass", 86), Entry("ptx", 80),
                    Entry("ptx", 90))
    only90 = container(Entry("sass", 90, "a"))
    path = tmp_path / "libk.so"
    path.write_bytes(fatbin_object(fat, only90))
    plan = gpu_prune_plan(path, "8.6 9.0")
    (file,) = plan.files
    # 8.6: its own SASS; 9.0: no SASS in the first container, so its highest PTX <= 9.0;
    # the second container's sm_90a runs on 9.0 only.
    assert file.kept == {("sass", "sm_86"): 1, ("ptx", "sm_90"): 1, ("sass", "sm_90a"): 1}
    assert file.dropped == {("sass", "sm_75"): 1, ("sass", "sm_80"): 1, ("ptx", "sm_80"): 1}
    assert file.uncovered == {"8.6": 1}            # the sm_90a-only container
    assert file.saved == sum(64 + 64 for _ in range(3))
    assert "saves" in "\n".join(plan.text_lines())


def test_an_architecture_kept_and_dropped_is_explained(tmp_path: Path) -> None:
    """``--gpu-archs 8.9``: a container with sm_86 drops its sm_80, one without keeps it; the
    file's keep and drop lists both name sm_80, and the text says why with the counts."""
    with_86 = container(Entry("sass", 80), Entry("sass", 86))
    without = container(Entry("sass", 80), Entry("sass", 90))
    path = tmp_path / "libk.so"
    path.write_bytes(fatbin_object(with_86, without, without))
    plan = gpu_prune_plan(path, "8.9")
    (file,) = plan.files
    assert file.kept == {("sass", "sm_86"): 1, ("sass", "sm_80"): 2}
    assert file.dropped == {("sass", "sm_80"): 1, ("sass", "sm_90"): 2}
    text = plan.text_lines()
    both = [line for line in text if line.startswith("  both:")]
    assert both == ["  both: sass sm_80, 2 kept and 1 dropped (chosen per container: kept where "
                    "it is the best code for 8.9, dropped where that GPU has better)"]


def test_prune_plan_json_has_its_schema(tmp_path: Path) -> None:
    from importlib import resources

    path = tmp_path / "libk.so"
    path.write_bytes(fatbin_object(container(Entry("sass", 80), Entry("ptx", 80),
                                             Entry("ltoir", 90))))
    result = CliRunner().invoke(main, ["gpu-plan", str(path), "--gpu-archs", "8.0", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == 1
    schema = json.loads((resources.files("cudasplit") / "schemas" / "gpu-plan.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    (file,) = data["files"]
    assert file["kept"] == [{"kind": "sass", "arch": "sm_80", "entries": 1}]
    assert file["dropped"] == [{"kind": "ltoir", "arch": "sm_90", "entries": 1},
                               {"kind": "ptx", "arch": "sm_80", "entries": 1}]


def test_prune_plan_of_a_missing_source_is_a_cudasplit_error(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="no such file"):
        gpu_prune_plan(tmp_path / "nonexistent", "8.0")
    with pytest.raises(FileNotFoundError):  # also what an OSError caller expects
        gpu_prune_plan(tmp_path / "nonexistent", "8.0")


def test_prune_plan_reports_progress(tmp_path: Path) -> None:
    """A tarball: members and the tar bytes read; a directory: its files."""
    import os

    from cudasplit._run import STEP

    big = fatbin_object(container(Entry("sass", 80, payload=b"\x7fELF" + os.urandom(STEP))))
    source = write_archive(tmp_path / f"{TOP12}.tar.zst", [
        ("file", "lib/libbig.so", big), ("file", "include/x.h", b"x")], codec="zst", top=TOP12)
    seen: list[Progress] = []
    plan = gpu_prune_plan(source, "8.0", progress=seen.append)
    assert [f.path for f in plan.files] == ["lib/libbig.so"]
    assert seen[-1].done and seen[-1].members == 2
    within = [p for p in seen if p.members == 0 and p.bytes > 0]  # inside the large member
    assert within and within[0].current == "lib/libbig.so"
    assert [(p.members, p.bytes) for p in seen] == sorted((p.members, p.bytes) for p in seen)
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("liba.so", "libb.so"):
        (tree / name).write_bytes(fatbin_object(OLD_FAT))
    seen.clear()
    plan = gpu_prune_plan(tree, "8.0", progress=seen.append)
    assert len(plan.files) == 2
    assert [(p.members, p.unit) for p in seen] == [(1, "file"), (2, "file"), (2, "file")]
    assert seen[-1].done


def test_sbom_is_valid_reproducible_and_complete(tmp_path: Path, lib: Path) -> None:
    pytest.importorskip("cyclonedx")
    source = _tarball(tmp_path, "a.tar.gz", OLD_FAT, lib=lib)
    first, second = sbom([source]), sbom([source])
    assert first == second
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(first) is None
    doc = json.loads(first)
    (package,) = doc["components"]
    assert package["name"] == "cuda_cudart" and package["version"] == "12.9.79"
    files = {c["name"]: c for c in package["components"]}
    devrt = files["lib/libcudadevrt.a"]
    props = {p["name"]: p["value"] for p in devrt["properties"]}
    assert props["cudasplit:gpu:sass"] == "sm_50,sm_70,sm_80"
    assert props["cudasplit:output"] and props["cudasplit:size"]
    import hashlib
    import tarfile
    with tarfile.open(source) as tar:
        member = tar.extractfile(f"{TOP12}/lib/libcudart.so.12")
        assert member is not None
        digest = hashlib.sha256(member.read()).hexdigest()
    assert files["lib/libcudart.so.12"]["hashes"][0]["content"] == digest
    assert "cudasplit:floor:GLIBC" in {p["name"] for p in
                                       files["lib/libcudart.so.12"]["properties"]}
    # a split directory: the files as written
    split_to_dir(source, tmp_path / "out")
    text = sbom([tmp_path / "out"], name="split", package=TOP12.removesuffix("-archive"))
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    result = CliRunner().invoke(main, ["sbom", str(source)])
    assert result.exit_code == 0 and result.output == first


def test_diff_lists_architectures_and_floors(tmp_path: Path, lib: Path) -> None:
    old = _tarball(tmp_path, "old.tar.gz", OLD_FAT, lib=lib)
    new = _tarball(tmp_path, "new.tar.gz", NEW_FAT, top=TOP13)
    diff = diff_releases(old, new)
    removed = {(c.path, c.old) for c in diff.of("gpu-removed")}
    added = {(c.path, c.new) for c in diff.of("gpu-added")}
    assert removed == {("sass", "sm_50"), ("sass", "sm_70"), ("ptx", "sm_80")}
    assert added == {("sass", "sm_75"), ("sass", "sm_90a"), ("ptx", "sm_90")}
    assert [c.path for c in diff.of("glibc-floor")] == ["GLIBC"]   # the library went away
    text = "\n".join(diff.text_lines())
    assert "- gpu cuda_cudart: sass sm_50, sm_70" in text
