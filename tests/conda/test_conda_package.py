"""``repack --format conda`` on a small gcc-built cuda_cudart archive: the packages' metadata,
their bytes run to run, and a real conda client (py-rattler) installing them."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from cudasplit import RepackOptions, SplitOptions, repack_to_dir
from cudasplit._release.conda import conda_profile
from cudasplit._rulebook import default_rules_dir, load_ruleset
from tests.conda.client import install
from tests.conda.synthetic import VERSION, cccl_tarball, cudart_tarball

pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")

CONDA = SplitOptions(profile="conda-forge")
PACK = RepackOptions(fmt="conda", level=3)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cudart_tarball(tmp_path_factory.mktemp("cudart"))


@pytest.fixture(scope="module")
def channel(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("channel")
    repack_to_dir(tarball, out, CONDA, PACK)
    return out


def _info(package: Path) -> dict[str, bytes]:
    """The info/ component of a .conda, by member name."""
    with zipfile.ZipFile(package) as zf:
        name = next(n for n in zf.namelist() if n.startswith("info-"))
        data = zstandard.ZstdDecompressor().decompressobj().decompress(zf.read(name))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def test_channel_has_a_package_per_output_in_its_subdir(channel: Path) -> None:
    names = {sub: {p.name.rsplit("-", 2)[0] for p in (channel / sub).glob("*.conda")}
             for sub in os.listdir(channel)}
    assert names == {
        "linux-64": {"cuda-cudart", "cuda-cudart-dev", "cuda-cudart-static", "cuda-driver-dev"},
        "noarch": {"cuda-cudart_linux-64", "cuda-cudart-dev_linux-64", "cuda-version",
                   "cuda-cudart-static_linux-64", "cuda-driver-dev_linux-64"}}


def test_index_paths_and_run_exports(channel: Path) -> None:
    dev = next((channel / "linux-64").glob("cuda-cudart-dev-*.conda"))
    info = _info(dev)
    index = json.loads(info["info/index.json"])
    assert index["name"] == "cuda-cudart-dev" and index["subdir"] == "linux-64"
    assert f"cuda-cudart {VERSION} {index['build']}" in index["depends"]
    assert json.loads(info["info/run_exports.json"]) == {
        "weak": [f"cuda-cudart >={VERSION},<14.0a0"]}
    paths = {p["_path"]: p for p in json.loads(info["info/paths.json"])["paths"]}
    placeholder = conda_profile(default_rules_dir(), "conda-forge", "linux-x86_64").placeholder
    pc = paths["lib/pkgconfig/cudart-13.0.pc"]
    assert pc["prefix_placeholder"] == placeholder and pc["file_mode"] == "text"
    link = paths["lib/libcudart.so"]
    assert link["path_type"] == "softlink" and link["size_in_bytes"] > 0  # its target's
    assert info["info/licenses/LICENSE"].startswith(b"stand-in")
    runtime = next((channel / "noarch").glob("cuda-cudart_linux-64-*.conda"))
    target = json.loads(_info(runtime)["info/index.json"])
    assert target["noarch"] == "generic" and target["subdir"] == "noarch"
    assert target["build"] == index["build"]  # exact pins between a recipe's outputs hold


def test_packages_are_the_same_bytes_every_run(tarball: Path, channel: Path,
                                               tmp_path: Path) -> None:
    again = tmp_path / "again"
    repack_to_dir(tarball, again, CONDA, PACK)
    for package in channel.rglob("*.conda"):
        twin = again / package.relative_to(channel)
        assert twin.read_bytes() == package.read_bytes(), package.name


def test_a_different_package_of_the_same_name_is_refused(tarball: Path, tmp_path: Path) -> None:
    from cudasplit import OutputError

    out = tmp_path / "channel"
    repack_to_dir(tarball, out, CONDA, PACK)
    repack_to_dir(tarball, out, CONDA, PACK)  # the same bytes: fine
    with pytest.raises(OutputError, match="a different package"):
        repack_to_dir(tarball, out, CONDA, RepackOptions(fmt="conda", level=3, mtime=1))


def test_rattler_installs_the_channel_and_fills_the_prefix(channel: Path, tmp_path: Path) -> None:
    pytest.importorskip("rattler", reason="py-rattler not installed")
    with_cccl = tmp_path / "channel"
    shutil.copytree(channel, with_cccl)
    repack_to_dir(cccl_tarball(tmp_path), with_cccl, CONDA, PACK)
    prefix = tmp_path / "prefix"
    records = asyncio.run(install(with_cccl, ["cuda-cudart-dev", "cuda-driver-dev"], prefix,
                                  tmp_path / "cache"))
    assert "cuda-cudart_linux-64" in {r.name.normalized for r in records}
    assert os.path.realpath(prefix / "lib/libcudart.so") == str(
        prefix / "targets/x86_64-linux/lib" / f"libcudart.so.{VERSION}")
    assert (prefix / "lib/stubs/libcuda.so").resolve().is_file()
    # conda replaced the placeholder with the prefix
    pc = (prefix / "lib/pkgconfig/cudart-13.0.pc").read_text()
    assert f"cudaroot={prefix}\n" in pc



def test_an_output_without_metadata_fails_and_leaves_nothing(tarball: Path,
                                                            tmp_path: Path) -> None:
    from cudasplit import OutputError

    rules = tmp_path / "extra.toml"
    shipped = load_ruleset("cuda_cudart", profile="conda-forge", platform="linux-x86_64")
    outputs = ", ".join(f'"{o}"' for o in (*(shipped.package.outputs or ()), "cuda-extra"))
    rules.write_text(f'schema = 1\n[package]\noutputs = [{outputs}]\n'
                     '[[rule]]\nname = "x"\nmatch = ["include/**"]\noutput = "cuda-extra"\n')
    channel = tmp_path / "new" / "channel"
    options = SplitOptions(profile="conda-forge", rules_files=(str(rules),))
    with pytest.raises(OutputError, match="'cuda-extra' has no conda metadata"):
        repack_to_dir(tarball, channel, options, PACK)
    assert not (tmp_path / "new").exists()
