"""cuda-compat from NVIDIA's compat archive and from the driver archive conda-forge uses: the
four libraries and the links the recipe makes, in $PREFIX/cuda-compat, and the versions of
the two packages (the driver's, the CUDA release's)."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from cudasplit import RepackOptions, SplitOptions, repack_to_dir, split_to_dir
from cudasplit._release.conda import conda_profile, outputs_for
from cudasplit._rulebook import default_rules_dir
from tests.conda.feedstock import Member, install_prefix, packaged, select
from tests.conda.synthetic import DRIVER, compat_tarball
from tests.support.builders import dynamic_entries


def _members(tarball_dir: Path) -> list[Member]:
    top = next((tarball_dir / "tree").iterdir())
    found = []
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            path = Path(dirpath, name)
            found.append(Member(path.relative_to(top).as_posix(),
                                os.readlink(path) if path.is_symlink() else None))
    return found


@pytest.mark.parametrize("pname", ["cuda_compat", "nvidia_driver"])
def test_cuda_compat_impl_holds_what_the_recipe_makes(pname: str, tmp_path: Path) -> None:
    tarball = compat_tarball(tmp_path, pname)
    report = split_to_dir(tarball, tmp_path / "out", SplitOptions(profile="conda-forge"))
    assert report.problems == []
    impl = tmp_path / "out/cuda-compat-impl"
    held = {p.relative_to(impl).as_posix() for p in impl.rglob("*")
            if (p.is_file() or p.is_symlink()) and not p.relative_to(impl).as_posix().startswith("info")}
    prefix = tmp_path / "prefix"
    install_prefix(pname, _members(tmp_path), "linux-x86_64", prefix)
    recipe = {o.name: o for o in outputs_for(
        conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64").recipes, pname,
        "linux-x86_64")}
    assert held == select(prefix, recipe["cuda-compat-impl"].files)
    assert "cuda-compat/libnvidia-pkcs11.so.1" not in held  # the recipe copies four libraries
    assert os.readlink(impl / "cuda-compat/libcuda.so") == "libcuda.so.1"
    entries = dynamic_entries(impl / f"cuda-compat/libcuda.so.{DRIVER}")
    assert entries.get("RPATH") == ["$ORIGIN"] and "RUNPATH" not in entries


def _contents(package: Path) -> dict[str, str | None]:
    with zipfile.ZipFile(package) as zf:
        name = next(n for n in zf.namelist() if n.startswith("pkg-"))
        data = zstandard.ZstdDecompressor().decompressobj().decompress(zf.read(name))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m.linkname if m.issym() else None for m in tar if not m.isdir()}


@pytest.mark.parametrize("pname", ["cuda_compat", "nvidia_driver"])
def test_the_package_links_say_what_conda_build_leaves_them_saying(pname: str,
                                                                   tmp_path: Path) -> None:
    """``libcuda.so -> libcuda.so.1`` (the recipe's chain) is packed as conda-build packs it:
    ``libcuda.so -> libcuda.so.<driver>``."""
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    result = repack_to_dir(compat_tarball(tmp_path, pname), tmp_path / "channel",
                           SplitOptions(profile="conda-forge", cuda_version="13.0.2"),
                           RepackOptions(fmt="conda", level=1))
    impl = next(p for p in result.archives if p.name.startswith("cuda-compat-impl-"))
    prefix = tmp_path / "prefix"
    install_prefix(pname, _members(tmp_path), "linux-x86_64", prefix)
    recipe = {o.name: o for o in outputs_for(
        conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64").recipes, pname,
        "linux-x86_64")}
    assert _contents(impl) == packaged(prefix, select(prefix, recipe["cuda-compat-impl"].files))
    assert _contents(impl)["cuda-compat/libcuda.so"] == f"libcuda.so.{DRIVER}"


def test_the_two_packages_have_the_driver_and_the_cuda_versions(tmp_path: Path) -> None:
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    result = repack_to_dir(compat_tarball(tmp_path), tmp_path / "channel",
                           SplitOptions(profile="conda-forge", cuda_version="13.0.2"),
                           RepackOptions(fmt="conda", level=1))
    names = {p.name for p in result.archives}
    assert any(n.startswith(f"cuda-compat-impl-{DRIVER}-") for n in names), names
    assert any(n.startswith("cuda-compat-13.0.2-") for n in names), names
    assert any(n.startswith("cuda-version-13.0-") for n in names), names
    meta = next(p for p in result.archives if p.name.startswith("cuda-compat-13.0.2"))
    with zipfile.ZipFile(meta) as zf:
        info = next(n for n in zf.namelist() if n.startswith("info-"))
        data = zstandard.ZstdDecompressor().decompressobj().decompress(zf.read(info))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        index = json.load(tar.extractfile("info/index.json"))  # type: ignore[arg-type]
    impl_build = next(p for p in result.archives if "impl" in p.name).name.rsplit("-", 1)[1]
    assert index["depends"] == [f"cuda-compat-impl {DRIVER} {impl_build.removesuffix('.conda')}"]
