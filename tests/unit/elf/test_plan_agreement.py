"""``inspect``, ``--dry-run`` and the real split plan the same edit for every ELF file of every
test tarball (issue 11: one planned value per file, whatever the caller)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudasplit import Report, RunpathPolicy, SplitOptions, inspect, split_to_dir
from tests.support.builders import COMPRESSIONS
from tests.support.tarutil import write_archive
from tests.unit.split.test_pipeline import ENTRIES

COMPAT = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.9/compat"
POLICY = RunpathPolicy(cuda_compat=COMPAT, interpreters=(("x86_64", "/nix/ld.so"),))
EDITED = {"planned", "in-place", "append", "lief", "unchanged"}


def plans(report: Report, roots: dict[str, str] | None = None) -> dict[str, tuple[object, ...]]:
    """Per ELF member: what is planned, with inspect's ``/${output}`` roots made real."""
    def real(value: str | None) -> str | None:
        for name, root in (roots or {}).items():
            value = None if value is None else value.replace("/${" + name + "}", root)
        return value
    return {m.path: (m.output, m.dest, real(m.runpath_after), m.runpath_tag,
                     m.interpreter_after, tuple(m.needed_unresolved or ()),
                     "edit" if m.patch in EDITED else m.patch)
            for m in report.members if m.kind.startswith("elf")}


def _sources(redist_tarballs: dict[str, Path], reference_trees: dict[str, Path],
             tmp_path: Path) -> list[Path]:
    pipeline = write_archive(tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz",
                             ENTRIES)
    return [*(redist_tarballs[c] for c in COMPRESSIONS), *reference_trees.values(), pipeline]


def test_inspect_dry_run_and_real_split_agree(redist_tarballs: dict[str, Path],
                                              reference_trees: dict[str, Path],
                                              tmp_path: Path) -> None:
    options = SplitOptions(runpath=POLICY, jobs=2)
    checked = 0
    for number, source in enumerate(_sources(redist_tarballs, reference_trees, tmp_path)):
        out = tmp_path / f"out{number}"
        roots = {name: str(out.resolve() / name) for name in
                 ("out", "bin", "lib", "dev", "include", "static", "stubs", "doc", "samples",
                  "python", "src", "nvvm")}
        real = plans(split_to_dir(source, out, options))
        dry = plans(split_to_dir(source, out, SplitOptions(runpath=POLICY, dry_run=True)))
        viewed = plans(inspect(source, SplitOptions(runpath=POLICY)), roots)
        assert real == dry, source
        assert real == viewed, source
        checked += sum(v[-1] == "edit" for v in real.values())
    assert checked > 50


@pytest.mark.parametrize("jobs", [1, 3])
def test_early_patching_does_not_change_plans(redist_tarballs: dict[str, Path], tmp_path: Path,
                                              jobs: int) -> None:
    """Early patching runs on a worker while members still stream: its result must not
    depend on timing (the same plans with one job or several)."""
    source = redist_tarballs["zst"]
    dry = plans(split_to_dir(source, tmp_path / "o", SplitOptions(runpath=POLICY, dry_run=True)))
    real = plans(split_to_dir(source, tmp_path / "o", SplitOptions(runpath=POLICY, jobs=jobs)))
    assert real == dry
