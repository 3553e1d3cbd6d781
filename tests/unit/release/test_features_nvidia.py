"""``features`` against NVIDIA's own feature manifest (``feature_12.2.2.json``, issue 27).

Package by package where the tarball layout is known: each member list in
tests/data/trees/packages/ (a later release's layout, from PyPI wheels or Nixpkgs' package
files) is scanned and compared with NVIDIA's linux-x86_64 flags. Where a list cannot show what
NVIDIA's 12.2.2 archive held, the difference is listed below with the reason; the test fails
when the set of differences changes either way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudasplit.releases import features_of
from tests.support.builders import have_compiler, tree_from_reference
from tests.support.paths import DATA

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")

NVIDIA = json.loads((DATA / "manifests/feature_12.2.2.json").read_text())
LISTS = DATA / "trees/packages"
# pname -> (the flags that differ, why): the lists' layouts are not NVIDIA's 12.2.2 archives.
LAYOUT_UNKNOWN = {
    "cuda_cuxxfilt": ({"bin", "static"}, "the 12.9 wheel has neither bin/cu++filt nor "
                      "lib/libcufilt.a, which the 12.2.2 archive had"),
    "cuda_nsight": ({"bin"}, "no wheel; the list has no bin/nsight launcher"),
    "cuda_nvcc": ({"static"}, "the 12.9 wheel has no lib/libnvptxcompiler_static.a"),
    "cuda_nvprof": ({"dev"}, "no wheel; the list has include/, NVIDIA's 12.2.2 archive none"),
    "libcufile": ({"sample"}, "the 12.9 wheel has no samples/"),
    "nsight_compute": ({"bin"}, "no wheel; the list is the nested 2025.2 layout, no bin/"),
}


def _comparable() -> list[str]:
    return sorted(p for p, plats in NVIDIA.items()
                  if "linux-x86_64" in plats and (LISTS / f"{p}.txt").is_file())


def test_most_packages_are_comparable() -> None:
    assert len(_comparable()) >= 30 and set(LAYOUT_UNKNOWN) <= set(_comparable())


@pytest.mark.parametrize("pname", _comparable())
def test_known_layout_matches_nvidia(pname: str, tmp_path: Path) -> None:
    top = tree_from_reference(LISTS / f"{pname}.txt", tmp_path / pname)
    got = features_of(top).outputs()
    want = NVIDIA[pname]["linux-x86_64"]["outputs"]
    differing = {k for k in want if want[k] != got[k]}
    assert differing == LAYOUT_UNKNOWN.get(pname, (set(), ""))[0], (want, got)


def test_cupti_doc_is_false_on_every_platform_as_nvidia_says(tmp_path: Path) -> None:
    """NVIDIA counts only share/{doc,info,man,gtk-doc,devhelp}; cupti's doc/ is not one."""
    assert {p: v["outputs"]["doc"] for p, v in NVIDIA["cuda_cupti"].items()} == dict.fromkeys(
        NVIDIA["cuda_cupti"], False)
    listing = tmp_path / "cupti.txt"
    listing.write_text("text cuda_cupti-linux-x86_64-12.2.142-archive/doc/Cupti/index.html\n"
                       "header cuda_cupti-linux-x86_64-12.2.142-archive/include/cupti.h\n")
    assert features_of(tree_from_reference(listing, tmp_path / "a")).doc is False
    for where in ("share/doc/x/README", "share/gtk-doc/html/x.html", "share/devhelp/x"):
        listing.write_text(f"text cuda_x-linux-x86_64-1.0-archive/{where}\n")
        assert features_of(tree_from_reference(listing, tmp_path / where)).doc is True, where
