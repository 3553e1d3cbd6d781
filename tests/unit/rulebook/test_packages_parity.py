"""Per-package differences from Nixpkgs 13.4 that issue 27 listed, now matched (the rest are in
docs/reference/packages-divergences.md with their reasons)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._rulebook import Where, load_ruleset
from tests.support.builders import have_compiler, pkgconfig_text, tree_from_reference

pytestmark = pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")


def _tree(tmp_path: Path, top: str, lines: list[str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{kind} {top}/{rest}\n" for kind, rest in
                               (line.split(" ", 1) for line in lines)))
    return tree_from_reference(listing, tmp_path / "tree")


@pytest.mark.parametrize(("pname", "outputs"), [
    ("cuda_profiler_api", ("out", "dev", "include")),
    ("fabricmanager", ("out", "bin", "dev", "include", "lib")),
    ("libnvidia_nscq", ("out", "lib")),
    ("cuda_nvprof", ("out", "bin", "lib")),
    ("cuda_cudart", ("out",)),
])
def test_outputs_as_nixpkgs(pname: str, outputs: tuple[str, ...]) -> None:
    assert load_ruleset(pname).package.outputs == outputs


def test_tensorrt_has_no_static_from_11() -> None:
    table = load_ruleset("tensorrt").package
    assert "static" in (table.outputs_for(Where("10.16.1.11")) or ())
    assert "static" not in (table.outputs_for(Where("11.3.0.5")) or ())
    assert "samples" not in (table.outputs_for(Where("11.3.0.5")) or ())


def test_cuda_compat_drops_the_openssl_1_1_pkcs11_module(tmp_path: Path) -> None:
    top = _tree(tmp_path, "cuda_compat-linux-x86_64-610.43.02_cuda13.3-archive", [
        "text LICENSE", "elf-so compat/libcuda.so.610.43.02",
        "elf-so compat/libnvidia-pkcs11.so.610.43.02",
        "elf-so compat/libnvidia-pkcs11-openssl3.so.610.43.02"])
    split_to_dir(top, tmp_path / "split", SplitOptions(patch=False))
    compat = tmp_path / "split/out/compat"
    assert sorted(p.name for p in compat.iterdir()) == [
        "libcuda.so.610.43.02", "libnvidia-pkcs11-openssl3.so.610.43.02"]


def test_collectx_bringup_lifts_opt_nvidia(tmp_path: Path) -> None:
    top = _tree(tmp_path, "collectx_bringup-linux-x86_64-1.21.0-archive", [
        "text LICENSE", "elf-exe opt/nvidia/collectx_bringup/bin/collectx_bringup"])
    split_to_dir(top, tmp_path / "split", SplitOptions(patch=False))
    assert (tmp_path / "split/out/bin/collectx_bringup").is_file()
    assert not (tmp_path / "split/out/opt").exists()


def test_nvprof_pc_requires_cuda(tmp_path: Path) -> None:
    top = tmp_path / "cuda_nvprof-linux-x86_64-12.9.79-archive"
    (top / "pkg-config").mkdir(parents=True)
    (top / "pkg-config/cuinj64-12.9.pc").write_text(
        pkgconfig_text("cuinj64", "CUDA injection", "12.9", "x86_64-linux", "-lcuinj64"))
    split_to_dir(top, tmp_path / "split", SplitOptions(patch=False))
    text = (tmp_path / "split/out/share/pkgconfig/cuinj64-12.9.pc").read_text()
    assert "Requires: cuda-12.9" in text


def test_nsight_compute_moves_ncu_and_its_trees_into_bin(tmp_path: Path) -> None:
    """Nixpkgs nsight_compute.nix: ncu, ncu-ui, host/<arch>, target/<arch> under bin/ (a file
    rename for ncu, prefix renames for the trees); Mesa and QNX still dropped."""
    top = _tree(tmp_path, "nsight_compute-linux-x86_64-2025.2.1.3-archive", [
        "text nsight-compute/2025.2.1/ncu", "text nsight-compute/2025.2.1/ncu-ui",
        "elf-exe nsight-compute/2025.2.1/target/linux-desktop-glibc_2_11_3-x64/ncu",
        "elf-so nsight-compute/2025.2.1/host/linux-desktop-glibc_2_11_3-x64/libQt6Core.so.6",
        "text nsight-compute/2025.2.1/host/linux-desktop-glibc_2_11_3-x64/Mesa/x.txt",
        "text nsight-compute/2025.2.1/target/qnx-t210-a64/x.txt",
        "text nsight-compute/2025.2.1/docs/index.html", "text nsight-compute/2025.2.1/ncu-x"])
    split_to_dir(top, tmp_path / "split", SplitOptions(patch=False))
    out = tmp_path / "split/out"
    assert (out / "bin/ncu").is_file() and (out / "bin/ncu-ui").is_file()
    assert (out / "bin/target/linux-desktop-glibc_2_11_3-x64/ncu").is_file()
    assert (out / "bin/host/linux-desktop-glibc_2_11_3-x64/libQt6Core.so.6").is_file()
    assert not (out / "bin/host/linux-desktop-glibc_2_11_3-x64/Mesa").exists()
    assert not (out / "bin/target/qnx-t210-a64").exists()
    assert (out / "ncu-x").is_file()  # a file rename is exact: ncu-x stays
    assert (tmp_path / "split/doc/docs/index.html").is_file()


def test_a_file_rename_takes_file_paths(tmp_path: Path) -> None:
    from cudasplit._rulebook import build_ruleset
    from cudasplit.errors import RulesError

    doc = {"rename": [{"name": "x", "from": "a/", "to": "b", "file": True}]}
    with pytest.raises(RulesError, match="file rename"):
        build_ruleset([("x.toml", doc)])
