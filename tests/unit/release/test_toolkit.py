"""Issue 25, fast half: target platform checks of compiler packages and the toolkit view.

Split directories are laid out by hand (what ``split -o`` writes: ``DIR/<output>/...``) with
ELF headers of the machine wanted: only ``e_machine`` is read. The real-byte cross build is
tests/test_cross.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit import (
    OptionsError,
    PackageId,
    ProblemsFound,
    SplitOptions,
    ToolkitError,
    split_to_dir,
)
from cudasplit._elf.read import EM_AARCH64, EM_X86_64, elf_machine
from cudasplit._release.toolkit import NVCC_PROFILE
from cudasplit._split.rewrites import ProfileExtras, rewrite_nvcc_profile
from cudasplit.cli import main
from cudasplit.outputs import toolkit_view
from tests.support.tarutil import write_archive

NVCC_TOP = "cuda_nvcc-linux-x86_64-13.0.88-archive"


def fake_elf(machine: int) -> bytes:
    """An ELF header (64-bit little-endian shared object) of ``machine``; nothing else."""
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + (3).to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44)


def put(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def cudart(tmp: Path, name: str, machine: int) -> Path:
    """A cuda_cudart split: include/, lib/ (with the soname chain) and static/ outputs."""
    split = tmp / name
    put(split, "include/include/cuda_runtime.h", "/* runtime */\n")
    put(split, "lib/lib/libcudart.so.13.0.96", fake_elf(machine))
    os.symlink("libcudart.so.13.0.96", split / "lib/lib/libcudart.so.13")
    put(split, "static/lib/libcudart_static.a", b"!<arch>\n")
    put(split, "out/LICENSE", "license\n")
    return split


@pytest.fixture
def splits(tmp_path: Path) -> dict[str, Path]:
    nvcc = tmp_path / "cuda_nvcc"
    put(nvcc, "out/bin/nvcc", fake_elf(EM_X86_64))
    put(nvcc, "out/bin/nvcc.profile", "TOP = /split/nvcc\n")
    put(nvcc, "out/include/fatbinary_section.h", "/* nvcc */\n")
    nvvm = tmp_path / "libnvvm"
    put(nvvm, "out/bin/cicc", fake_elf(EM_X86_64))
    put(nvvm, "out/libdevice/libdevice.10.bc", b"BC")
    crt = tmp_path / "cuda_crt"
    put(crt, "out/include/crt/host_config.h", "/* crt */\n")
    put(crt, "out/nix-support/propagated-build-inputs", "")
    return {"cuda_nvcc": nvcc, "libnvvm": nvvm, "cuda_crt": crt,
            "cudart_x86": cudart(tmp_path, "cudart_x86", EM_X86_64),
            "cudart_sbsa": cudart(tmp_path, "cudart_sbsa", EM_AARCH64)}


# -- the toolkit view ---------------------------------------------------------------------------


def test_view_lays_out_nvidias_prefix_for_two_targets(splits: dict[str, Path],
                                                      tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    view = toolkit_view(list(splits.values()), root)
    assert view.host == "targets/x86_64-linux"
    assert view.targets == ("targets/sbsa-linux", "targets/x86_64-linux")
    # bin/ is real, its nvcc a link, its profile NVIDIA's (the split's is not used)
    assert (root / "bin/nvcc").is_symlink() and not (root / "bin").is_symlink()
    assert (root / "bin/nvcc.profile").read_text() == NVCC_PROFILE
    assert "$(_TARGET_DIR_)" in NVCC_PROFILE and "TOP              = $(_HERE_)/.." in NVCC_PROFILE
    assert (root / "nvvm/bin/cicc").resolve() == (splits["libnvvm"] / "out/bin/cicc")
    assert (root / "nvvm/libdevice/libdevice.10.bc").read_bytes() == b"BC"
    for target, machine in (("x86_64-linux", EM_X86_64), ("sbsa-linux", EM_AARCH64)):
        tdir = root / "targets" / target
        # headers of machine-free packages serve every target; libraries only their own
        assert (tdir / "include/crt/host_config.h").is_file()
        assert (tdir / "include/fatbinary_section.h").is_file()
        assert (tdir / "include/cuda_runtime.h").is_file()
        assert elf_machine(tdir / "lib/libcudart.so.13") == machine
        assert (tdir / "lib/libcudart_static.a").is_file()
    assert os.readlink(root / "include") == "targets/x86_64-linux/include"
    assert os.readlink(root / "lib64") == "targets/x86_64-linux/lib"
    assert not (root / "LICENSE").exists() and not (root / "nix-support").exists()
    assert all(Path(target).is_absolute() for _path, target in view.links)


def test_view_of_one_split_links_whole_directories(splits: dict[str, Path],
                                                   tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    toolkit_view([splits["cuda_crt"]], root)
    assert os.readlink(root / "targets/x86_64-linux/include") == \
        str(splits["cuda_crt"] / "out/include")


def test_equal_bytes_agree_and_different_bytes_name_both(splits: dict[str, Path],
                                                        tmp_path: Path) -> None:
    twin = tmp_path / "crt_twin"
    put(twin, "out/include/crt/host_config.h", "/* crt */\n")
    toolkit_view([splits["cuda_crt"], twin], tmp_path / "ok")
    put(twin, "out/include/crt/host_config.h", "/* another crt */\n")
    with pytest.raises(ToolkitError) as caught:
        toolkit_view([splits["cuda_crt"], twin], tmp_path / "bad")
    message = str(caught.value)
    assert "targets/x86_64-linux/include/crt/host_config.h" in message
    assert str(splits["cuda_crt"]) in message and str(twin) in message
    assert not (tmp_path / "bad").exists()
    assert [p.name for p in tmp_path.iterdir() if ".cudasplit-" in p.name] == []


def test_batch_directory_dry_run_and_overwrite(splits: dict[str, Path], tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    for name in ("cuda_crt", "cudart_sbsa"):
        os.rename(splits[name], batch / f"{name}-13.0")
    root = tmp_path / "cuda"
    planned = toolkit_view([batch], root, dry_run=True)
    assert not root.exists() and planned.targets == ("targets/sbsa-linux",
                                                     "targets/x86_64-linux")
    toolkit_view([batch], root)
    with pytest.raises(ToolkitError, match="exists"):
        toolkit_view([batch], root)
    toolkit_view([batch], root, overwrite=True, arm_target="aarch64-linux")
    assert (root / "targets/aarch64-linux/lib/libcudart.so.13").exists()
    assert not (root / "targets/sbsa-linux").exists()


def test_not_a_split_output_is_refused(tmp_path: Path) -> None:
    put(tmp_path / "junk", "readme.txt", "x")
    with pytest.raises(ToolkitError, match="no split outputs"):
        toolkit_view([tmp_path / "junk"], tmp_path / "cuda")


def test_cli_toolkit(splits: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    result = CliRunner().invoke(main, ["toolkit", *map(str, splits.values()), "-o", str(root),
                                       "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == ["bin/nvcc.profile"]
    put(splits["cudart_sbsa"], "include/include/cuda_runtime.h", "/* other */\n")
    put(splits["cudart_sbsa"], "lib/lib/libcudart.so.13.0.96", fake_elf(EM_X86_64))  # now x86
    result = CliRunner().invoke(main, ["toolkit", *map(str, splits.values()), "-o",
                                       str(tmp_path / "again")])
    assert result.exit_code == 2
    assert "targets/x86_64-linux/include/cuda_runtime.h is provided by both" in result.stderr


# -- nvcc.profile keeps $(_TARGET_DIR_) -----------------------------------------------------------


def test_profile_keeps_target_dir_relative_to_nvcc_first() -> None:
    """In nvcc.profile ``+=`` prepends and ``=+`` appends (nvcc -dryrun shows it): the kept
    lines go where their directories end up first."""
    text = ('TOP = $(_HERE_)/..\n'
            'INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)\n'
            'LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"\n')
    roots = {"include": "/inc", "lib": "/lib", "stubs": "/stubs", "nvvm": "/nvvm", "bin": "/b"}
    extras = ProfileExtras(includes=("/cudart/include",), libraries=("/cudart/lib",))
    lines = [line for line in rewrite_nvcc_profile(text, roots, extras).splitlines()
             if line and not line.startswith("#")]
    # The package roots' flags join the first assignment of each variable (what CMake reads);
    # the kept target-dir copies are placed to come first.
    assert lines[1:] == [
        'INCLUDES        +=  "-I/inc/include" "-I/cudart/include" $(_SPACE_)',
        'LIBRARIES        =+ $(_SPACE_) "-L$(_HERE_)/../$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)" '
        '"-L/cudart/lib"',
        'LIBRARIES        =+ $(_SPACE_) "-L/lib/lib"',
        'INCLUDES        +=  "-I$(_HERE_)/../$(_TARGET_DIR_)/include" $(_SPACE_)']
    assert "$(_HERE_)" not in rewrite_nvcc_profile(text, roots, keep_target_dir=False)


# -- --target-platform and the machines of package roots -----------------------------------------


def nvcc_tarball(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{NVCC_TOP}.tar.xz",
                         [("file", "bin/nvcc.profile", b"TOP = $(_HERE_)/..\n")], top=NVCC_TOP)


def test_cudart_root_of_the_wrong_machine_fails_before_writing(splits: dict[str, Path],
                                                               tmp_path: Path) -> None:
    x86 = str(splits["cudart_x86"] / "lib")
    options = SplitOptions(target_platform="linux-sbsa", package_roots=(("cuda_cudart.lib", x86),))
    with pytest.raises(OptionsError) as caught:
        split_to_dir(nvcc_tarball(tmp_path), tmp_path / "out", options)
    assert "lib/libcudart.so.13.0.96 is x86-64" in str(caught.value)
    assert "linux-sbsa needs AArch64" in str(caught.value)
    assert not (tmp_path / "out").exists()
    # the same root for the archive's own platform (the default target) is fine
    split_to_dir(nvcc_tarball(tmp_path), tmp_path / "out",
                 SplitOptions(package_roots=(("cuda_cudart.lib", x86),)))
    sbsa = str(splits["cudart_sbsa"] / "lib")
    split_to_dir(nvcc_tarball(tmp_path), tmp_path / "out2",
                 SplitOptions(target_platform="linux-sbsa",
                              package_roots=(("cuda_cudart.lib", sbsa),)))


def test_cli_target_platform_mismatch_exits_nonzero(splits: dict[str, Path],
                                                    tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [
        "split", str(nvcc_tarball(tmp_path)), "-o", str(tmp_path / "out"),
        "--target-platform", "linux-sbsa",
        "--package-root", f"cuda_cudart={splits['cudart_x86'] / 'lib'}"])
    assert result.exit_code == 2
    assert "is x86-64, but the target platform linux-sbsa needs AArch64" in result.stderr


def test_copied_pieces_must_run_on_the_build_machine(tmp_path: Path) -> None:
    nvvm = tmp_path / "nvvm"
    put(nvvm, "bin/cicc", fake_elf(EM_AARCH64))
    options = SplitOptions(package_roots=(("libnvvm", str(nvvm)),))
    with pytest.raises(OptionsError, match=r"cicc \(copied to nvvm/bin/cicc\) is AArch64"):
        split_to_dir(nvcc_tarball(tmp_path), tmp_path / "out", options)
    put(nvvm, "bin/cicc", fake_elf(EM_X86_64))
    put(nvvm, "libdevice/libdevice.10.bc", b"BC")
    report = split_to_dir(nvcc_tarball(tmp_path), tmp_path / "out", options)
    copies = {c.dest: c for c in report.copies}
    assert copies["nvvm/bin/cicc"].machine == "x86-64"
    assert copies["nvvm/bin/cicc"].package == "libnvvm"
    assert copies["nvvm/libdevice/libdevice.10.bc"].machine is None
    assert report.as_dict()["copies"][0]["source"].startswith(str(nvvm))
    assert "copied 2 files of libnvvm (package_roots), ELF: x86-64" in report.summary_lines()


def test_platform_contradicting_the_archive_warns_and_fails_strict(tmp_path: Path) -> None:
    options = SplitOptions(platform="linux-sbsa", package=PackageId("cuda_crt", "linux-x86_64",
                                                                     "13.0.88"))
    archive = write_archive(tmp_path / "crt.tar.xz", [("file", "include/crt/a.h", b"")],
                            top="cuda_crt-linux-x86_64-13.0.88-archive")
    report = split_to_dir(archive, tmp_path / "out", options)
    assert [w.code for w in report.warnings] == ["platform-mismatch"]
    assert "contradicts the archive's platform linux-x86_64" in report.warnings[0].message
    with pytest.raises(ProblemsFound):
        split_to_dir(archive, tmp_path / "strict", SplitOptions(platform="linux-sbsa",
                                                                strict=True))
    assert split_to_dir(archive, tmp_path / "same",
                        SplitOptions(platform="linux-x86_64")).warnings == []


def test_target_platform_is_validated() -> None:
    with pytest.raises(OptionsError, match="target_platform"):
        SplitOptions(target_platform="sbsa")


def test_nix_library_dirs_include_a_cross_gccs_config_lib(tmp_path: Path) -> None:
    from cudasplit._nix import nix_library_dirs

    cc_lib = tmp_path / "gcc-13.2.0-lib"
    (cc_lib / "lib").mkdir(parents=True)
    (cc_lib / "aarch64-unknown-linux-gnu/lib").mkdir(parents=True)
    (cc_lib / "share/lib").mkdir(parents=True)  # not a triple
    assert nix_library_dirs({"buildInputs": str(cc_lib)}) == (
        f"{cc_lib}/lib", f"{cc_lib}/aarch64-unknown-linux-gnu/lib")
