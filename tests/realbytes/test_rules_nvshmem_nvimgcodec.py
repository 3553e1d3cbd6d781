"""Package rules for NVSHMEM (libnvshmem) and nvImageCodec (nvimgcodec), on their wheels' bytes.

NVIDIA publishes both as redistributables (compute/nvshmem/redist/libnvshmem/,
compute/nvimgcodec/redist/nvimgcodec/) and as PyPI wheels; the tarballs are laid out here from
the wheels (``nvidia-nvshmem-cu12`` 3.8.0, ``nvidia-nvimgcodec-cu12`` 0.9.0.20, downloaded into
``~/.cache/cudasplit`` by tests/realwheels.py) the way the archives are: the SONAME chain
``libX.so -> libX.so.N -> libX.so.<version>`` in ``lib/`` (``lib64/`` for nvImageCodec, whose
codec plugins sit in a sibling ``extensions/``), ``include/``, a LICENSE. Only NVSHMEM's
per-architecture bitcode beyond sm_90 is left out (four more copies of one 50 MB file).
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest

from cudasplit import RunpathPolicy, SplitOptions, split_to_dir
from cudasplit._elf.read import read_elf_info
from cudasplit.outputs import ldd
from cudasplit.rules import load_ruleset
from tests.support.builders import compile_shared, have_compiler

NVSHMEM = ("nvidia-nvshmem-cu12", "3.8.0")
NVIMGCODEC = ("nvidia-nvimgcodec-cu12", "0.9.0.20")
# What the plugins and the host library NEED from outside the package (InfiniBand, UCX, PMIx,
# MPI, OpenSHMEM, libfabric; the C++ runtime): a Nix build supplies them or ignores them.
EXTERNAL = ("libstdc++.so.6", "libgcc_s.so.1", "libmlx5.so.1", "libucs.so.0", "libucp.so.0",
            "libpmix.so.2", "libmpi.so.40", "liboshmem.so.40", "libfabric.so.1")


def _chain(lib_dir: Path, wheel_file: Path, version: str) -> None:
    """``libX.so.N`` of the wheel -> ``libX.so.<version>`` plus the two links, as NVIDIA ships."""
    stem, _, major = wheel_file.name.partition(".so.")
    full = f"{stem}.so.{version}"
    shutil.copy2(wheel_file, lib_dir / full)
    os.symlink(full, lib_dir / f"{stem}.so.{major}")
    os.symlink(f"{stem}.so.{major}", lib_dir / f"{stem}.so")


def _tar(top: Path) -> Path:
    archive = top.parent / f"{top.name}.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(top, arcname=top.name)
    return archive


@pytest.fixture(scope="module")
def nvshmem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.realwheels import wheel_root

    wheel = wheel_root(*NVSHMEM) / "nvidia" / "nvshmem"
    top = tmp_path_factory.mktemp("nvshmem") / "libnvshmem-linux-x86_64-3.8.0_cuda12-archive"
    (top / "lib").mkdir(parents=True)
    shutil.copytree(wheel / "include", top / "include")
    shutil.copytree(wheel / "share", top / "share")
    (top / "LICENSE").write_text("NVSHMEM: see NVIDIA's license (test tarball from a wheel)\n")
    for item in sorted((wheel / "lib").iterdir()):
        if item.name.startswith("libnvshmem_host.so."):
            _chain(top / "lib", item, "3.8.0")
        elif not item.name.endswith(".bc") or item.name == "libnvshmem_device_sm_90.bc":
            shutil.copy2(item, top / "lib" / item.name)
    return _tar(top)


@pytest.fixture(scope="module")
def nvimgcodec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.realwheels import wheel_root

    wheel = wheel_root(*NVIMGCODEC) / "nvidia" / "nvimgcodec"
    top = (tmp_path_factory.mktemp("nvimgcodec")
           / "nvimgcodec-linux-x86_64-0.9.0.20_cuda12-archive")
    (top / "lib64").mkdir(parents=True)
    _chain(top / "lib64", wheel / "libnvimgcodec.so.0", "0.9.0")
    shutil.copytree(wheel / "extensions", top / "extensions")
    shutil.copytree(wheel / "include", top / "include")
    (top / "LICENSE.txt").write_text("nvImageCodec: Apache-2.0 (test tarball from a wheel)\n")
    return _tar(top)


def test_rule_files_load() -> None:
    assert load_ruleset("libnvshmem").package.outputs == (
        "out", "bin", "dev", "doc", "include", "lib", "static")
    assert load_ruleset("nvimgcodec").package.outputs == ("out", "dev", "include", "lib")


def test_nvshmem_split(nvshmem: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    report = split_to_dir(nvshmem, out, SplitOptions(
        strict=True, nix_markers=True, runpath=RunpathPolicy(ignore_missing=EXTERNAL)))
    assert report.package["name"] == "libnvshmem"
    lib = out / "lib" / "lib"
    host = lib / "libnvshmem_host.so.3.8.0"
    assert host.is_file() and os.readlink(lib / "libnvshmem_host.so.3") == host.name
    # The bootstrap and transport plugins the host library dlopens by name stay beside it,
    # and every one of them (and the host library) searches its own directory.
    plugins = sorted(p.name for p in lib.glob("nvshmem_*.so.*"))
    assert len(plugins) == 12 and "nvshmem_bootstrap_uid.so.3" in plugins
    for view in ldd(lib, system=False):
        info = read_elf_info(view.path)
        assert info is not None and "$ORIGIN" in (info.runpath or "").split(":"), view.path
    assert b"nvshmem_bootstrap_uid.so" in host.read_bytes()  # the name it opens
    # Build-time device code: the archive and the bitcode in static, propagated through dev.
    assert sorted(p.name for p in (out / "static" / "lib").iterdir()) == [
        "libnvshmem_device.a", "libnvshmem_device_sm_90.bc"]
    propagated = (out / "dev/nix-support/propagated-build-inputs").read_text()
    assert str((out / "static").resolve()) in propagated, propagated
    assert "static" not in (out / "out/nix-support/propagated-build-inputs").read_text()
    assert (out / "include" / "include" / "nvshmem.h").is_file()
    assert (out / "doc" / "share" / "skills" / "README.md").is_file()
    assert not list((out / "lib").rglob("*.a")) and not list((out / "lib").rglob("*.bc"))


@pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")
def test_nvimgcodec_split(nvimgcodec: Path, tmp_path: Path) -> None:
    # Stand-ins for the three packages the codec extensions dlopen.
    roots = {}
    for pname, soname in (("libnvjpeg", "libnvjpeg.so.12"), ("libnvjpeg_2k", "libnvjpeg2k.so.0"),
                          ("libnvtiff", "libnvtiff.so.0")):
        root = tmp_path / pname
        compile_shared(root / "lib", soname, "int f(void){return 0;}", soname=soname)
        roots[pname] = str(root)
    out = tmp_path / "o"
    report = split_to_dir(nvimgcodec, out, SplitOptions(
        strict=True, package_roots=tuple(roots.items()),
        runpath=RunpathPolicy(ignore_missing=("libstdc++.so.6", "libgcc_s.so.1"))))
    assert report.package["name"] == "nvimgcodec"
    lib = out / "lib"
    assert (lib / "lib" / "libnvimgcodec.so.0.9.0").is_file()
    assert os.readlink(lib / "lib64") == "lib"
    # The plugins keep their place relative to the library: <lib>/lib/../extensions.
    extensions = sorted(p.name for p in (lib / "lib" / ".." / "extensions").iterdir())
    assert extensions == sorted(p.name for p in
                                (Path(nvimgcodec.parent) / nvimgcodec.stem / "extensions").iterdir())
    assert (out / "include" / "include" / "nvimgcodec.h").is_file()
    # Each codec extension now finds the library it dlopens in that package's root.
    loads = {Path(v.path).name: {r.name: r.path for r in v.dlopen}
             for v in ldd(lib / "extensions", system=False)}
    assert loads["libnvjpeg_ext.so.0.9.0"]["libnvjpeg.so.12"] == \
        f"{roots['libnvjpeg']}/lib/libnvjpeg.so.12"
    assert loads["libnvjpeg2k_ext.so.0.9.0"]["libnvjpeg2k.so.0"] == \
        f"{roots['libnvjpeg_2k']}/lib/libnvjpeg2k.so.0"
    assert loads["libnvtiff_ext.so.0.9.0"]["libnvtiff.so.0"] == \
        f"{roots['libnvtiff']}/lib/libnvtiff.so.0"
