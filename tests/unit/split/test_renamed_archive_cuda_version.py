"""A renamed archive (``--package cuda_cudart --strip-components 1``, the documented recipe)
has no version in its name: the package table's CUDA-gated entries must not act as for any
release. ``.pc`` edits read the file's own release (``cudart-12.9.pc``, or ``Version:``);
other gated entries say ``--cuda-version`` is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudasplit import SplitOptions, package_id, split_to_dir
from tests.support.builders import have_compiler, tree_from_reference, write_tarball
from tests.support.paths import DATA

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")

TREES = DATA / "trees" / "packages"


def _renamed(tmp_path: Path, pname: str, top: str, *, cuda: str | None = None) -> Path:
    """The reference tree of ``pname`` under ``top``/ (its NVIDIA name gone); ``cuda``
    renames its ``.pc`` files to that release, as a CUDA 13 archive names them."""
    tree = tree_from_reference(TREES / f"{pname}.txt", tmp_path / "ref")
    renamed = tmp_path / "renamed" / top
    shutil.copytree(tree, renamed, symlinks=True)
    for pc in renamed.rglob("*-12.9.pc"):
        if cuda is not None:
            text = pc.read_text().replace("Version: 12.9", f"Version: {cuda}")
            pc.with_name(pc.name.replace("12.9", cuda)).write_text(text)
            pc.unlink()
    return write_tarball(renamed, tmp_path / f"{top}.tar.xz", "xz")


def _split(archive: Path, out: Path, pname: str, **options: object) -> object:
    return split_to_dir(archive, out, SplitOptions(
        package=package_id(pname), strip_components=1, jobs=1, **options))  # type: ignore[arg-type]


def test_a_12_9_cudart_gets_no_cuda_13_edit(tmp_path: Path) -> None:
    archive = _renamed(tmp_path, "cuda_cudart", "cudart-12.9")
    report = _split(archive, tmp_path / "out", "cuda_cudart", strict=True)  # used to exit 1
    assert [w.code for w in report.warnings] == []  # type: ignore[attr-defined]
    pc = (tmp_path / "out/out/share/pkgconfig/cudart-12.9.pc").read_text()
    assert "crt" not in pc and "cccl" not in pc


def test_a_13_0_cudart_gets_it(tmp_path: Path) -> None:
    archive = _renamed(tmp_path, "cuda_cudart", "cudart-13.0", cuda="13.0")
    report = _split(archive, tmp_path / "out", "cuda_cudart")
    wanted = {(w.code, w.path) for w in report.warnings}  # type: ignore[attr-defined]
    assert wanted == {("package-root-missing", "cudart-13.0.pc")}  # crt and cccl roots
    roots = (("cuda_crt", str(tmp_path)), ("cuda_cccl", str(tmp_path)))
    _split(archive, tmp_path / "out2", "cuda_cudart", package_roots=roots)
    pc = (tmp_path / "out2/out/share/pkgconfig/cudart-13.0.pc").read_text()
    assert f"-I{tmp_path}/include" in pc


def test_other_gated_entries_say_cuda_version_is_missing(tmp_path: Path) -> None:
    archive = _renamed(tmp_path, "cuda_nvcc", "nvcc")
    report = _split(archive, tmp_path / "out", "cuda_nvcc")
    [unknown] = [w for w in report.warnings if w.code == "cuda-version-unknown"]  # type: ignore[attr-defined]
    assert "(cuda_version X.Y)" in unknown.message and "copy_packages" in unknown.message
    told = _split(archive, tmp_path / "out2", "cuda_nvcc", cuda_version="12.9")
    assert "cuda-version-unknown" not in [w.code for w in told.warnings]  # type: ignore[attr-defined]
    named = _split(archive, tmp_path / "out3", "cuda_nvcc-linux-x86_64-12.9.86")
    assert "cuda-version-unknown" not in [w.code for w in named.warnings]  # type: ignore[attr-defined]
