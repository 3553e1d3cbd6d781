"""An archive with lib/12/ and lib/13/ and no CUDA version given keeps both, and says so
(issue 27, item 4)."""

from __future__ import annotations

from pathlib import Path

from cudasplit import SplitOptions, split_to_dir
from tests.support.builders import tree_from_reference

LINES = ["text LICENSE", "header include/cutensor.h",
         "elf-so lib/12/libcutensor.so.2.3.1", "elf-so lib/13/libcutensor.so.2.3.1"]


def _tree(tmp_path: Path) -> Path:
    top = "libcutensor-linux-x86_64-2.3.1.0-archive"
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{line.split(' ', 1)[0]} {top}/{line.split(' ', 1)[1]}\n"
                               for line in LINES))
    return tree_from_reference(listing, tmp_path / "tree")


def test_both_majors_kept_with_a_warning(tmp_path: Path) -> None:
    report = split_to_dir(_tree(tmp_path), tmp_path / "split", SplitOptions(patch=False))
    [warned] = [w for w in report.warnings if w.code == "cuda-major-unknown"]
    assert "lib/12/ and lib/13/" in warned.message and "(cuda_major 12|13)" in warned.message
    assert (tmp_path / "split/lib/lib/12/libcutensor.so.2.3.1").is_file()
    assert (tmp_path / "split/lib/lib/13/libcutensor.so.2.3.1").is_file()


def test_a_given_major_lifts_without_a_warning(tmp_path: Path) -> None:
    report = split_to_dir(_tree(tmp_path), tmp_path / "split",
                          SplitOptions(patch=False, cuda_major="13"))
    assert not [w for w in report.warnings if w.code == "cuda-major-unknown"]
    assert (tmp_path / "split/lib/lib/libcutensor.so.2.3.1").is_file()
    assert not (tmp_path / "split/lib/lib/12").exists()
