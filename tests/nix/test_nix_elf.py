"""Real ``nix-build``: interpreter and DT_NEEDED resolution from the builder's environment.

The builder gets a ``NIX_CC``-style directory whose ``nix-support/dynamic-linker`` names a copy
of the system loader, and ``NIX_LDFLAGS`` with a ``-L`` directory holding copies of
``libstdc++.so.6`` and ``libgcc_s.so.1``. The package is made of real NVIDIA bytes (CUDA 13
nvcc/nvrtc wheels: ``fatbinary`` and ``__nvcc_device_query`` need ``libgcc_s.so.1``/
``libstdc++.so.6``, so does ``libnvrtc-builtins``). The split executables must carry that
interpreter and RUNPATH and run inside the build; without the ``-L`` directory the build fails
with the one unresolved-library message.

The loader copy sits under a store-like path (``<tmp>/nix/store/<32>-glibc-2.40-66/lib/``),
far longer than the 28 bytes of NVIDIA's ``PT_INTERP``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cudasplit._elf.read import read_elf_info
from tests.nix.test_nix import CHECKOUT, Nix, _outputs, nix  # noqa: F401  (fixture)
from tests.support.realwheels import wheel_root
from tests.support.tarutil import write_archive

pytestmark = pytest.mark.nix

TOP = "cuda_demo-linux-x86_64-13.0.88-archive"
OUTPUTS = ("out", "lib")


def _host_library(name: str) -> Path:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True)
    path = Path(found.stdout.strip()).resolve()
    if not path.is_file():
        pytest.skip(f"gcc does not know {name}")
    return path


@pytest.fixture(scope="module")
def real_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = wheel_root("nvidia-cuda-nvcc", "13.0.88") / "nvidia" / "cu13"
    nvrtc = wheel_root("nvidia-cuda-nvrtc", "13.0.88") / "nvidia" / "cu13"
    entries = [("file", f"bin/{n}", (nvcc / "bin" / n).read_bytes())
               for n in ("fatbinary", "__nvcc_device_query")]
    entries.append(("file", "lib/libnvrtc-builtins.so.13.0",
                    (nvrtc / "lib" / "libnvrtc-builtins.so.13.0").read_bytes()))
    root = tmp_path_factory.mktemp("nixelf")
    return write_archive(root / f"{TOP}.tar.gz", entries, codec="gz", top=TOP)


@pytest.fixture(scope="module")
def build_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nixcc")
    libs = root / "gcc-lib" / "lib"
    libs.mkdir(parents=True)
    for name in ("libstdc++.so.6", "libgcc_s.so.1"):
        shutil.copy(_host_library(name), libs / name)
    system = read_elf_info(Path(sys.executable).resolve())
    assert system is not None and system.interp is not None
    loader_dir = root / "nix" / "store" / f"{uuid.uuid4().hex}-glibc-2.40-66" / "lib"
    loader_dir.mkdir(parents=True)
    shutil.copy(Path(system.interp).resolve(), loader_dir / "ld-linux-x86-64.so.2")
    cc = root / "cc"
    (cc / "nix-support").mkdir(parents=True)
    loader = loader_dir / "ld-linux-x86-64.so.2"
    (cc / "nix-support" / "dynamic-linker").write_text(f"{loader}\n")
    return {"libs": libs, "loader": loader, "cc": cc}


def _script() -> str:
    return (f"export PYTHONPATH={CHECKOUT}\n"
            f'{sys.executable} -m cudasplit split "@src@" --nix --default-rules -q '
            '--report "$NIX_BUILD_TOP/report.json" || exit 1\n'
            '"$out/bin/fatbinary" --version > "$out/fatbinary-version.txt" || exit 1\n'
            '/bin/cp "$NIX_BUILD_TOP/report.json" "$out/report.json"\n')


def test_nix_build_sets_interpreter_and_resolves_from_ldflags(
        nix: Nix, real_tarball: Path, build_env: dict[str, Path]) -> None:  # noqa: F811
    extra = {"NIX_CC": str(build_env["cc"]), "NIX_LDFLAGS": f"-L{build_env['libs']} -lfoo"}
    result = nix.build("cudasplit-test-elf", _script(), src=real_tarball, outputs=OUTPUTS,
                       extra=extra)
    assert result.returncode == 0, result.stderr[-3000:]
    out = _outputs(result.stdout, OUTPUTS)
    assert "fatbinary" in (out["out"] / "fatbinary-version.txt").read_text().lower()
    for name in ("fatbinary", "__nvcc_device_query"):
        info = read_elf_info(out["out"] / "bin" / name)
        assert info is not None and info.interp == str(build_env["loader"])
        assert info.runpath is not None and str(build_env["libs"]) in info.runpath.split(":")
    builtins = read_elf_info(out["lib"] / "lib" / "libnvrtc-builtins.so.13.0")
    assert builtins is not None and builtins.interp is None
    assert str(build_env["libs"]) in (builtins.runpath or "").split(":")
    report = json.loads((out["out"] / "report.json").read_text())
    record = next(m for m in report["members"] if m["path"] == "bin/fatbinary")
    assert record["interpreter_before"] == "/lib64/ld-linux-x86-64.so.2"
    assert record["interpreter_after"] == str(build_env["loader"])
    assert not report["problems"]


def test_nix_build_fails_on_a_missing_library_with_one_message(
        nix: Nix, real_tarball: Path, build_env: dict[str, Path]) -> None:  # noqa: F811
    extra = {"NIX_CC": str(build_env["cc"]), "NIX_LDFLAGS": "-lfoo"}
    result = nix.build("cudasplit-test-elf-missing", _script(), src=real_tarball,
                       outputs=OUTPUTS, extra=extra)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "resolve nowhere" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    for part in ("bin/fatbinary (libgcc_s.so.1)",
                 "bin/__nvcc_device_query (libstdc++.so.6, libgcc_s.so.1)",
                 "lib/libnvrtc-builtins.so.13.0 (libstdc++.so.6, libgcc_s.so.1)",
                 "--ignore-missing"):
        assert part in lines[0]
